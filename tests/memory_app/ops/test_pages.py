"""Ops page (team admins and superusers): per-queue job counts, oldest pending age, workers and the
queues they consume, failures and retry."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memory_app import jobs
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType, Session
from memory_app.jobs.dispatchers import Sent
from memory_app.jobs.heartbeat import WorkerIdentity, beat, stopped
from memory_app.ops import pages as ops_pages
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant
from tests.job_dispatch import Sends

OPS = reverse("dashboard:ops")
OPS_STATUS = reverse("dashboard:ops_status")


@pytest.fixture(autouse=True)
def sent(job_outbox: list[Sent]) -> Sends:
    """Compaction tasks recorded instead of going to a broker."""
    return Sends(job_outbox, compaction.JOB)


EVERY_QUEUE = ["celery", "compaction", "facts", "search"]


def heartbeat(name: str, queues: list[str], *, concurrency: int = 2, seconds_ago: float = 0.0) -> None:
    """A worker's heartbeat row, written as the worker's own heartbeat thread writes it."""
    worker = WorkerIdentity(name=name, pid=4242, concurrency=concurrency, queues=queues)
    beat(worker, now=timezone.now() - timedelta(seconds=seconds_ago))


@pytest.fixture
def staff(client: Client, db) -> Client:
    """An operator of the whole deployment: a superuser sees every team's jobs."""
    client.force_login(get_user_model().objects.create_user("operator", is_staff=True, is_superuser=True))
    return client


def team_admin(client: Client, *tenants: Tenant, is_staff: bool = False) -> Client:
    user = get_user_model().objects.create_user(f"admin-{uuid.uuid4().hex[:6]}", is_staff=is_staff)
    for tenant in tenants:
        TeamMembership.objects.create(team=tenant.team, user=user, is_admin=True)
    client.force_login(user)
    return client


def managed(tenant: Tenant, external_id: str) -> Session:
    """A managed session with a turn before the protected one: a retry has something to compact."""
    session = services.session_create(
        team=tenant.team, external_id=external_id, memory_type=MemoryType.MANAGED_CONVERSATION
    )
    services.message_append(
        session=session,
        messages=[
            {"role": "user", "content": "plan the trip"},
            {"role": "assistant", "content": "where to?"},
            {"role": "user", "content": "Oslo"},
            {"role": "assistant", "content": "booked"},
        ],
    )
    return session


def job(session: Session, status: str, **fields) -> CompactionRun:
    return CompactionRun.objects.create(
        team_id=session.team_id, session=session, trigger=fields.pop("trigger", "threshold"), status=status, **fields
    )


def failed(session: Session, error: str = "LLM said no", **fields) -> CompactionRun:
    fields.setdefault("finished_at", timezone.now())
    return job(session, "failed", error=error, attempts=4, **fields)


def retry_url(run: CompactionRun, kind: str = "compaction") -> str:
    return reverse("dashboard:ops_job_retry", args=[kind, run.pk])


def compaction_queue(response) -> ops_pages.QueueView:
    (queue,) = [q for q in response.context["queues"] if q.source.kind == "compaction"]
    return queue


def flashes(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


# --- who may see it -------------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_to_log_in(client: Client, tenant: Tenant) -> None:
    run = failed(managed(tenant, "s"))
    for response in (client.get(OPS), client.get(OPS_STATUS), client.post(retry_url(run))):
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("is_staff", [False, True])
def test_members_who_administer_no_team_get_403(client: Client, tenant: Tenant, is_staff: bool) -> None:
    # The global staff flag opens the Django admin, not other teams' jobs.
    user = get_user_model().objects.create_user("ada", is_staff=is_staff)
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=False)
    client.force_login(user)
    run = failed(managed(tenant, "s"))

    for response in (client.get(OPS), client.get(OPS_STATUS), client.post(retry_url(run))):
        assert response.status_code == 403
        assert b"Team admins only" in response.content
    assert CompactionRun.objects.count() == 1
    assert list(CompactionRun.objects.values_list("status", flat=True)) == ["failed"]
    assert b">Ops</a>" not in client.get(reverse("dashboard:sessions")).content


