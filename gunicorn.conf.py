"""gunicorn settings used by the Procfile: the metrics hooks of prometheus_client's
multiprocess mode (each worker writes its samples to PROMETHEUS_MULTIPROC_DIR)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memsite.settings")


def _metrics_dir() -> str:
    # Only the settings module is read here: the master never loads the Django app, and
    # reading settings also exports PROMETHEUS_MULTIPROC_DIR to the workers it forks.
    from django.conf import settings

    return settings.PROMETHEUS_MULTIPROC_DIR


def on_starting(server: Any) -> None:
    Path(_metrics_dir()).mkdir(parents=True, exist_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    """A worker died or was replaced: drop its live gauges (its counters stay in the sums)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid, _metrics_dir())
