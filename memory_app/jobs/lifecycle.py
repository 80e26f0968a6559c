"""The lifecycle every durable job shares: send, claim, retry, fail, sweep.

A job is a database row first and its Celery task only carries the row's id, so nothing is
lost when a message is: the row stays pending and the sweeper sends it again. A worker takes
the row with a conditional UPDATE (pending -> active, one more attempt), does the slow part
(an LLM call, an HTTP POST) with no transaction open, then ends it. Every later write is
conditional on the row still being active with the attempt count it claimed, so an execution
the sweeper gave up on cannot overwrite the one that replaced it.

What differs between kinds is data in their `JobKind` (declared in `kinds`, the registry of job
kinds): statuses, settings, timestamp fields, how a Retry-After combines with the backoff. What a
job does and the events it records stay in its own module, handed in here as callbacks where they
must share a transaction. A task leaves the process through the dispatcher `settings.JOB_DISPATCHER`
names (`dispatchers`): Celery in production, a recording one in tests.

Every job model also has the columns of `memory_app.jobs.models.JobRecord`, written here: the worker
that claimed it, when it last became pending, and the traceback of an attempt that raised. Every
text written to a job row here (its error, traceback, an outside answer a kind keeps) is masked
first by `memsite.masking.mask_secrets`: it can quote a secret an outside server echoed.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.conf import settings
from django.db import models, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.module_loading import import_string

from memory_app.jobs.kinds import JobKind
from memsite.masking import mask_secrets

log = logging.getLogger(__name__)

ALREADY_CLAIMED = "already-claimed"
SWEEP_BATCH = 500  # rows one sweep handles per step; the next sweep takes the rest
TRACEBACK_LIMIT = 20_000  # characters of a traceback kept (its end: the frame that raised)

OnFailed = Callable[[Any, str, str], None]  # (job, status, reason): its event, written with the failure


# --- sending ------------------------------------------------------------------------------------


class Dispatcher(Protocol):
    """What `settings.JOB_DISPATCHER` names (memory_app.jobs.dispatchers): how a task leaves the process."""

    def send(self, kind: JobKind, job_id: Any, countdown: float) -> None: ...


def dispatch(kind: JobKind, job_id: Any, *, countdown: float = 0) -> bool:
    """Send `kind.task(job_id)` through the configured dispatcher; on any error log it and return
    False (the sweeper re-sends).

    Bounded by the broker timeouts in settings (`MEMSITE_BROKER_SEND_TIMEOUT`, the publish retry
    policy), so a broker that is down or hanging costs a request seconds, and never fails the
    write that queued the job. The setting is read at each send, so a test's override applies at once.
    """
    try:
        dispatcher: Dispatcher = import_string(settings.JOB_DISPATCHER)()
        dispatcher.send(kind, job_id, countdown)
    except Exception as exc:  # kombu, redis-py and socket errors, a dispatcher that fails to load: the row is durable
        log.warning("%s %s not sent (broker unavailable: %s); the sweeper will re-send it", kind.task, job_id, exc)
        return False
    return True


def send(kind: JobKind, job_id: Any, *, countdown: float = 0, on_commit: bool = False) -> None:
    """Send the job's task now, or when the current transaction commits (so a worker never looks
    for a row that is not there yet, and a rolled-back write sends nothing)."""
    if on_commit:
        transaction.on_commit(lambda: dispatch(kind, job_id, countdown=countdown))
    else:
        dispatch(kind, job_id, countdown=countdown)


# --- claiming and ending ------------------------------------------------------------------------


def _written(kind: JobKind, changes: dict[str, Any], now: datetime) -> dict[str, Any]:
    """What one write sets on a job row: `changes` with every text masked (an error, a traceback
    or a receiver's answer can quote a secret, such as an LLM key a 401 body echoed), the error and
    traceback then cut to their limits (after masking, so a cut cannot leave a secret's start
    behind), and the kind's touched field stamped."""
    written = {name: mask_secrets(value) if isinstance(value, str) else value for name, value in changes.items()}
    if kind.error_limit is not None and "error" in written:
        written["error"] = written["error"][: kind.error_limit]
    if "traceback" in written:
        written["traceback"] = written["traceback"][-TRACEBACK_LIMIT:]
    return {**written, kind.touched_field: now} if kind.touched_field else written


# The job this execution claimed last (kind, id, claim time), so an exception the task body did
# not handle can be written to the row it still holds (`record_crash`). Celery runs one task at a
# time per thread; memory_app.task_signals clears it before each task.
_CLAIMED: ContextVar[tuple[JobKind, Any, datetime] | None] = ContextVar("memsite_claimed_job", default=None)


def worker_name() -> str:
    """The Celery worker running the current task ("celery@host"), else this process ("pid@host"):
    a service called outside a worker (tests, an eager task, a shell) is named by its process."""
    from celery import current_task  # a proxy: None outside a task

    hostname = getattr(getattr(current_task, "request", None), "hostname", None)
    return str(hostname) if hostname else f"{os.getpid()}@{socket.gethostname()}"


def claim(kind: JobKind, job_id: Any) -> bool:
    """Take a pending job for this execution: only one of any number of copies of its task gets it."""
    now = timezone.now()
    pending = kind.model._default_manager.filter(pk=job_id, status=kind.pending)
    if kind.claim_when_due:
        due = Q(**{f"{kind.queued_field}__isnull": True}) | Q(**{f"{kind.queued_field}__lte": now})
        pending = pending.filter(due)
    changes = {"status": kind.active, "attempts": F("attempts") + 1, kind.claimed_field: now, "worker": worker_name()}
    won = pending.update(**_written(kind, changes, now)) == 1
    _CLAIMED.set((kind, job_id, now) if won else None)
    return won


def forget_claim() -> None:
    """Start a task with no claimed job (memory_app.task_signals calls it before each one)."""
    _CLAIMED.set(None)


def _with_traceback(changes: dict[str, Any]) -> dict[str, Any]:
    """`changes` plus the traceback of the exception being handled, when the caller is in an
    `except` block (an LLM or HTTP error that ends or retries the attempt); otherwise the row
    keeps the traceback of the latest attempt that raised."""
    if sys.exc_info()[1] is None:
        return changes
    return {**changes, "traceback": traceback.format_exc()}


def record_crash(error: BaseException) -> bool:
    """Write an exception the task body did not handle to the job this execution claimed, if it
    still holds it: its traceback and, as the error, the exception in one line.

    The job stays active: the sweeper re-queues it (or, on its last attempt, fails it with its
    kind's event) after the deadline, as it does for a worker that died. Called from Celery's
    task_failure signal (memory_app.task_signals), so every job task records its crash in one place.
    """
    claimed = _CLAIMED.get()
    _CLAIMED.set(None)
    if claimed is None:
        return False
    kind, job_id, claimed_at = claimed
    text = "".join(traceback.format_exception(error))
    held = kind.model._default_manager.filter(pk=job_id, status=kind.active, **{kind.claimed_field: claimed_at})
    now = timezone.now()
    changes = {"traceback": text, "error": f"{type(error).__name__}: {error}"}
    try:
        return held.update(**_written(kind, changes, now)) == 1
    except Exception:  # the database itself may be what failed: the sweeper still ends the job
        log.warning("could not record the crash of %s %s", kind.task, job_id, exc_info=True)
        return False


def owned(kind: JobKind, job: Any) -> models.QuerySet:
    """The job's row while the execution that claimed `job` still holds it."""
    return kind.model._default_manager.filter(pk=job.pk, status=kind.active, attempts=job.attempts)


def complete(kind: JobKind, job: Any, *, fields: dict[str, Any] | None = None) -> bool:
    """Mark a claimed job done (with `fields`), unless it is no longer this execution's."""
    now = timezone.now()
    changes = {**(fields or {}), "status": kind.done}
    if kind.finished_field:
        changes[kind.finished_field] = now
    return owned(kind, job).update(**_written(kind, changes, now)) == 1


def fail(
    kind: JobKind,
    job: Any,
    *,
    reason: str,
    status: str | None = None,
    started: float | None = None,
    fields: dict[str, Any] | None = None,
    on_failed: OnFailed | None = None,
) -> str:
    """End a claimed job for good with its reason kept; returns the status it ended in.

    `status` is the kind's failed status unless the job ends in another one of its own
    (budget_exceeded, quarantined). `started` (time.monotonic()) gives the attempt's duration.
    """
    status = status or kind.failed
    _end(kind, job, status=status, reason=reason, started=started, fields=fields, on_failed=on_failed)
    return str(status)


def _end(
    kind: JobKind,
    job: Any,
    *,
    status: str,
    reason: str,
    started: float | None,
    fields: dict[str, Any] | None,
    on_failed: OnFailed | None,
) -> bool:
    """Write the end of a job this execution still holds. `on_failed` records its event in the
    same transaction, and only when this write won, so a job never has two failure events."""
    now = timezone.now()
    changes = _with_traceback({**(fields or {}), "status": status, "error": reason})
    if kind.finished_field:
        changes[kind.finished_field] = now
    if kind.duration_field and started is not None:
        changes[kind.duration_field] = int((time.monotonic() - started) * 1000)
    with transaction.atomic():
        if not owned(kind, job).update(**_written(kind, changes, now)):
            return False
        if on_failed is not None:
            on_failed(job, status, mask_secrets(reason))  # its event is shown and sent to webhooks
    return True


# --- retrying -----------------------------------------------------------------------------------


def retry_delay(kind: JobKind, attempts: int, retry_after: float | None = None) -> float:
    """Seconds before the next attempt: the backoff doubling from the first delay, combined
    with a server's Retry-After as the kind says."""
    delay = float(kind.setting(kind.backoff_setting)) * 2 ** max(attempts - 1, 0)
    if retry_after is None:
        return delay
    return max(delay, retry_after) if kind.retry_after == "at_least" else retry_after


def schedule_retry(
    kind: JobKind, job: Any, *, error: str, retry_after: float | None = None, fields: dict[str, Any] | None = None
) -> str:
    """Put a claimed job back to pending, due after the backoff, and send its task with that countdown.

    The caller holds no transaction (the attempt's slow call ran outside one), so the row is
    committed before the task is sent.
    """
    delay = retry_delay(kind, job.attempts, retry_after)
    now = timezone.now()
    changes = _with_traceback(
        {
            **(fields or {}),
            "status": kind.pending,
            "error": error,
            kind.queued_field: now + timedelta(seconds=delay),
            "pending_since": now,
        }
    )
    if owned(kind, job).update(**_written(kind, changes, now)):
        send(kind, job.pk, countdown=delay)
    return kind.retry_label.format(delay=delay)


def retry_or_fail(
    kind: JobKind,
    job: Any,
    *,
    error: str,
    retry_after: float | None = None,
    started: float | None = None,
    fields: dict[str, Any] | None = None,
    on_failed: OnFailed | None = None,
) -> str:
    """After a transient error: retry while attempts are left, else fail saying how many were made."""
    if job.attempts >= kind.max_attempts:
        reason = f"gave up after {job.attempts} attempts: {error}"
        return fail(kind, job, reason=reason, started=started, fields=fields, on_failed=on_failed)
    return schedule_retry(kind, job, error=error, retry_after=retry_after, fields=fields)


# --- queueing again -----------------------------------------------------------------------------


def may_queue_after(kind: JobKind, latest: Any | None) -> bool:
    """Whether a new job may follow `latest`, the newest job of the same subject: not while that
    one is unfinished, nor within the kind's cool-down after it failed (a subject that cannot be
    processed would otherwise queue a doomed job on every write)."""
    if latest is None:
        return True
    if latest.status in kind.unfinished:
        return False
    if kind.cooldown_setting is None or latest.status != kind.failed:
        return True
    cooldown = timedelta(seconds=kind.setting(kind.cooldown_setting))
    return getattr(latest, kind.created_field) <= timezone.now() - cooldown


# --- sweeping -----------------------------------------------------------------------------------


def sweep(kind: JobKind, *, on_failed: OnFailed | None = None) -> dict[str, int]:
    """Re-send pending jobs whose message was lost, re-queue active ones whose worker died, and
    fail (with `on_failed`'s event) those that were on their last attempt. A second copy of a
    task is harmless: the claim lets only one through. Returns the counts: resent, requeued, failed."""
    now = timezone.now()
    resent = _resend_lost(kind, now)
    failed = _fail_stuck(kind, now, on_failed)
    requeued = _requeue_stuck(kind, now)
    return {"resent": resent, "requeued": requeued, "failed": failed}


def _resend_lost(kind: JobKind, now: datetime) -> int:
    overdue = now - timedelta(seconds=kind.setting(kind.resend_after_setting))
    queued = kind.queued_field
    never_due = Q(**{f"{queued}__isnull": True, f"{kind.created_field}__lt": overdue})
    lost = list(
        kind.model._default_manager.filter(status=kind.pending)
        .filter(Q(**{f"{queued}__lt": overdue}) | never_due)
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    for job_id in lost:
        # Moving the clock keeps the next sweep from sending it again straight away.
        kind.model._default_manager.filter(pk=job_id, status=kind.pending).update(**_written(kind, {queued: now}, now))
        send(kind, job_id)
    return len(lost)


def _stuck(kind: JobKind, now: datetime) -> models.QuerySet:
    deadline = now - timedelta(seconds=kind.setting(kind.deadline_setting))
    return kind.model._default_manager.filter(status=kind.active, **{f"{kind.claimed_field}__lt": deadline})


def _fail_stuck(kind: JobKind, now: datetime, on_failed: OnFailed | None) -> int:
    out_of_attempts = _stuck(kind, now).filter(attempts__gte=kind.max_attempts)[:SWEEP_BATCH]
    return sum(
        _end(kind, job, status=kind.failed, reason=kind.lost_reason, started=None, fields=None, on_failed=on_failed)
        for job in out_of_attempts
    )


def _requeue_stuck(kind: JobKind, now: datetime) -> int:
    requeued = list(
        _stuck(kind, now).filter(attempts__lt=kind.max_attempts).values_list("pk", "attempts")[:SWEEP_BATCH]
    )
    changes: dict[str, Any] = {"status": kind.pending, kind.queued_field: now, "pending_since": now}
    if kind.requeue_reason is not None:
        changes["error"] = kind.requeue_reason
    for job_id, attempts in requeued:
        still_stuck = kind.model._default_manager.filter(pk=job_id, status=kind.active, attempts=attempts)
        if still_stuck.update(**_written(kind, changes, now)):
            send(kind, job_id)
    return len(requeued)