def test_superusers_see_it_without_belonging_to_a_team(staff: Client, tenant: Tenant) -> None:
    response = staff.get(OPS)

    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Ops" in html and "background jobs of every team" in html
    assert 'aria-current="page">Ops</a>' in html


def test_a_team_admin_sees_and_retries_only_the_jobs_of_their_teams(
    client: Client, tenant: Tenant, other_tenant: Tenant, sent: Sends
) -> None:
    ours = failed(managed(tenant, "ours"), error="our failure")
    theirs = failed(managed(other_tenant, "theirs"), error="their secret failure")
    job(managed(other_tenant, "their-pending"), "pending")
    admin = team_admin(client, tenant, is_staff=True)

    for page in (admin.get(OPS), admin.get(OPS_STATUS)):
        assert page.status_code == 200
        html = page.content.decode()
        assert "our failure" in html
        assert "their secret failure" not in html
        assert other_tenant.team.name not in html
        queue = compaction_queue(page)
        assert (queue.stats.failed, queue.stats.pending) == (1, 0)
        assert [row.team_id for row in queue.stats.by_team] == [tenant.team.pk]

    assert admin.post(retry_url(theirs)).status_code == 404
    assert CompactionRun.objects.filter(session=theirs.session).count() == 1
    assert admin.post(retry_url(ours)).status_code == 302
    assert CompactionRun.objects.filter(session=ours.session).count() == 2
    assert b">Ops</a>" in admin.get(reverse("dashboard:sessions")).content
    assert "background jobs of the teams you administer" in admin.get(OPS).content.decode()


# --- counts and ages ------------------------------------------------------------------------------


def test_it_counts_jobs_per_status_across_every_team(staff: Client, tenant: Tenant, other_tenant: Tenant) -> None:
    a1, a2, a3 = (managed(tenant, f"a{n}") for n in range(3))
    b1, b2 = (managed(other_tenant, f"b{n}") for n in range(2))
    job(a1, "pending")
    job(a2, "pending")
    job(b1, "pending")
    job(a3, "running", attempts=1)
    failed(a1)
    failed(b2)
    failed(b2, finished_at=timezone.now() - timedelta(days=3))
    job(b1, "done")
    job(a2, "reverted")

    response = staff.get(OPS)

    queue = compaction_queue(response)
    assert queue.source.queue == "compaction"
    stats = queue.stats
    assert (stats.pending, stats.running, stats.failed, stats.failed_recently) == (3, 1, 3, 2)
    teams = {t.team_name: (t.pending, t.running, t.failed) for t in stats.by_team}
    assert teams == {"alpha": (2, 1, 1), "beta": (1, 0, 2)}
    html = response.content.decode()
    assert '<div class="stat stat-pending"><dt>Pending</dt><dd>3</dd></div>' in html
    assert '<div class="stat stat-running"><dt>Running</dt><dd>1</dd></div>' in html
    assert '<dd>3 <small class="muted">2 in 24 h</small></dd>' in html
    assert '<td>alpha</td><td class="num">2</td><td class="num">1</td><td class="num">1</td>' in html


def test_the_oldest_pending_age_runs_from_when_it_became_pending_not_the_last_resend(
    staff: Client, tenant: Tenant
) -> None:
    old = job(managed(tenant, "old"), "pending")
    job(managed(tenant, "new"), "pending")
    # The sweeper re-sent the old one a minute ago: queued_at moves, pending_since does not.
    CompactionRun.objects.filter(pk=old.pk).update(
        created_at=timezone.now() - timedelta(hours=3),
        pending_since=timezone.now() - timedelta(hours=2, minutes=5),
        queued_at=timezone.now() - timedelta(minutes=1),
    )

    response = staff.get(OPS)

    queue = compaction_queue(response)
    assert timedelta(hours=2, minutes=5) <= queue.oldest_pending_age < timedelta(hours=2, minutes=6)
    assert ">2 h 5 min</span>" in response.content.decode()


def test_an_empty_queue_shows_zeros_and_no_age(staff: Client, db) -> None:
    response = staff.get(OPS)

    queue = compaction_queue(response)
    assert (queue.stats.pending, queue.stats.running, queue.stats.failed) == (0, 0, 0)
    assert queue.oldest_pending_age is None
    assert "No failed jobs." in response.content.decode()


