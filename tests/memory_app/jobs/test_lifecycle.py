"""The shared job lifecycle (memory_app.jobs), driven directly for each of the three job kinds:
claim, retry with backoff and Retry-After, failing for good, sending on commit, and the sweeper."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from types import ModuleType
from typing import Any

import pytest
from django.db import models, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from memory_app import jobs
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.facts import extraction as fact_extraction
from memory_app.facts.models import FactExtractionRun
from memory_app.jobs.dispatchers import Sent
from memory_app.models import Webhook, WebhookDelivery
from memory_app.tenancy.models import Team
from memory_app.webhooks import services as webhooks
from memsite.celery import app as celery_app
from tests.conftest import make_tenant
from tests.job_dispatch import Sends

pytestmark = pytest.mark.django_db(transaction=True)


def make_compaction(team: Team) -> CompactionRun:
    session = services.session_create(team=team, memory_type="managed_conversation")
    return CompactionRun.objects.create(team=team, session=session, trigger=CompactionRun.Trigger.MANUAL)


def make_extraction(team: Team) -> FactExtractionRun:
    session = services.session_create(team=team, memory_type="kg")
    return FactExtractionRun.objects.create(
        team=team, session=session, trigger=FactExtractionRun.Trigger.MANUAL, from_seq=1, to_seq=1
    )


def make_delivery(team: Team) -> WebhookDelivery:
    hook = Webhook.objects.create(team=team, url="http://127.0.0.1:9/h", secret="whsec_x", secret_hint="whsec_x")
    return WebhookDelivery.objects.create(team=team, webhook=hook, kind="compaction_completed", payload={})


@dataclass(frozen=True)
class Case:
    module: ModuleType
    make: Callable[[Team], models.Model]
    execute: Callable[[str], str]
    labels: tuple[str, str, str]  # the retry status strings for delays of 2, 4 and 30 seconds
    short_retry_after: float  # the delay of a third attempt given "Retry-After: 1" over a backoff of 2

    @property
    def kind(self) -> jobs.JobKind:
        return self.module.JOB


CASES = {
    "compaction": Case(
        module=compaction,
        make=make_compaction,
        execute=lambda pk: compaction.compaction_execute(run_id=pk),
        labels=("retry-in-2s", "retry-in-4s", "retry-in-30s"),
        short_retry_after=1.0,  # the LLM server's Retry-After replaces the backoff
    ),
    "fact_extraction": Case(
        module=fact_extraction,
        make=make_extraction,
        execute=lambda pk: fact_extraction.fact_extraction_execute(run_id=pk),
        labels=("retry-in-2s", "retry-in-4s", "retry-in-30s"),
        short_retry_after=1.0,
    ),
    "webhook": Case(
        module=webhooks,
        make=make_delivery,
        execute=lambda pk: webhooks.webhook_deliver(delivery_id=pk),
        labels=("retry in 2.0s", "retry in 4.0s", "retry in 30.0s"),
        short_retry_after=8.0,  # a receiver's Retry-After is only a floor under the backoff
    ),
}


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return CASES[request.param]


@pytest.fixture
def kind(case: Case) -> jobs.JobKind:
    return case.kind


@pytest.fixture
def team(db: None) -> Team:
    return make_tenant("lifecycle").team


@pytest.fixture
def sent(case: Case, job_outbox: list[Sent]) -> Sends:
    """The kind's tasks sent, recorded by the dispatcher every send goes through."""
    return Sends(job_outbox, case.kind)


@pytest.fixture
def celery_dispatcher(settings: Any) -> None:
    """The production dispatcher, whatever the environment selected."""
    settings.JOB_DISPATCHER = "memory_app.jobs.dispatchers.CeleryDispatcher"


def reload(kind: jobs.JobKind, job: Any) -> Any:
    return kind.model._default_manager.get(pk=job.pk)


def claimed(kind: jobs.JobKind, job: Any) -> Any:
    assert jobs.claim(kind, job.pk)
    return reload(kind, job)


def long_ago() -> Any:
    return timezone.now() - timedelta(hours=1)


# --- the description --------------------------------------------------------------------------


def test_each_kind_names_a_registered_task_and_a_configured_queue(kind: jobs.JobKind) -> None:
    import_string(kind.task)  # registers memory_app.tasks
    assert kind.task in celery_app.tasks
    assert isinstance(kind.setting(kind.queue_setting), str)
    for name in (kind.max_attempts_setting, kind.backoff_setting, kind.resend_after_setting, kind.deadline_setting):
        assert kind.setting(name) > 0
    statuses = {value for value, _ in kind.model._meta.get_field("status").choices}
    assert {kind.pending, kind.active, kind.done, kind.failed} <= statuses


# --- sending --------------------------------------------------------------------------------------


