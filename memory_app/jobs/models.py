"""The columns every durable job row has for the lifecycle's bookkeeping, in one abstract model."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class JobRecord(models.Model):
    """What an operator reads about a job beyond its own fields (the ops job detail page).

    The lifecycle (memory_app.jobs.lifecycle) writes these: `worker` when a worker claims it,
    `pending_since` each time it becomes pending (the sweeper's re-sends leave it alone, unlike the
    queue clock, so the ops page's "oldest pending" neither hides a stuck queue nor counts a
    retried job from its creation), and `traceback` when an attempt ends in an exception.
    """

    # The Celery worker (its hostname, "celery@host") that claimed the latest attempt.
    worker = models.CharField(max_length=200, blank=True)
    pending_since = models.DateTimeField(default=timezone.now)
    # The latest attempt's traceback, for operators only: `error` is the reason the API shows.
    traceback = models.TextField(blank=True)

    class Meta:
        abstract = True


class WorkerHeartbeat(models.Model):
    """A Celery worker's own account of itself, rewritten every few seconds by a thread of the
    worker's main process (memory_app.jobs.heartbeat): who it is, which queues it consumes, how
    many tasks it runs at once. The ops page reads liveness here, not from a control broadcast:
    a worker whose slots are all busy still beats, where it may miss a broadcast's short window."""

    name = models.CharField(max_length=200, unique=True)  # the worker's hostname, "celery@host"
    pid = models.PositiveIntegerField()
    queues = models.JSONField(default=list)  # the queue names it consumes
    concurrency = models.PositiveSmallIntegerField(default=0)  # its pool's slots
    started_at = models.DateTimeField()
    beat_at = models.DateTimeField()
    # Set when the worker shut down cleanly; a worker that died only stops beating.
    stopped_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.name
