"""Sending a job's task to the broker without ever failing the write that queued it.

Every job is a database row first (CompactionRun, FactExtractionRun) and the task only
carries its id, so a send that fails loses nothing: the row stays pending and the
sweeper re-sends it. The send itself is bounded by the broker timeouts in settings
(`MEMSITE_BROKER_SEND_TIMEOUT`, the publish retry policy), so a broker that is down or
hanging costs a request seconds, not minutes.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import Task

log = logging.getLogger(__name__)


def dispatch(task: Task, *, run_id: Any, queue: str, countdown: float = 0) -> bool:
    """Send `task(run_id)`; on any broker error log it and return False (the sweeper re-sends)."""
    try:
        task.apply_async(args=[str(run_id)], countdown=countdown, queue=queue)
    except Exception as exc:  # kombu OperationalError, redis-py and socket errors alike: the row is durable
        log.warning("%s %s not sent (broker unavailable: %s); the sweeper will re-send it", task.name, run_id, exc)
        return False
    return True