def test_dispatch_sends_the_task_by_name_on_the_kinds_queue(
    kind: jobs.JobKind, team: Team, case: Case, monkeypatch: pytest.MonkeyPatch, celery_dispatcher: None
) -> None:
    job = case.make(team)
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(import_string(kind.task), "apply_async", lambda **options: calls.append(options))
    assert jobs.dispatch(kind, job.pk, countdown=3)
    assert calls == [{"args": (str(job.pk),), "countdown": 3, "queue": kind.setting(kind.queue_setting)}]


def test_a_broker_error_is_logged_and_never_raised(
    kind: jobs.JobKind,
    team: Team,
    case: Case,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    celery_dispatcher: None,
) -> None:
    job = case.make(team)

    def refuse(**_: Any) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(import_string(kind.task), "apply_async", refuse)
    with caplog.at_level(logging.WARNING, logger="memory_app.jobs.lifecycle"):
        assert jobs.dispatch(kind, job.pk) is False
    assert f"{kind.task} {job.pk} not sent (broker unavailable: broker down)" in caplog.text


def test_a_send_on_commit_waits_for_the_commit_and_a_rollback_sends_nothing(
    kind: jobs.JobKind, team: Team, case: Case, sent: Sends
) -> None:
    job = case.make(team)
    with transaction.atomic():
        jobs.send(kind, job.pk, countdown=5, on_commit=True)
        assert sent == []
    assert sent == [(str(job.pk), 5)]
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.send(kind, job.pk, on_commit=True)
        raise RuntimeError("the write failed")
    assert sent == [(str(job.pk), 5)]


def test_the_recording_dispatcher_keeps_each_send_and_sends_nothing(
    kind: jobs.JobKind, team: Team, case: Case, monkeypatch: pytest.MonkeyPatch, job_outbox: list[Sent]
) -> None:
    job = case.make(team)

    def no_broker(**_: Any) -> None:
        raise AssertionError("the recording dispatcher reached the broker")

    monkeypatch.setattr(import_string(kind.task), "apply_async", no_broker)
    assert jobs.dispatch(kind, job.pk, countdown=3)
    assert job_outbox == [(kind.task, str(job.pk), 3)]


