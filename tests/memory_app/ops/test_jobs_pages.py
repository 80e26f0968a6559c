"""The ops job history (every kind, from the database: filter, sort, paginate), one job's detail
(arguments, attempts, timings, error with traceback, worker, retry), throughput and latency per
kind, and the flag on a queue with pending jobs that no worker consumes."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import Session
from memory_app.facts.models import FactExtractionRun
from memory_app.jobs import job_kind_get
from memory_app.jobs.heartbeat import WorkerIdentity, beat
from memory_app.models import Webhook, WebhookDelivery
from memory_app.ops import charts
from memory_app.ops import pages as ops_pages
from memory_app.ops import selectors as ops_selectors
from memory_app.search.models import IndexRun
from memory_app.tenancy.models import Team, TeamMembership
from tests.conftest import Tenant

OPS = reverse("dashboard:ops")
JOBS = reverse("dashboard:ops_jobs")
TRACEBACK = (
    "Traceback (most recent call last):\n  File \"memory_app/compaction/services.py\", line 9\nKeyError: '<b>x</b>'"
)


def detail_url(kind: str, pk: object) -> str:
    return reverse("dashboard:ops_job", args=[kind, pk])


@pytest.fixture(autouse=True)
def no_broker(job_outbox) -> None:
    """Jobs the pages queue are recorded, not sent."""


def admin_of(client: Client, *tenants: Tenant) -> Client:
    user = get_user_model().objects.create_user(f"admin-{uuid.uuid4().hex[:6]}")
    for tenant in tenants:
        TeamMembership.objects.create(team=tenant.team, user=user, is_admin=True)
    client.force_login(user)
    return client


def chat(team: Team, name: str, memory_type: str = "managed_conversation") -> Session:
    return services.session_create(team=team, external_id=name, memory_type=memory_type)


def compaction_run(team: Team, session: Session, status: str = "done", **fields) -> CompactionRun:
    return CompactionRun.objects.create(team=team, session=session, trigger="manual", status=status, **fields)


def delivery(team: Team, status: str = "delivered", **fields) -> WebhookDelivery:
    hook = Webhook.objects.create(team=team, url="https://example.com/h", secret="whsec_x", secret_hint="whsec_x")
    return WebhookDelivery.objects.create(
        team=team,
        webhook=hook,
        kind="compaction_completed",
        payload={"session": "s-1", "tokens": 12},
        status=status,
        **fields,
    )


def ago(**kwargs) -> timezone.datetime:
    return timezone.now() - timedelta(**kwargs)


# --- history ---------------------------------------------------------------------------------------


def test_the_history_lists_every_kind_of_job_of_ones_teams_newest_first(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    team = tenant.team
    done = compaction_run(
        team, chat(team, "trip"), started_at=ago(seconds=30), finished_at=ago(seconds=28), duration_ms=1840
    )
    extraction = FactExtractionRun.objects.create(
        team=team,
        session=chat(team, "kg", "kg"),
        trigger="manual",
        status="failed",
        error="gave up after 4 attempts: 503",
    )
    index = IndexRun.objects.create(team=team, status="running", worker="celery@w1")
    sent = delivery(team, claimed_at=ago(seconds=5), delivered_at=ago(seconds=3))
    theirs = compaction_run(other_tenant.team, chat(other_tenant.team, "their-trip"))
    for age, job in enumerate((sent, index, extraction, done)):
        type(job).objects.filter(pk=job.pk).update(created_at=ago(minutes=age))

    response = admin_of(client, tenant).get(JOBS)

    assert response.status_code == 200
    rows = response.context["rows"]
    assert [row["id"] for row in rows] == [sent.pk, index.pk, extraction.pk, done.pk]
    assert [(row["job_kind"], row["state"]) for row in rows] == [
        ("webhooks", "done"),
        ("search", "running"),
        ("facts", "failed"),
        ("compaction", "done"),
    ]
    by_id = {row["id"]: row for row in rows}
    assert by_id[done.pk]["took_label"] == "1.8 s" and by_id[done.pk]["session_name"] == "trip"
    assert by_id[sent.pk]["took_label"] == "2.0 s"  # a delivery keeps no duration: claim to delivery
    assert by_id[index.pk]["worker"] == "celery@w1"
    html = response.content.decode()
    assert str(theirs.pk) not in html and "their-trip" not in html
    assert f'href="{detail_url("facts", extraction.pk)}"' in html
    assert "gave up after 4 attempts: 503" in html
    assert '<small class="job-took" title="1840 ms">1.8 s</small>' in html  # how long its last attempt ran


def test_the_history_filters_by_kind_and_status_and_sorts_on_the_server(client: Client, tenant: Tenant) -> None:
    team = tenant.team
    session = chat(team, "trip")
    slow = compaction_run(team, session, "failed", duration_ms=9000, finished_at=ago(minutes=3))
    fast = compaction_run(team, session, "failed", duration_ms=20, finished_at=ago(minutes=1))
    compaction_run(team, session, "done", duration_ms=50_000)
    failed_delivery = delivery(team, "failed")
    WebhookDelivery.objects.filter(pk=failed_delivery.pk).update(updated_at=ago(minutes=2))  # auto_now on save
    admin = admin_of(client, tenant)

    failed_compactions = admin.get(JOBS, {"kind": "compaction", "state": "failed", "sort": "-duration"}).context["rows"]
    every_failure = admin.get(JOBS, {"state": "failed", "sort": "-finished"}).context["rows"]
    running_deliveries = admin.get(JOBS, {"kind": "webhooks", "state": "running"}).context["rows"]

    assert [row["id"] for row in failed_compactions] == [slow.pk, fast.pk]
    assert [row["job_kind"] for row in every_failure] == ["compaction", "webhooks", "compaction"]
    assert every_failure[0]["id"] == fast.pk
    assert running_deliveries == []
    # Unknown values fall back to everything, newest first, rather than erroring.
    assert len(admin.get(JOBS, {"kind": "nope", "state": "nope", "sort": "nope"}).context["rows"]) == 4


def test_the_history_paginates_and_keeps_its_filters_in_the_page_links(client: Client, tenant: Tenant) -> None:
    team = tenant.team
    for _ in range(ops_pages.OPS_JOBS_PER_PAGE + 5):
        IndexRun.objects.create(team=team, status="done", trigger="sweep")
    admin = admin_of(client, tenant)

    first = admin.get(JOBS, {"kind": "search", "state": "done"})
    second = admin.get(JOBS, {"kind": "search", "state": "done", "page": 2})

    assert len(first.context["rows"]) == ops_pages.OPS_JOBS_PER_PAGE and len(second.context["rows"]) == 5
    assert first.context["page"].paginator.count == ops_pages.OPS_JOBS_PER_PAGE + 5
    assert 'href="?kind=search&amp;state=done&amp;page=2" rel="next"' in first.content.decode()
    assert {row["id"] for row in first.context["rows"]}.isdisjoint({row["id"] for row in second.context["rows"]})


def test_the_history_takes_a_fixed_number_of_queries(client: Client, tenant: Tenant, django_assert_num_queries) -> None:
    team = tenant.team
    for n in range(6):
        compaction_run(team, chat(team, f"s{n}"))
        delivery(team)
    admin = admin_of(client, tenant)
    admin.get(JOBS)

    # session, user, the teams one administers; the count and the page of the union
    with django_assert_num_queries(5):
        admin.get(JOBS)


# --- one job -------------------------------------------------------------------------------------------


def test_a_jobs_detail_shows_its_arguments_attempts_timings_worker_and_traceback(
    client: Client, tenant: Tenant
) -> None:
    team = tenant.team
    now = timezone.now()
    run = compaction_run(
        team,
        chat(team, "trip"),
        "failed",
        attempts=4,
        covered_to_seq=12,
        worker="celery@worker-7",
        error="gave up after 4 attempts: <script>alert(1)</script>",
        traceback=TRACEBACK,
        started_at=now - timedelta(seconds=40),
        finished_at=now - timedelta(seconds=10),
        duration_ms=30_000,
    )
    CompactionRun.objects.filter(pk=run.pk).update(created_at=ago(minutes=5), pending_since=now - timedelta(minutes=1))

    response = admin_of(client, tenant).get(detail_url("compaction", run.pk))

    assert response.status_code == 200
    html = response.content.decode()
    assert f"memory_app.tasks.compact_session(&quot;{run.pk}&quot;)" in html
    assert '<code class="job-worker">celery@worker-7</code>' in html
    assert "4 of 4" in html  # attempts made, of the most its kind makes
    assert "30.0 s" in html and "after waiting 20 s" in html
    assert "gave up after 4 attempts: &lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert '<pre class="traceback">Traceback (most recent call last):' in html
    assert "KeyError: &#x27;&lt;b&gt;x&lt;/b&gt;&#x27;" in html
    assert "Covered to seq" in html or "covered to seq" in html.lower()
    assert f'action="{reverse("dashboard:ops_job_retry", args=["compaction", run.pk])}"' in html


def test_a_webhook_deliverys_detail_shows_its_payload_as_json(client: Client, tenant: Tenant) -> None:
    sent = delivery(tenant.team, "failed", attempts=2, error="HTTP 500")

    html = admin_of(client, tenant).get(detail_url("webhooks", sent.pk)).content.decode()

    assert '<pre class="json">{\n  &quot;session&quot;: &quot;s-1&quot;,\n  &quot;tokens&quot;: 12\n}</pre>' in html
    assert "memory_app.tasks.deliver_webhook" in html and "queue <code>celery</code>" in html
    assert "No attempt raised an exception." not in html  # an HTTP 500 is recorded, not raised
    assert "the job recorded the error above itself" in html


def test_retry_from_a_jobs_detail_returns_to_it(
    client: Client, tenant: Tenant, django_capture_on_commit_callbacks
) -> None:
    run = FactExtractionRun.objects.create(
        team=tenant.team, session=chat(tenant.team, "kg", "kg"), trigger="manual", status="failed", attempts=4
    )
    admin = admin_of(client, tenant)
    url = detail_url("facts", run.pk)

    with django_capture_on_commit_callbacks(execute=True):
        response = admin.post(reverse("dashboard:ops_job_retry", args=["facts", run.pk]), {"next": url})

    assert response.status_code == 302 and response["Location"] == url
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("pending", 0)
    assert "is queued again" in admin.get(url).content.decode()


def test_another_teams_job_and_an_unknown_kind_are_not_found(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    theirs = compaction_run(other_tenant.team, chat(other_tenant.team, "theirs"), "failed", traceback=TRACEBACK)
    admin = admin_of(client, tenant)

    assert admin.get(detail_url("compaction", theirs.pk)).status_code == 404
    assert admin.get(detail_url("facts", theirs.pk)).status_code == 404
    assert admin.get(detail_url("nope", theirs.pk)).status_code == 404
    assert admin.get(detail_url("compaction", uuid.uuid4())).status_code == 404


def test_members_who_administer_no_team_cannot_open_the_history_or_a_job(client: Client, tenant: Tenant) -> None:
    user = get_user_model().objects.create_user("member")
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=False)
    client.force_login(user)
    run = compaction_run(tenant.team, chat(tenant.team, "s"))

    assert client.get(JOBS).status_code == 403
    assert client.get(detail_url("compaction", run.pk)).status_code == 403


# --- throughput and latency ----------------------------------------------------------------------------------


def test_throughput_counts_jobs_ended_per_minute_with_p50_and_p95(tenant: Tenant) -> None:
    team = tenant.team
    session = chat(team, "trip")
    now = timezone.now()
    for n, ms in enumerate([100] * 18 + [5000, 9000]):  # 20 jobs, two slow
        compaction_run(team, session, "done", finished_at=now - timedelta(minutes=n % 3, seconds=1), duration_ms=ms)
    compaction_run(team, session, "failed", finished_at=now - timedelta(seconds=5), duration_ms=200)
    compaction_run(team, session, "done", finished_at=now - timedelta(hours=2), duration_ms=1)  # outside the hour
    source = job_kind_get(kind="compaction")

    hour = ops_selectors.job_throughput(
        source=source, team_ids=[team.pk], now=now, bucket=timedelta(minutes=1), buckets=60
    )
    day = ops_selectors.job_throughput(
        source=source, team_ids=[team.pk], now=now, bucket=timedelta(hours=1), buckets=24
    )

    assert hour.finished == 21 and day.finished == 22
    assert [(b.done, b.failed) for b in hour.buckets[-3:]] == [(6, 0), (7, 0), (7, 1)]
    assert sum(b.total for b in hour.buckets[:-3]) == 0
    assert (hour.p50_ms, hour.p95_ms) == (100, 5000)
    chart = charts.throughput_chart(hour, charts.WINDOWS["hour"])
    assert chart.peak == 8 and len(chart.bars) == 60
    assert chart.bars[-1].done_height + chart.bars[-1].failed_height == chart.height
    assert "8 jobs ended (7 done, 1 not)" in chart.bars[-1].title


def test_webhook_deliveries_are_timed_from_claim_to_delivery(tenant: Tenant) -> None:
    now = timezone.now()
    delivery(tenant.team, claimed_at=now - timedelta(seconds=3), delivered_at=now - timedelta(seconds=1))
    delivery(tenant.team, "failed", claimed_at=now - timedelta(seconds=9), updated_at=now - timedelta(seconds=1))
    WebhookDelivery.objects.filter(status="failed").update(updated_at=now - timedelta(seconds=1))
    source = job_kind_get(kind="webhooks")

    hour = ops_selectors.job_throughput(source=source, team_ids=None, now=now, bucket=timedelta(minutes=1), buckets=60)

    assert hour.finished == 2 and (hour.buckets[-1].done, hour.buckets[-1].failed) == (1, 1)
    assert (hour.p50_ms, hour.p95_ms) == (2000, 8000)


def test_the_ops_page_charts_each_queue_over_the_window_chosen(client: Client, tenant: Tenant) -> None:
    compaction_run(tenant.team, chat(tenant.team, "trip"), "done", finished_at=ago(minutes=30), duration_ms=1200)
    admin = admin_of(client, tenant)

    hour = admin.get(OPS)
    day = admin.get(OPS, {"window": "day"})

    html = hour.content.decode()
    for kind in ("compaction", "facts", "search", "webhooks"):
        assert f'id="queue-row-{kind}"' in html and f'aria-labelledby="chart-{kind}-title"' in html
    assert html.count('<rect class="done"') == 1
    assert "1 ended in the last hour" in html and "p50 1.2 s" in html
    assert len(hour.context["queues"][0].chart.bars) == 60 and len(day.context["queues"][0].chart.bars) == 24
    assert 'data-live-url="/ops/status/?window=day"' in day.content.decode()


# --- liveness and the queue nobody consumes ------------------------------------------------------------------


def test_a_queue_with_pending_jobs_and_no_consumer_is_flagged(client: Client, tenant: Tenant) -> None:
    beat(WorkerIdentity(name="celery@only-compaction", pid=1, concurrency=1, queues=["compaction"]))
    team = tenant.team
    compaction_run(team, chat(team, "a"), "pending")
    FactExtractionRun.objects.create(team=team, session=chat(team, "kg", "kg"), trigger="manual")
    delivery(team, "pending")

    response = admin_of(client, tenant).get(OPS)

    flagged = [q.source.kind for q in response.context["unserved"]]
    assert flagged == ["facts", "webhooks"]
    html = response.content.decode()
    assert 'id="unserved-facts"' in html and "No worker consumes queue <code>facts</code>" in html
    assert "1 pending fact extraction job will wait" in html
    assert 'id="unserved-compaction"' not in html and 'id="unserved-search"' not in html
    assert '<tr id="queue-row-facts" class="unserved">' in html


def test_with_no_worker_beating_every_queue_with_pending_jobs_is_flagged(client: Client, tenant: Tenant) -> None:
    compaction_run(tenant.team, chat(tenant.team, "a"), "pending")

    response = admin_of(client, tenant).get(OPS)

    assert [q.source.kind for q in response.context["unserved"]] == ["compaction"]
    assert "No worker has sent a heartbeat in the last 30 s." in response.content.decode()


def test_oldest_pending_counts_a_retried_job_from_its_retry(client: Client, tenant: Tenant) -> None:
    run = compaction_run(tenant.team, chat(tenant.team, "a"), "pending", attempts=1)
    # Created 6 min 56 s ago, put back by a retry 20 s ago.
    CompactionRun.objects.filter(pk=run.pk).update(created_at=ago(minutes=6, seconds=56), pending_since=ago(seconds=20))

    html = admin_of(client, tenant).get(OPS).content.decode()

    section = html[html.index('id="queue-compaction"') :]
    assert ">20 s</span>" in section and "6 min 56 s" not in html
    assert "put back by a retry" in section  # the title says what it measures


# --- a job waiting to retry ------------------------------------------------------------------------------------


def waiting_to_retry(tenant: Tenant, *, started: timedelta, pending: timedelta, due: timedelta) -> CompactionRun:
    """A compaction whose attempt failed `started` ago, put back `pending` ago, its retry due `due` from now."""
    now = timezone.now()
    run = compaction_run(
        tenant.team,
        chat(tenant.team, "a"),
        "pending",
        attempts=1,
        error="LLM answered 503",
        started_at=now - started,
        pending_since=now - pending,
    )
    CompactionRun.objects.filter(pk=run.pk).update(queued_at=now + due)  # what the retry set
    run.refresh_from_db()
    return run


def test_a_job_waiting_to_retry_shows_its_previous_attempt_and_when_the_next_is_due(
    client: Client, tenant: Tenant
) -> None:
    run = waiting_to_retry(
        tenant, started=timedelta(seconds=40), pending=timedelta(seconds=20), due=timedelta(seconds=40)
    )

    html = admin_of(client, tenant).get(detail_url("compaction", run.pk)).content.decode()

    # Never a "Started" earlier than "Pending since" left unexplained: it is the attempt before.
    assert "Previous attempt started" in html and ">Started<" not in html
    assert f'<dd class="next-attempt"><time datetime="{run.queued_at.isoformat()}"' in html
    assert "overdue" not in html
    # The error was recorded by the job, not raised: no "no exception" beside it.
    assert "No attempt raised an exception." not in html
    assert "the job recorded the error above itself" in html


def test_a_retry_long_past_its_due_time_is_flagged_overdue(client: Client, tenant: Tenant) -> None:
    run = waiting_to_retry(
        tenant, started=timedelta(minutes=10), pending=timedelta(minutes=9), due=-timedelta(minutes=5, seconds=3)
    )

    html = admin_of(client, tenant).get(detail_url("compaction", run.pk)).content.decode()

    assert re.search(r'<strong class="flag overdue">overdue by 5 min \d+ s</strong>', html)
