"""The one registry of durable job kinds.

Each kind is declared once, in its own domain, as a `JobKind`: everything the shared lifecycle,
the ops pages, the metrics and the retry paths need to know about it. memory_app's AppConfig
registers its kinds (memory_app.apps), in the order the ops pages list them; another app
registers its own from its AppConfig. Code that handles every kind (ops, metrics, the
dispatcher) reads them here, by key or all at once, and imports no domain: what a kind does is
reached through dotted paths (its Celery task, its retry service), imported when used, like
Django's backends and healthchecks' transports.

Every job model has a team, `status`, `error`, `attempts` and `created_at`, and the columns of
memory_app.jobs.models.JobRecord (`worker`, `pending_since`, `traceback`); what differs between
kinds is named in its JobKind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.utils.module_loading import import_string

from memsite.errors import NotFound


@dataclass(frozen=True)
class JobKind:
    """Everything memsite needs to know about one kind of durable job."""

    # --- who it is
    kind: str  # the key: url-safe and unique ("compaction"); ops URLs and history rows carry it
    label: str  # what people read ("Context compaction")
    model: type[models.Model]
    task: str  # the Celery task's dotted path, which is also its registered name; it takes the job's id
    queue_setting: str  # the setting naming the queue the task is sent to
    metric_label: str  # the `kind` label of its task's runs in the memsite_jobs metrics
    # --- its statuses
    pending: str
    active: str  # claimed by a worker ("running", "sending")
    done: str
    failed: str
    # --- its retry policy (setting names, read at each use)
    max_attempts_setting: str
    backoff_setting: str  # the first retry delay in seconds; it doubles with each attempt
    resend_after_setting: str  # seconds a pending job may wait before its message is taken as lost
    deadline_setting: str  # seconds an active job may run before its worker is taken as dead
    # --- its timestamp fields
    queued_field: str  # when the job last became runnable: the sweeper's clock for pending jobs
    claimed_field: str  # when it was last claimed: the deadline runs from here
    finished_field: str | None = None  # stamped when it ends, if the model keeps that
    # Without a finished field: stamped when it is done (a failure ends at its `touched_field`).
    done_at_field: str | None = None
    duration_field: str | None = None  # milliseconds of the attempt that ended it, if kept
    touched_field: str | None = None  # stamped on every write (an `auto_now` that .update() skips)
    created_field: str = "created_at"  # the sweeper's clock while `queued_field` is still empty
    # --- how the lifecycle treats it
    # Claim only once `queued_field` has passed, so an early duplicate message cannot jump a backoff.
    claim_when_due: bool = False
    # "replaces": the server's Retry-After is the delay; "at_least": it is a floor under the backoff.
    retry_after: Literal["replaces", "at_least"] = "replaces"
    retry_label: str = "retry-in-{delay:g}s"  # the status string of a scheduled retry
    error_limit: int | None = None  # characters of an error kept, if the kind bounds them
    lost_reason: str = "worker lost (no result before the deadline) on the last attempt"
    requeue_reason: str | None = None  # the error a re-queued job shows, or None to keep the last one
    cooldown_setting: str | None = None  # seconds after a failure before another job may be queued
    # --- how an operator retries it
    # Dotted path of the service `(*, job) -> Retried` that queues a failed job again; None: no retry.
    retry_service: str | None = None
    # Its retry service re-queues the failed job itself rather than queueing a new one,
    # so a failed job is never "retried" while it is still listed as failed.
    retries_in_place: bool = False
    # A retry is a new row pointing back at the failed one (`redelivery_of`).
    redelivered: bool = False
    # --- what the ops pages show of it
    # What the job was asked to do, shown on its detail page (besides its id).
    argument_fields: tuple[str, ...] = ()
    subject_field: str = "trigger"  # what started it, a short word for lists
    # Jobs whose output was unusable and wait for staff (fact extraction's "quarantined").
    quarantines: bool = False
    # A job of a whole team (the search index's) has no session: a later job of the team retried it.
    per_session: bool = True
    # Counted by /metrics' queue gauges, whose oldest-pending age reads `queued_field`.
    in_queue_gauges: bool = True

    def setting(self, name: str) -> Any:
        """Read at each use, so a changed setting (or a test's override) applies at once."""
        return getattr(settings, name)

    @property
    def queue(self) -> str:
        return str(self.setting(self.queue_setting))

    @property
    def max_attempts(self) -> int:
        return int(self.setting(self.max_attempts_setting))

    @property
    def unfinished(self) -> tuple[str, str]:
        return (self.pending, self.active)


class Retried(NamedTuple):
    """What a kind's retry service answers."""

    job: Any  # the job queued now: a new one, the failed one again, or one of the same subject already waiting
    created: bool  # False: an unfinished job of the same subject was there already, and is `job`


_URL_SAFE = re.compile(r"^[a-z][a-z0-9_-]*$")

# Key -> kind, in the order they were registered (the order the ops pages list them).
_REGISTERED: dict[str, JobKind] = {}


def _problem(kind: JobKind) -> str | None:
    """Why `kind` cannot join the registry as it stands, or None."""
    if not _URL_SAFE.match(kind.kind):
        return f"job kind key {kind.kind!r} is not url-safe (lower-case letters, digits, - and _)"
    for other in _REGISTERED.values():
        if other.kind == kind.kind:
            return f"job kind key {kind.kind!r} is registered already"
        if other.task == kind.task:
            return f"task {kind.task} is already the task of job kind {other.kind!r}"
    return None


def register(kind: JobKind) -> JobKind:
    """Add `kind` to the registry (an AppConfig's ready() calls this); registering an equal kind
    again changes nothing, so a second ready() is harmless. Another kind under a key or a task
    already taken is refused: a task must lead back to one kind."""
    if _REGISTERED.get(kind.kind) == kind:
        return kind
    problem = _problem(kind)
    if problem is not None:
        raise ImproperlyConfigured(problem)
    _REGISTERED[kind.kind] = kind
    return kind


def unregister(kind: JobKind) -> None:
    """Take `kind` out of the registry (a test that registered one of its own)."""
    if _REGISTERED.get(kind.kind) == kind:
        del _REGISTERED[kind.kind]


def job_kinds() -> list[JobKind]:
    """Every registered kind, in the order the ops pages list them."""
    return list(_REGISTERED.values())


def job_kind_get(*, kind: str) -> JobKind:
    try:
        return _REGISTERED[kind]
    except KeyError:
        raise NotFound("No such job kind.") from None


def job_retry(*, kind: JobKind, job: Any) -> Retried:
    """Queue a failed job of `kind` again through its domain's retry service, which refuses
    (memsite.errors.Conflict) a job it cannot retry. NotFound for a kind that has none."""
    if kind.retry_service is None:
        raise NotFound("This kind of job cannot be retried.")
    service = import_string(kind.retry_service)  # imported here: the domain imports this registry
    retried: Retried = service(job=job)
    return retried
