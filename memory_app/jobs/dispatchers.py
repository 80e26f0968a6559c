"""Where a job's task goes when the lifecycle sends it: the class named by `settings.JOB_DISPATCHER`.

Like Django's email backends: production sends through Celery; tests select the recording one by
the setting and read `outbox` instead of replacing functions. A dispatcher only moves the message;
the lifecycle (`memory_app.jobs.lifecycle.dispatch`) decides when, and logs and swallows what one
raises, since the job row is already durable and the sweeper sends it again.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from django.utils.module_loading import import_string

from memory_app.jobs.kinds import JobKind


class CeleryDispatcher:
    """Sends the kind's Celery task, by its registered name, to the queue its setting names."""

    def send(self, kind: JobKind, job_id: Any, countdown: float) -> None:
        task = import_string(kind.task)  # imported here: tasks import the services that import the lifecycle
        task.apply_async(args=(str(job_id),), countdown=countdown, queue=kind.queue)


class Sent(NamedTuple):
    task: str  # the kind's task name
    job_id: str
    countdown: float


# Every send the recording dispatcher took, in order, in this process (tests empty it).
outbox: list[Sent] = []


class RecordingDispatcher:
    """For tests: keeps each send in `outbox` and sends nothing (never configure it in production,
    where jobs would then never run and the outbox would only grow)."""

    def send(self, kind: JobKind, job_id: Any, countdown: float) -> None:
        outbox.append(Sent(kind.task, str(job_id), countdown))
