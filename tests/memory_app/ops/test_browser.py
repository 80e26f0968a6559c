"""The ops pages in Debian's chromium at phone and desktop width: the queues page flags the queue
no worker consumes, the job history filters and paginates, and a failed job's detail shows its
traceback. Every page fits its width, passes axe-core and is photographed (var/screenshots/ops*)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect

from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.facts.models import FactExtractionRun
from memory_app.jobs.heartbeat import WorkerIdentity, beat
from memory_app.models import Webhook, WebhookDelivery
from memory_app.ops import pages as ops_pages
from memory_app.search.models import IndexRun
from tests.browser_kit import DESKTOP, PASSWORD, PHONE, browser, check_page, member, open_page

pytestmark = pytest.mark.browser

TRACEBACK = """Traceback (most recent call last):
  File "/srv/memsite/memory_app/tasks.py", line 31, in compact_session
    return compaction.compaction_execute(run_id=run_id)
  File "/srv/memsite/memory_app/compaction/services.py", line 488, in compaction_execute
    config = session_config(session)
KeyError: 'memory_config.compaction.a_very_long_configuration_key_that_must_wrap_on_a_phone'"""


def ops_page(opened: Browser, base_url: str, viewport: ViewportSize, path: str) -> Page:
    """Logged in as the team's admin, straight onto `path` (the log-in form's `next`)."""
    page = open_page(opened, base_url, viewport=viewport, user=None)
    page.goto(f"{base_url}/accounts/login/?next={path}")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    expect(page.locator("header.topbar .logout")).to_be_attached()
    return page


WIDTHS = pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390", "1280"])


@pytest.fixture
def ops_data(transactional_db, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A team with an hour of finished jobs of every kind, failures, a pending extraction, and one
    worker that consumes every queue but "facts"."""
    team, _ = member("demo", "ada", admin=True)
    now = timezone.now()
    chat = services.session_create(team=team, external_id="support-chat-2041", memory_type="managed_conversation")
    kg = services.session_create(team=team, external_id="customer-profile-kg", memory_type="kg")
    for n in range(36):
        CompactionRun.objects.create(
            team=team,
            session=chat,
            trigger="threshold",
            status="done" if n % 9 else "skipped",
            attempts=1,
            worker="celery@ops-worker-1.internal.example",
            started_at=now - timedelta(minutes=n * 1.5, seconds=3),
            finished_at=now - timedelta(minutes=n * 1.5),
            duration_ms=800 + 150 * n,
        )
    failed = CompactionRun.objects.create(
        team=team,
        session=chat,
        trigger="manual",
        status="failed",
        attempts=4,
        worker="celery@ops-worker-1.internal.example",
        error="gave up after 4 attempts: KeyError: 'memory_config.compaction.a_very_long_configuration_key'",
        traceback=TRACEBACK,
        started_at=now - timedelta(minutes=2),
        finished_at=now - timedelta(minutes=1),
        duration_ms=61_000,
    )
    FactExtractionRun.objects.create(team=team, session=kg, trigger="manual", from_seq=1, to_seq=4)
    CompactionRun.objects.create(  # what the worker's one busy slot is running
        team=team,
        session=services.session_create(team=team, external_id="nightly-digest", memory_type="managed_conversation"),
        trigger="manual",
        status="running",
        attempts=1,
        worker="celery@ops-worker-1.internal.example",
        started_at=now - timedelta(seconds=42),
    )
    for n in range(5):
        IndexRun.objects.create(
            team=team,
            status="done",
            trigger="write",
            started_at=now - timedelta(minutes=n * 7, seconds=1),
            finished_at=now - timedelta(minutes=n * 7),
            duration_ms=120,
        )
    hook = Webhook.objects.create(
        team=team, url="https://hooks.example.com/memsite", secret="whsec_x", secret_hint="whsec_x"
    )
    for n in range(4):
        WebhookDelivery.objects.create(
            team=team,
            webhook=hook,
            kind="compaction_completed",
            payload={"n": n},
            status="delivered",
            claimed_at=now - timedelta(minutes=n * 11, seconds=1),
            delivered_at=now - timedelta(minutes=n * 11),
        )
    beat(
        WorkerIdentity(
            name="celery@ops-worker-1.internal.example",
            pid=311,
            concurrency=2,
            queues=["celery", "compaction", "search"],
        )
    )
    monkeypatch.setattr(ops_pages, "OPS_REFRESH_SECONDS", 3600)  # one screenful, not a moving target
    return {"failed": str(failed.pk)}


