"""gunicorn settings used by the Procfile: threaded workers sized for the event streams, and the
metrics hooks of prometheus_client's multiprocess mode (each worker writes its samples to
PROMETHEUS_MULTIPROC_DIR)."""

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


def _threads_per_worker() -> int:
    """Enough threads that a worker holding every stream the deployment allows still has
    MEMSITE_WEB_THREADS for the API (streams past the cap are refused before they take one)."""
    from django.conf import settings

    return settings.WEB_THREADS + settings.SSE_MAX_STREAMS


# A held connection (an event stream) costs a thread, not the process that serves the API:
# with sync workers two streams stalled the whole server. gthread also keeps idle keep-alive
# connections in its poller instead of a thread, and does not kill a request for outliving
# --timeout (the worker's heartbeat runs in its main loop).
worker_class = "gthread"
threads = _threads_per_worker()


def on_starting(server: Any) -> None:
    Path(_metrics_dir()).mkdir(parents=True, exist_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    """A worker died or was replaced: drop its live gauges (its counters stay in the sums)."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid, _metrics_dir())
