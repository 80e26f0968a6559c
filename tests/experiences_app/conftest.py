"""Fixtures for experiences: approved experiences (`admin_api` is in tests/conftest.py)."""

from __future__ import annotations

from experiences_app import services
from experiences_app.models import Experience
from memory_app.tenancy.models import Team


def add_experience(
    team: Team, exp_id: str, *, when: str, what: str, who: list[str] | None = None, status: str = "approved"
) -> Experience:
    return services.experience_create(
        team=team, exp_id=exp_id, who=who or [], when=when, what=what, actor="test", status=status
    )