def test_a_dispatcher_that_cannot_be_loaded_is_logged_and_never_raised(
    kind: jobs.JobKind, team: Team, case: Case, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    job = case.make(team)
    settings.JOB_DISPATCHER = "memory_app.jobs.dispatchers.Missing"
    with caplog.at_level(logging.WARNING, logger="memory_app.jobs.lifecycle"):
        assert jobs.dispatch(kind, job.pk) is False
    assert f"{kind.task} {job.pk} not sent" in caplog.text


# --- claiming -------------------------------------------------------------------------------------


def test_a_job_is_claimed_once_and_a_second_claim_is_already_claimed(
    kind: jobs.JobKind, team: Team, case: Case
) -> None:
    job = case.make(team)
    assert jobs.claim(kind, job.pk) is True
    assert jobs.claim(kind, job.pk) is False
    row = reload(kind, job)
    assert (row.status, row.attempts) == (kind.active, 1)
    assert getattr(row, kind.claimed_field) is not None
    assert case.execute(str(job.pk)) == jobs.ALREADY_CLAIMED == "already-claimed"


def test_a_job_due_later_is_claimed_early_only_by_kinds_without_the_due_gate(
    kind: jobs.JobKind, team: Team, case: Case
) -> None:
    job = case.make(team)
    kind.model._default_manager.filter(pk=job.pk).update(**{kind.queued_field: timezone.now() + timedelta(minutes=5)})
    # A debounced run is claimed when its (countdown) message arrives; a webhook retry is not
    # claimed by an early duplicate message, which would jump the receiver's backoff.
    assert jobs.claim(kind, job.pk) is (not kind.claim_when_due)


# --- retrying -------------------------------------------------------------------------------------


def test_the_backoff_doubles_and_retry_after_is_honoured(
    kind: jobs.JobKind, team: Team, case: Case, sent: Sends, settings: Any
) -> None:
    setattr(settings, kind.backoff_setting, 2.0)
    setattr(settings, kind.max_attempts_setting, 10)
    job = case.make(team)
    outcomes = []
    for retry_after in (None, None, 30.0):
        run = claimed(kind, job)
        outcomes.append(
            jobs.schedule_retry(kind, run, error=f"HTTP 503 on attempt {run.attempts}", retry_after=retry_after)
        )
        row = reload(kind, job)
        assert row.status == kind.pending and row.error == f"HTTP 503 on attempt {run.attempts}"
        due_in = (getattr(row, kind.queued_field) - timezone.now()).total_seconds()
        assert due_in == pytest.approx(sent[-1][1], abs=2)
        kind.model._default_manager.filter(pk=job.pk).update(**{kind.queued_field: timezone.now()})  # time passes
    assert outcomes == list(case.labels)
    assert sent == [(str(job.pk), 2.0), (str(job.pk), 4.0), (str(job.pk), 30.0)]
    assert jobs.retry_delay(kind, 3, retry_after=1.0) == case.short_retry_after
    assert jobs.retry_delay(kind, 4) == 16.0


def test_a_retry_by_an_execution_that_lost_the_job_changes_nothing(
    kind: jobs.JobKind, team: Team, case: Case, sent: Sends
) -> None:
    job = case.make(team)
    stale = claimed(kind, job)
    kind.model._default_manager.filter(pk=job.pk).update(attempts=2)  # the sweeper re-queued it; another claimed it
    jobs.schedule_retry(kind, stale, error="late")
    assert reload(kind, job).status == kind.active and sent == []


def test_out_of_attempts_the_job_fails_for_good_with_the_reason(
    kind: jobs.JobKind, team: Team, case: Case, sent: Sends, settings: Any
) -> None:
    setattr(settings, kind.max_attempts_setting, 2)
    setattr(settings, kind.backoff_setting, 2.0)
    job = case.make(team)
    events: list[tuple[str, str]] = []

    def record(failed: Any, status: str, reason: str) -> None:
        events.append((status, reason))

    first = claimed(kind, job)
    assert jobs.retry_or_fail(kind, first, error="HTTP 500", on_failed=record) == case.labels[0]
    kind.model._default_manager.filter(pk=job.pk).update(**{kind.queued_field: timezone.now()})  # time passes
    second = claimed(kind, job)
    assert jobs.retry_or_fail(kind, second, error="HTTP 500", on_failed=record) == kind.failed == "failed"
    row = reload(kind, job)
    assert (row.status, row.attempts, row.error) == (kind.failed, 2, "gave up after 2 attempts: HTTP 500")
    assert events == [("failed", "gave up after 2 attempts: HTTP 500")]
    assert len(sent) == 1  # the one retry; failing sends nothing
    # A second ending of the same attempt writes nothing and records no second event.
    assert jobs.fail(kind, second, reason="again", on_failed=record) == "failed"
    assert reload(kind, job).error == "gave up after 2 attempts: HTTP 500" and len(events) == 1


def test_a_permanent_error_fails_at_once_keeping_the_reason(kind: jobs.JobKind, team: Team, case: Case) -> None:
    job = case.make(team)
    run = claimed(kind, job)
    assert jobs.fail(kind, run, reason="HTTP 410: gone", started=0.0) == "failed"
    row = reload(kind, job)
    assert (row.status, row.attempts, row.error) == (kind.failed, 1, "HTTP 410: gone")
    if kind.finished_field:
        assert getattr(row, kind.finished_field) is not None


# --- sweeping -------------------------------------------------------------------------------------


def test_the_sweeper_resends_lost_jobs_and_requeues_or_fails_stuck_ones(
    kind: jobs.JobKind, team: Team, case: Case, sent: Sends, settings: Any
) -> None:
    setattr(settings, kind.max_attempts_setting, 2)
    lost, stuck, dead, fresh = (case.make(team) for _ in range(4))
    manager = kind.model._default_manager
    lost_clock = {kind.created_field: long_ago()}
    if getattr(lost, kind.queued_field) is not None:  # a webhook's next_retry_at is empty until its first retry
        lost_clock[kind.queued_field] = long_ago()
    manager.filter(pk=lost.pk).update(**lost_clock)
    manager.filter(pk=stuck.pk).update(status=kind.active, attempts=1, **{kind.claimed_field: long_ago()})
    manager.filter(pk=dead.pk).update(status=kind.active, attempts=2, **{kind.claimed_field: long_ago()})
    failures: list[tuple[str, str, str]] = []

    def record(job: Any, status: str, reason: str) -> None:
        failures.append((str(job.pk), status, reason))

    assert jobs.sweep(kind, on_failed=record) == {"resent": 1, "requeued": 1, "failed": 1}
    assert sorted(pk for pk, _ in sent) == sorted([str(lost.pk), str(stuck.pk)])
    assert reload(kind, stuck).status == kind.pending and reload(kind, stuck).attempts == 1
    assert reload(kind, fresh).status == kind.pending
    gone = reload(kind, dead)
    assert (gone.status, gone.error) == (kind.failed, kind.lost_reason)
    assert failures == [(str(dead.pk), kind.failed, kind.lost_reason)]
    if kind.requeue_reason is not None:
        assert reload(kind, stuck).error == kind.requeue_reason
    # The clocks moved: nothing is sent twice by the next sweep, and the re-queued job runs again.
    sent.clear()
    assert jobs.sweep(kind, on_failed=record) == {"resent": 0, "requeued": 0, "failed": 0}
    assert sent == [] and jobs.claim(kind, stuck.pk) and reload(kind, stuck).attempts == 2