def assert_within_the_width(page: Page, cell: Locator) -> None:
    """The cell is on screen without scrolling sideways: no column hidden past the table's edge."""
    box, viewport = cell.bounding_box(), page.viewport_size
    assert box is not None and viewport is not None and box["x"] >= 0
    assert box["x"] + box["width"] <= viewport["width"], f"{cell} ends past the viewport"


@WIDTHS
def test_the_queues_page_fits_and_flags_the_queue_no_worker_consumes(
    live_server, ops_data: dict[str, str], viewport: ViewportSize
) -> None:
    with browser() as opened:
        page = ops_page(opened, live_server.url, viewport, "/ops/")

        flag = page.locator("#unserved-facts")
        expect(flag).to_contain_text("No worker consumes queue facts")
        expect(page.locator("#unserved-compaction")).to_have_count(0)
        expect(page.locator("#queue-row-facts .consumers")).to_have_text("none")
        expect(page.locator("#queue-row-compaction .consumers")).to_have_text("1 worker")
        expect(page.locator(".workers-summary")).to_have_text("1 worker alive, 1 of 2 slots busy.")
        busy = page.locator(".worker-row", has_text="ops-worker-1")
        expect(busy.locator(".worker-slots")).to_have_text("1 / 2")
        expect(busy.locator(".worker-running")).to_contain_text("Context compaction")
        busy.locator(".worker-running a").first.focus()  # the worker panel in view, for the screenshot
        check_page(page, "ops-workers")
        expect(page.locator("#queue-compaction .throughput-chart rect.done").first).to_be_attached()
        assert_within_the_width(page, page.locator('#queue-row-compaction td[data-label="p95"]'))
        for kind in ("compaction", "facts", "search", "webhooks"):
            expect(page.locator(f"#queue-{kind}")).to_be_visible()
        check_page(page, "ops")

        page.get_by_role("link", name="The last 24 hours").click()
        expect(page.get_by_role("link", name="The last 24 hours")).to_have_attribute("aria-current", "true")
        expect(page.locator("#queue-compaction .throughput-chart g.bar")).to_have_count(24)
        check_page(page, "ops-day")


@WIDTHS
def test_the_job_history_filters_and_paginates(live_server, ops_data: dict[str, str], viewport: ViewportSize) -> None:
    with browser() as opened:
        page = ops_page(opened, live_server.url, viewport, "/ops/jobs/")
        expect(page.locator(".job-count")).to_have_text("48 jobs")
        check_page(page, "ops-jobs")

        page.get_by_label("Kind").select_option(label="Context compaction")
        page.get_by_label("Order").select_option(label="slowest first")
        page.get_by_role("button", name="Apply").click()
        expect(page.locator(".job-count")).to_have_text("38 jobs")
        rows = page.locator("table.ops-jobs tbody tr")
        expect(rows).to_have_count(ops_pages.OPS_JOBS_PER_PAGE)
        assert_within_the_width(page, rows.first.locator(".worker-cell"))
        expect(rows.first).to_contain_text("1 min 1 s")  # the slowest: the failed one
        page.get_by_role("link", name="Next →").click()
        expect(rows).to_have_count(38 - ops_pages.OPS_JOBS_PER_PAGE)
        expect(page.locator(".pager")).to_contain_text("Page 2 of 2")
        expect(page.get_by_label("Kind")).to_have_value("compaction")

        page.get_by_label("Status").select_option("failed")
        page.get_by_role("button", name="Apply").click()
        expect(rows).to_have_count(1)
        expect(rows.first.locator(".job-state")).to_have_text("failed")
        check_page(page, "ops-jobs-filtered")


@WIDTHS
def test_a_failed_jobs_detail_shows_its_traceback(
    live_server, ops_data: dict[str, str], viewport: ViewportSize
) -> None:
    with browser() as opened:
        page = ops_page(opened, live_server.url, viewport, "/ops/jobs/%3Fstate%3Dfailed")
        page.locator(f"#job-{ops_data['failed']} .job-cell a").click()

        expect(page.get_by_role("heading", name="Context compaction job")).to_be_visible()
        expect(page.locator("pre.traceback")).to_contain_text("in compaction_execute")
        expect(page.locator("pre.traceback")).to_contain_text("KeyError")
        expect(page.locator(".job-worker")).to_have_text("celery@ops-worker-1.internal.example")
        expect(page.get_by_role("button", name="Retry")).to_be_visible()
        check_page(page, "ops-job")
