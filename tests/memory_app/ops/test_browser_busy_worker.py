"""In Debian's chromium: the ops page while a real worker's every slot runs a long job. The page
must say the worker is alive and busy, what each slot runs, and never tell the operator to start
a worker for the jobs waiting behind it, whatever refresh they look at."""

from __future__ import annotations

import json
import threading

import pytest
from playwright.sync_api import expect

from memory_app.conversations import services
from memory_app.facts import extraction as fact_extraction
from memory_app.facts.models import FactExtractionRun
from memory_app.ops import pages as ops_pages
from tests.browser_kit import DESKTOP, PHONE, browser, check_page, member, open_page
from tests.llm_server import Reply
from tests.worker_process import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REFRESHES_WATCHED = 5


@pytest.fixture
def worker_env() -> dict[str, str]:
    return {"MEMSITE_WORKER_HEARTBEAT_SECONDS": "1"}


def test_a_worker_busy_with_long_jobs_is_shown_busy_and_never_missing(
    live_server, start_worker, llm_server, monkeypatch: pytest.MonkeyPatch
) -> None:
    team, _ = member("demo", "ada", admin=True)
    release = threading.Event()
    answer = json.dumps({"facts": [{"subject": "Ada", "predicate": "works at", "object": "Acme"}]})
    llm_server.script(*(Reply(answer, hold=release) for _ in range(3)))
    runs = [
        fact_extraction.fact_extraction_request_text(
            session=services.session_create(team=team, external_id=f"kg-{n}", memory_type="kg"),
            text="Ada works at Acme.",
            role="user",
        )
        for n in range(3)
    ]
    monkeypatch.setattr(ops_pages, "OPS_REFRESH_SECONDS", 1)
    start_worker(pool="prefork")  # two slots: two extractions hold their LLM answer, the third waits
    try:
        wait_for(lambda: len(llm_server.requests) == 2, timeout=60, what="both slots to be busy")
        with browser() as opened:
            page = open_page(opened, live_server.url, viewport=DESKTOP)
            page.goto(live_server.url + "/ops/")
            summary = page.locator(".workers-summary")
            for _ in range(REFRESHES_WATCHED):
                # Each pass reads a newer refresh of the partial (it is re-fetched every second).
                checked = page.locator(".workers time").get_attribute("datetime")
                expect(page.locator(".workers time")).not_to_have_attribute("datetime", checked or "", timeout=5_000)
                expect(summary).to_have_text("1 worker alive, 2 of 2 slots busy.")
                expect(page.locator(".unserved-alert")).to_have_count(0)
                expect(page.locator("#queue-row-facts .consumers")).to_have_text("1 worker")
                expect(page.locator("#queue-facts .stat-pending dd")).to_have_text("1")
            slots = page.locator(".worker-running li")
            expect(slots).to_have_count(2)
            expect(slots.first).to_contain_text("Fact extraction")
            check_page(page, "ops-busy-worker")
            page.set_viewport_size(PHONE)
            expect(summary).to_have_text("1 worker alive, 2 of 2 slots busy.")
            check_page(page, "ops-busy-worker")
    finally:
        release.set()
    wait_for(
        lambda: FactExtractionRun.objects.filter(pk__in=[r.pk for r in runs], status="done").count() == 3,
        timeout=60,
        what="the three extractions to finish once answered",
    )
