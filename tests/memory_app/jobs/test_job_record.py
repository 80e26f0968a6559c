"""What the lifecycle writes for operators on every job row (memory_app.jobs.models.JobRecord): the
worker that claimed it, when it last became pending, and the traceback of an attempt that raised."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from memory_app import jobs
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.llm.base import LLMPermanentError
from memory_app.tasks import compact_session
from memory_app.tenancy.models import Team
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db

KIND = compaction.JOB


@pytest.fixture(autouse=True)
def recorded(job_outbox) -> None:
    """Tasks are recorded, not sent."""


def pending_run(team: Team) -> CompactionRun:
    session = services.session_create(team=team, memory_type="managed_conversation")
    return CompactionRun.objects.create(team=team, session=session, trigger=CompactionRun.Trigger.MANUAL)


def claimed(run: CompactionRun) -> CompactionRun:
    assert jobs.claim(KIND, run.pk)
    return CompactionRun.objects.get(pk=run.pk)


def test_a_claim_outside_a_worker_names_this_process(tenant: Tenant) -> None:
    run = claimed(pending_run(tenant.team))

    assert run.worker == f"{os.getpid()}@{socket.gethostname()}"
    assert run.status == "running" and run.attempts == 1


def test_a_failure_written_while_handling_an_exception_keeps_its_traceback(tenant: Tenant) -> None:
    run = claimed(pending_run(tenant.team))

    try:
        raise LLMPermanentError("the model refused the prompt")
    except LLMPermanentError as exc:
        jobs.fail(KIND, run, reason=exc.detail)

    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error == "the model refused the prompt"  # the reason the API shows stays one line
    assert run.traceback.startswith("Traceback (most recent call last):")
    assert "LLMPermanentError: the model refused the prompt" in run.traceback
    assert "test_job_record.py" in run.traceback


def test_a_failure_without_an_exception_records_no_traceback(tenant: Tenant) -> None:
    run = claimed(pending_run(tenant.team))

    jobs.fail(KIND, run, reason="nothing to summarise")

    run.refresh_from_db()
    assert (run.status, run.traceback) == ("failed", "")


def test_a_retry_is_pending_from_the_retry_and_a_resend_does_not_move_that(tenant: Tenant, settings) -> None:
    run = pending_run(tenant.team)
    CompactionRun.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(minutes=7), pending_since=timezone.now() - timedelta(minutes=7)
    )
    run = claimed(run)
    before = timezone.now()

    jobs.schedule_retry(KIND, run, error="HTTP 503")

    run.refresh_from_db()
    assert run.status == "pending" and before <= run.pending_since <= timezone.now()
    retried_at = run.pending_since
    # Long after, the sweeper takes its message as lost and sends it again: the clock it keeps
    # (queued_at) moves, the time it became pending does not.
    CompactionRun.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(hours=1))
    assert jobs.sweep(KIND)["resent"] == 1
    run.refresh_from_db()
    assert run.pending_since == retried_at and run.queued_at > retried_at


# A task run eagerly closes the connection first (memsite.celery, as a worker does): that needs
# a test whose data is committed.
@pytest.mark.django_db(transaction=True)
def test_a_task_that_raises_writes_its_traceback_to_the_job_it_claimed(
    tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = pending_run(tenant.team)

    def explode(session):
        raise RuntimeError("the config store exploded")

    monkeypatch.setattr(compaction, "session_config", explode)

    result = compact_session.apply(args=(str(run.pk),))

    assert isinstance(result.result, RuntimeError)
    run.refresh_from_db()
    assert run.error == "RuntimeError: the config store exploded"
    assert "in compaction_execute" in run.traceback and "RuntimeError: the config store exploded" in run.traceback
    # Still running: the sweeper re-queues it after the deadline, as for a worker that died.
    assert (run.status, run.attempts) == ("running", 1)


@pytest.mark.django_db(transaction=True)
def test_a_task_that_raises_before_claiming_touches_no_job(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    run = claimed(pending_run(tenant.team))  # another execution holds it

    def explode(kind, job_id):
        raise RuntimeError("database gone")

    monkeypatch.setattr(jobs, "claim", explode)
    monkeypatch.setattr(compaction.jobs, "claim", explode)

    compact_session.apply(args=(str(run.pk),))

    run.refresh_from_db()
    assert (run.error, run.traceback, run.status) == ("", "", "running")
