"""End to end in Debian's chromium: an operator watches the ops page's queues (a real Celery worker
writes its heartbeats), sees a job queued meanwhile without a reload, and retries another team's
failed compaction.

Run alone with `pytest -m browser`; skip with `-m "not browser"` on a machine without chromium.
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from memory_app.compaction import services as compaction
from memory_app.conversations.models import Session
from memory_app.jobs.models import WorkerHeartbeat
from memory_app.ops import pages as ops_pages
from tests.browser_kit import browser
from tests.celery_worker import celery_worker_argv
from tests.memory_app.compaction.compacted_world import build_compacted_world
from tests.memory_app.conversations.test_browser import log_in
from tests.worker_process import process_env

pytestmark = pytest.mark.browser

OPS_SCREENSHOT = Path(settings.BASE_DIR) / "var" / "screenshots" / "ops_page.png"


@pytest.fixture
def compacted(transactional_db, job_outbox) -> dict[str, str]:
    """Created before Playwright starts its event loop, so the ORM runs in a plain thread."""
    return build_compacted_world()


def run_in_thread(function) -> None:
    """Django's ORM refuses to run inside Playwright's event loop: use a plain thread."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            function()
        except BaseException as exc:  # re-raised in the test
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    if errors:
        raise errors[0]


class HeartbeatWorker:
    """A real Celery worker on the test's database and broker, on a queue of its own: it runs
    nothing, and its heartbeat thread says it is alive."""

    def __init__(self) -> None:
        self.name = f"ops-browser-{uuid.uuid4().hex[:6]}@%h"
        self.process = subprocess.Popen(
            celery_worker_argv(self.name, f"ops-browser-{uuid.uuid4().hex[:6]}", ["--pool", "solo"], "WARNING"),
            cwd=settings.BASE_DIR,
            env=process_env({"MEMSITE_WORKER_HEARTBEAT_SECONDS": "1"}),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_for_its_heartbeat(self, timeout: float = 60) -> str:
        node = self.name.split("@")[0]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the worker exited"
            beat = WorkerHeartbeat.objects.filter(name__startswith=f"{node}@").first()
            if beat is not None:
                return beat.name
            time.sleep(0.2)
        raise AssertionError("the worker never wrote a heartbeat")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


def test_operators_watch_the_queues_refresh_and_retry_a_failure(
    live_server, compacted: dict[str, str], monkeypatch
) -> None:
    # The operator of the deployment: the failure is another team's ("research").
    get_user_model().objects.filter(username="ada").update(is_superuser=True)
    monkeypatch.setattr(ops_pages, "OPS_REFRESH_SECONDS", 1)
    worker = HeartbeatWorker()
    try:
        worker_name = worker.wait_for_its_heartbeat()
        with browser() as opened:
            page = opened.new_page(viewport={"width": 1280, "height": 900})
            log_in(page, live_server.url)
            page.get_by_role("link", name="Ops").click()
            expect(page.get_by_role("heading", name="Ops")).to_be_visible()

            queue = page.locator("#queue-compaction")
            expect(queue.locator(".stat-pending dd")).to_have_text("1")
            expect(queue.locator(".stat-failed dd")).to_contain_text("1")
            expect(queue.locator(".stat-age dd")).to_contain_text("3 min")
            expect(page.locator(".workers code.worker")).to_have_text(worker_name)
            expect(page.locator(".workers-summary")).to_have_text("1 worker alive, 0 of 1 slot busy.")
            failure = queue.locator("table.failures tbody tr")
            expect(failure).to_have_count(1)
            expect(failure.locator(".team-tag")).to_have_text("research")
            expect(failure).to_contain_text("429 Too Many Requests")
            page.screenshot(path=str(OPS_SCREENSHOT), full_page=True)

            # The page polls its partial: a job queued now shows up without a reload.
            run_in_thread(
                lambda: compaction.compaction_request(
                    session=Session.objects.get(external_id="norway-trip"), trigger="manual"
                )
            )
            expect(queue.locator(".stat-pending dd")).to_have_text("2", timeout=10_000)

            failure.get_by_role("button", name="Retry").click()
            flash = page.locator(".flash")
            expect(flash).to_contain_text("queued a new job for session lit-review-7", timeout=10_000)
            expect(page.locator("#queue-compaction .stat-pending dd")).to_have_text("3")
            expect(page.locator("#queue-compaction table.failures .pill")).to_have_text("retried")
    finally:
        worker.stop()
    assert OPS_SCREENSHOT.stat().st_size > 10_000
