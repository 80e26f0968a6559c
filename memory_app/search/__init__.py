"""Recall: hybrid (full-text + vector) search over everything memsite remembers."""