@pytest.mark.parametrize(
    ("seconds", "label"),
    [(0, "0 s"), (45, "45 s"), (725, "12 min 5 s"), (3600, "1 h"), (12_005, "3 h 20 min"), (187_200, "2 d 4 h")],
)
def test_ages_read_as_two_units_at_most(seconds: int, label: str) -> None:
    assert ops_pages.short_duration(timedelta(seconds=seconds)) == label


def test_a_second_job_kind_slots_in_as_another_source(
    staff: Client, tenant: Tenant, settings, request: pytest.FixtureRequest
) -> None:
    job(managed(tenant, "s"), "pending")
    settings.SUMMARIES_QUEUE = "summaries"
    extra = dataclasses.replace(
        compaction.JOB,
        kind="summaries",
        label="Summaries",
        queue_setting="SUMMARIES_QUEUE",
        task="memory_app.tasks.summaries",
        metric_label="summaries",
        retry_service=None,
        argument_fields=(),
    )
    jobs.register(extra)
    request.addfinalizer(lambda: jobs.unregister(extra))

    response = staff.get(OPS)

    assert [q.source.kind for q in response.context["queues"]] == [
        "compaction",
        "facts",
        "search",
        "webhooks",
        "summaries",
    ]
    html = response.content.decode()
    assert 'id="queue-compaction"' in html and 'id="queue-summaries"' in html
    assert "Summaries" in html
    # Without a retry service of its own, its failures get no retry button (and the URL is 404).
    run = failed(Session.objects.get(external_id="s"))
    html = staff.get(OPS).content.decode()
    assert html.count(f'id="job-{run.pk}"') == 2  # listed under both kinds, which share the model
    assert html.count(f'action="{retry_url(run)}"') == 1
    assert f'action="{retry_url(run, kind="summaries")}"' not in html
    assert staff.post(retry_url(run, kind="summaries")).status_code == 404


# --- failures and retry -----------------------------------------------------------------------------


