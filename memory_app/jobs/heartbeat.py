"""Worker heartbeats: each Celery worker writes its own WorkerHeartbeat row every few seconds.

Why not Celery's control broadcast (`inspect active_queues`): a worker answers it from its main
process within the caller's short timeout, and a worker whose slots run long CPU-bound jobs on a
loaded machine missed that window, so the ops page called a busy worker dead. A thread of the
main process that writes a row every WORKER_HEARTBEAT_SECONDS is late by a scheduler tick at
worst, and the page reads the rows like any other data (no broker round trip per page view).

The thread opens a database connection for each beat and closes it after: the prefork pool
forks children from this process, and a child that inherited an open connection could close
the server session under it when it exits.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from memory_app.jobs.models import WorkerHeartbeat

logger = logging.getLogger(__name__)

# A row nobody has rewritten for this long belongs to a worker long gone: it is deleted, so the
# ops page's list of recently lost workers does not grow forever.
FORGET_AFTER = timedelta(days=1)


@dataclass
class WorkerIdentity:
    """What a worker says about itself in each beat."""

    name: str  # its hostname, "celery@host": the name its jobs' `worker` column carries
    pid: int
    concurrency: int
    queues: list[str] = field(default_factory=list)
    started_at: datetime = field(default_factory=timezone.now)


def beat(worker: WorkerIdentity, *, now: datetime | None = None) -> None:
    """Write the worker's row: alive now, with what it consumes."""
    now = now or timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        name=worker.name,
        defaults={
            "pid": worker.pid,
            "queues": sorted(worker.queues),
            "concurrency": worker.concurrency,
            "started_at": worker.started_at,
            "beat_at": now,
            "stopped_at": None,
        },
    )
    WorkerHeartbeat.objects.filter(beat_at__lt=now - FORGET_AFTER).delete()


def stopped(worker: WorkerIdentity) -> None:
    """The worker shut down cleanly: the ops page says so at once rather than after it stops beating."""
    WorkerHeartbeat.objects.filter(name=worker.name, pid=worker.pid).update(stopped_at=timezone.now())


def _identity_of(consumer: Any) -> WorkerIdentity:
    """A Celery consumer (the `worker_ready` signal's sender) described as a WorkerIdentity."""
    # The pool's limit is what runs at once (1 for the solo pool, whatever --concurrency says).
    limit = getattr(getattr(consumer, "pool", None), "limit", None)
    concurrency = limit or getattr(getattr(consumer, "controller", None), "concurrency", 0)
    return WorkerIdentity(
        name=str(consumer.hostname),
        pid=os.getpid(),
        concurrency=int(concurrency or 0),
        queues=_queues_of(consumer),
    )


def _queues_of(consumer: Any) -> list[str]:
    # Read at each beat: an operator may add or cancel a queue at run time (celery control).
    task_consumer = getattr(consumer, "task_consumer", None)
    return [str(queue.name) for queue in getattr(task_consumer, "queues", None) or ()]


class Heartbeat:
    """The thread that beats for one worker process until `stop()`."""

    def __init__(self, consumer: Any, interval: float) -> None:
        self.consumer = consumer
        self.worker = _identity_of(consumer)
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memsite-worker-heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.interval + 5)
        self._write(stopped, self.worker)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.worker.queues = _queues_of(self.consumer) or self.worker.queues
            self._write(beat, self.worker)
            self._stop.wait(self.interval)

    @staticmethod
    def _write(write: Any, worker: WorkerIdentity) -> None:
        try:
            write(worker)
        except Exception:  # a database that is down: the next beat tries again
            logger.warning("worker heartbeat not written", exc_info=True)
        finally:
            connections.close_all()


_running: list[Heartbeat] = []


def start_beating(sender: Any = None, **_: object) -> None:
    """`worker_ready` receiver: start this worker's heartbeat thread."""
    if sender is None or getattr(sender, "hostname", None) is None:
        return
    heartbeat = Heartbeat(sender, settings.WORKER_HEARTBEAT_SECONDS)
    _running.append(heartbeat)
    heartbeat.start()


def stop_beating(**_: object) -> None:
    """`worker_shutdown` receiver: stop beating and mark the worker stopped."""
    while _running:
        _running.pop().stop()