def test_recent_failures_show_their_team_error_and_a_retry_button(
    staff: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    older = failed(managed(tenant, "alpha-chat"), error="gave up after 4 attempts: 429 rate limited")
    CompactionRun.objects.filter(pk=older.pk).update(finished_at=timezone.now() - timedelta(hours=1))
    newer = failed(managed(other_tenant, "beta-chat"), error="<img src=x onerror=alert(1)> payload too large")

    response = staff.get(OPS)

    queue = compaction_queue(response)
    assert [f.pk for f in queue.failures] == [newer.pk, older.pk]
    html = response.content.decode()
    newer_row = html[html.index(f'id="job-{newer.pk}"') : html.index(f'id="job-{older.pk}"')]
    assert '<span class="team-tag">beta</span>' in newer_row
    assert "beta-chat" in newer_row
    assert "&lt;img src=x onerror=alert(1)&gt; payload too large" in newer_row
    assert "<img src=x" not in html
    assert f'action="{retry_url(newer)}"' in newer_row
    assert "csrfmiddlewaretoken" in newer_row
    assert '<span class="team-tag">alpha</span>' in html
    assert "gave up after 4 attempts: 429 rate limited" in html


def test_retry_queues_a_new_pending_run_and_keeps_the_failed_one(
    staff: Client, tenant: Tenant, sent: Sends, django_capture_on_commit_callbacks
) -> None:
    session = managed(tenant, "s")
    run = failed(session, trigger="payload_error")

    with django_capture_on_commit_callbacks(execute=True):
        response = staff.post(retry_url(run), follow=True)

    run.refresh_from_db()
    assert run.status == "failed"
    new = CompactionRun.objects.exclude(pk=run.pk).get(session=session)
    assert (new.status, new.trigger) == ("pending", "payload_error")
    assert sent.ids == [str(new.pk)]
    assert response.redirect_chain == [(OPS, 302)]
    assert flashes(response) == [f"Context compaction: queued a new job for session s ({new.pk})."]
    # Now marked as retried instead of offering a second retry.
    queue = compaction_queue(response)
    assert queue.failures[0].retried
    assert f'action="{retry_url(run)}"' not in response.content.decode()
    assert ">retried</span>" in response.content.decode()


def test_retry_when_the_session_already_has_a_pending_run_queues_nothing(staff: Client, tenant: Tenant) -> None:
    session = managed(tenant, "s")
    run = failed(session)
    pending = job(session, "pending")

    response = staff.post(retry_url(run), follow=True)

    assert CompactionRun.objects.filter(session=session).count() == 2
    assert flashes(response) == ["Context compaction: session s already has a pending job."]
    assert pending.pk in {r.pk for r in CompactionRun.objects.filter(status="pending")}


def test_retrying_a_job_that_did_not_fail_shows_the_conflict(staff: Client, tenant: Tenant) -> None:
    run = job(managed(tenant, "s"), "done")

    response = staff.post(retry_url(run), follow=True)

    assert flashes(response) == ["Only a failed or skipped compaction can be retried (this one is done)."]
    assert CompactionRun.objects.count() == 1


def test_retry_needs_a_post_a_known_kind_and_a_known_job(staff: Client, tenant: Tenant) -> None:
    run = failed(managed(tenant, "s"))

    assert staff.get(retry_url(run)).status_code == 405
    assert staff.post(retry_url(run, kind="facts")).status_code == 404
    assert staff.post(reverse("dashboard:ops_job_retry", args=["compaction", uuid.uuid4()])).status_code == 404
    assert CompactionRun.objects.count() == 1


def test_compaction_retry_refuses_runs_that_are_not_failed(db, tenant: Tenant) -> None:
    session = managed(tenant, "s")
    for status in ("pending", "running", "done", "reverted"):
        CompactionRun.objects.filter(session=session).delete()
        with pytest.raises(compaction.Conflict):
            compaction.compaction_retry(run=job(session, status))


# --- workers ------------------------------------------------------------------------------------------


def test_workers_that_beat_are_listed_with_their_queues_and_slots(staff: Client) -> None:
    heartbeat("celery@web-2", ["compaction"], concurrency=1)
    heartbeat("celery@web-1", EVERY_QUEUE, seconds_ago=4)

    response = staff.get(OPS)

    workers = response.context["workers"]
    assert workers.names == ["celery@web-1", "celery@web-2"]
    assert workers.consumers_of("compaction") == ["celery@web-1", "celery@web-2"]
    assert workers.consumers_of("facts") == ["celery@web-1"]
    html = response.content.decode()
    assert ">2 workers alive, 0 of 3 slots busy.</strong>" in html
    assert '<td class="worker-beat" data-label="Heartbeat">4 s ago</td>' in html


def test_a_busy_worker_shows_what_each_slot_runs_and_is_never_called_missing(staff: Client, tenant: Tenant) -> None:
    heartbeat("celery@busy", EVERY_QUEUE, concurrency=2)
    session = managed(tenant, "long")
    run = job(session, "running", worker="celery@busy", started_at=timezone.now() - timedelta(seconds=95))
    job(managed(tenant, "waiting"), "pending")

    html = staff.get(OPS).content.decode()

    assert ">1 worker alive, 1 of 2 slots busy.</strong>" in html
    assert reverse("dashboard:ops_job", args=["compaction", run.pk]) in html
    assert reverse("dashboard:session", args=[session.pk]) in html
    assert '<span class="slot-time">95 s</span>' in html
    assert 'id="unserved-compaction"' not in html  # a pending job behind a busy worker is served


def test_a_worker_that_stopped_beating_is_lost_and_its_queue_unserved(staff: Client, tenant: Tenant) -> None:
    heartbeat("celery@gone", ["compaction"], seconds_ago=ops_pages.worker_lost_after() + 5)
    job(managed(tenant, "s"), "pending")

    response = staff.get(OPS)

    workers = response.context["workers"]
    assert workers.names == [] and [w.name for w in workers.gone] == ["celery@gone"]
    html = response.content.decode()
    assert '<strong class="flag">lost</strong>' in html
    assert f"No worker has sent a heartbeat in the last {ops_pages.worker_lost_after():g} s." in html
    assert 'id="unserved-compaction"' in html


def test_a_worker_that_shut_down_says_stopped(staff: Client) -> None:
    worker = WorkerIdentity(name="celery@done", pid=7, concurrency=2, queues=EVERY_QUEUE)
    beat(worker)
    stopped(worker)

    response = staff.get(OPS)

    assert response.context["workers"].names == []
    html = response.content.decode()
    assert '<td class="worker-beat" data-label="Heartbeat"><span class="muted">stopped</span></td>' in html


def test_a_team_admin_sees_only_their_teams_jobs_in_the_slots(
    client: Client, tenant: Tenant, other_tenant: Tenant
) -> None:
    heartbeat("celery@shared", EVERY_QUEUE)
    mine = job(managed(tenant, "mine"), "running", worker="celery@shared", started_at=timezone.now())
    theirs = job(managed(other_tenant, "theirs"), "running", worker="celery@shared", started_at=timezone.now())

    html = team_admin(client, tenant).get(OPS).content.decode()

    assert str(mine.pk) in html and str(theirs.pk) not in html
    assert "celery@shared" in html


def test_no_worker_ever_seen_is_said_plainly(staff: Client) -> None:
    html = staff.get(OPS).content.decode()

    assert '<strong class="workers-summary unknown">No worker has sent a heartbeat in the last 30 s.</strong>' in html


# --- the live part --------------------------------------------------------------------------------------


def test_the_page_polls_a_partial_that_renders_the_same_status(staff: Client, tenant: Tenant) -> None:
    failed(managed(tenant, "s"), error="boom")
    job(managed(tenant, "t"), "pending")

    page = staff.get(OPS).content.decode()
    partial = staff.get(OPS_STATUS)

    assert f'data-live-url="{OPS_STATUS}?window=hour"' in page
    assert f'data-live-seconds="{ops_pages.OPS_REFRESH_SECONDS}"' in page
    assert 'src="/static/js/dashboard.js"' in page
    html = partial.content.decode()
    assert partial.status_code == 200
    assert "<html" not in html and "<header" in html  # a snippet, not a page
    assert '<div class="stat stat-pending"><dt>Pending</dt><dd>1</dd></div>' in html
    assert "boom" in html and "csrfmiddlewaretoken" in html


def test_the_partial_takes_a_fixed_number_of_queries(
    staff: Client, tenant: Tenant, other_tenant: Tenant, django_assert_num_queries
) -> None:
    for n in range(5):
        failed(managed(tenant, f"a{n}"))
        job(managed(other_tenant, f"b{n}"), "pending")
        heartbeat(f"celery@w{n}", EVERY_QUEUE)
        job(managed(tenant, f"c{n}"), "running", worker=f"celery@w{n}", started_at=timezone.now())

    # session + user, the workers' heartbeats, then per queue (compaction, facts, search, webhooks):
    # the jobs the workers run, stats (grouped), the ended jobs of the throughput window, failures
    # (with team, session and the retried flag); the search index: its backlog (grouped) and failed items
    with django_assert_num_queries(21):
        staff.get(OPS_STATUS)


# --- admin --------------------------------------------------------------------------------------------


def test_the_admin_lists_runs_read_only_and_retries_failed_ones(admin_client: Client, tenant: Tenant) -> None:
    session = managed(tenant, "s")
    run = failed(session)
    done = job(managed(tenant, "t"), "done", covered_from_seq=0, covered_to_seq=8)

    changelist = admin_client.get(reverse("admin:memory_app_compactionrun_changelist"))
    response = admin_client.post(
        reverse("admin:memory_app_compactionrun_changelist"),
        {"action": "retry_selected", "_selected_action": [str(run.pk), str(done.pk)]},
        follow=True,
    )

    assert changelist.status_code == 200
    assert "#1\N{EN DASH}#8" in changelist.content.decode()
    assert CompactionRun.objects.filter(session=session, status="pending").count() == 1
    assert "Queued 1 new run; skipped 1" in response.content.decode()
    change = admin_client.get(reverse("admin:memory_app_compactionrun_change", args=[run.pk]))
    assert change.status_code == 200
    assert b'name="_save"' not in change.content
