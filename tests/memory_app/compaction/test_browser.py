"""End to end in Debian's chromium, at phone and desktop width: the session page's compaction
panel, its memory_config in words and its served contexts broken down by part.

A short session offers no "Compact now" (a disabled button says why). On a session over its
threshold the member clicks "Compact now"; a real Celery worker (the `start_worker` fixture, on
the test database and broker, calling the scripted LLM server) runs the compaction while the
page, never reloaded, follows it from pending to done with its before/after figures.

Run alone with `pytest -m browser`. Screenshots: var/screenshots/compaction-*.png.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect
from rest_framework.test import APIClient

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType
from memory_app.models import ContextServe
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey
from tests.browser_kit import DESKTOP, PHONE, WIDTHS, browser, check_page, member, open_page
from tests.memory_app.search.test_indexing import run_index

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SYSTEM_PROMPT = "You are a travel planner. Book what the user asks for and keep answers short."
# No automatic trigger: the compaction the test watches is the one "Compact now" queues.
MANUAL_ONLY = {
    "threshold_tokens": 1200,
    "trigger_events": [],
    "active_context": {"summarization": {"grace_recent_messages": 1}},
}


def trip(first: int, count: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for night in range(first, first + count):
        out.append({"role": "user", "content": f"Night {night}: which hotel in Bergen, and how far from the harbour?"})
        out.append(
            {
                "role": "assistant",
                "content": f"Night {night}: the Bryggen inn, a five minute walk from the harbour. "
                + "Breakfast from seven, the room faces the water. " * 6,
            }
        )
    return out


@pytest.fixture
def pages(transactional_db, llm_server) -> dict[str, Any]:
    """Built before Playwright starts its event loop, so the ORM runs in a plain thread."""
    team, _ = member("demo", "ada")
    _, key = tenancy.api_key_create(team=team, name="planner-key", role=ApiKey.Role.WRITE)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")

    short = services.session_create(
        team=team,
        external_id="short-chat",
        system_prompt=SYSTEM_PROMPT,
        memory_type=MemoryType.MANAGED_CONVERSATION,
        memory_config=MANUAL_ONLY,
    )
    services.message_append(session=short, messages=[{"role": "user", "content": "Hello! Plan a week in Norway."}])

    earlier = services.session_create(team=team, external_id="last-years-trip", system_prompt=SYSTEM_PROMPT)
    services.message_append(
        session=earlier,
        messages=[
            {"role": "user", "content": "Which ferry did we take to Flam last year?"},
            {"role": "assistant", "content": "The Flam ferry from Bergen harbour at 8:00, booked through Norled."},
        ],
    )
    run_index(team.pk)

    long = services.session_create(
        team=team,
        external_id="bergen-week",
        system_prompt=SYSTEM_PROMPT,
        memory_type=MemoryType.MANAGED_CONVERSATION,
        memory_config=MANUAL_ONLY,
    )
    services.message_append(session=long, messages=trip(1, 6))
    first, _ = compaction.compaction_request(session=long, trigger=CompactionRun.Trigger.MANUAL)
    assert compaction.compaction_execute(run_id=str(first.pk)) == "done"
    services.message_append(session=long, messages=trip(7, 14))
    for params in ({"recall": "ferry to Flam from Bergen"}, {}):
        response = api.get(f"/api/v1/sessions/{long.pk}/context/", params)
        assert response.status_code == 200, response.content
    serves = [
        {
            "id": serve.pk,
            "parts": [serve.system_tokens, serve.summary_tokens, serve.recall_tokens, serve.window_tokens],
            "priming": serve.priming_tokens,
            "served": serve.served_tokens,
        }
        for serve in ContextServe.objects.filter(session=long).order_by("-created_at", "-pk")
    ]
    long.refresh_from_db()
    assert long.active_tokens > 1200  # over the threshold, nothing queued
    return {"short": str(short.pk), "long": str(long.pk), "serves": serves, "first_run": str(first.pk)}


def session_url(base: str, session_id: str) -> str:
    return f"{base}/sessions/{session_id}/"


def numbers(page: Page, selector: str) -> list[int]:
    return [int(text) for text in page.locator(selector).all_inner_texts()]


def test_compact_now_is_offered_only_when_there_is_something_to_compact(live_server, pages) -> None:
    with browser() as opened:
        for viewport in WIDTHS:
            page = open_page(opened, live_server.url, viewport=viewport)
            page.goto(session_url(live_server.url, pages["short"]))
            panel = page.locator("#compaction-panel")
            button = panel.get_by_role("button", name="Compact now")
            expect(button).to_be_disabled()
            expect(button).to_have_accessible_description(re.compile(r"^Nothing to compact now: every message after"))
            expect(page.locator("#memory-config")).to_contain_text("1,200 tokens of active context")
            check_page(page, "compaction-short-session")
            page.context.close()


def test_the_session_shows_its_memory_config_and_each_served_context_by_part(live_server, pages) -> None:
    serves = pages["serves"]
    with browser() as opened:
        for viewport in WIDTHS:
            page = open_page(opened, live_server.url, viewport=viewport)
            page.goto(session_url(live_server.url, pages["long"]))
            config = page.locator("#memory-config")
            expect(config.locator("dt", has_text="Compaction threshold")).to_be_visible()
            expect(config).to_contain_text("Compaction target")
            expect(config).to_contain_text("720 tokens (the threshold less 40%)")
            expect(config).to_contain_text("tool truncation → summarization → backward packing")

            table = page.locator("#served-contexts table")
            expect(table.locator("tbody tr")).to_have_count(len(serves))
            for row, serve in zip(table.locator("tbody tr").all(), serves, strict=True):
                cells = [
                    int(row.locator(f".ctx-num-{key}").inner_text())
                    for key in ("system", "summary", "recall", "window")
                ]
                total = int(row.locator(".served-total").inner_text())
                assert cells == serve["parts"]
                assert sum(cells) + serve["priming"] == total == serve["served"]
                assert row.locator(".ctx-bar").bounding_box()["width"] > 50
            plain, recalled = serves  # newest first: the read with recall came first
            assert recalled["parts"][2] > 0 and plain["parts"][2] == 0
            assert all(serve["parts"][1] > 0 for serve in serves)  # both start from the summary
            served_tokens = page.locator(".pane-context .served-tokens")
            expect(served_tokens).to_have_attribute("title", re.compile(r"tokens a read sends now: system prompt"))
            check_page(page, "compaction-session")

            page.locator("#served-contexts tbody tr").nth(1).get_by_role("link").click()
            expect(page.get_by_role("heading", name=re.compile("^Served context"))).to_be_visible()
            shown = numbers(page, ".parts-table .part-tokens")
            assert shown == [*recalled["parts"], recalled["priming"]]
            assert int(page.locator(".parts-total").inner_text()) == sum(shown) == recalled["served"]
            check_page(page, "compaction-served-context")
            page.context.close()


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["phone", "desktop"])
def test_compact_now_queues_a_run_and_the_panel_follows_it_to_done_without_a_reload(
    live_server, pages, start_worker, viewport
) -> None:
    start_worker()
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(session_url(live_server.url, pages["long"]))
        panel = page.locator("#compaction-panel")
        expect(panel.locator(".gauge-over")).to_be_visible()
        panel.get_by_role("button", name="Compact now").click()

        status = panel.get_by_role("status")
        expect(status).to_contain_text(
            re.compile(r"Manual compaction queued|A worker is summarising|Latest compaction")
        )
        expect(status).to_be_in_viewport()
        expect(page.locator(".flash [data-flash-topic=compaction]")).to_contain_text("Compaction queued")
        page.evaluate("window.stillTheSamePage = true")

        expect(status).to_contain_text("Latest compaction", timeout=60_000)
        expect(status.locator(".status-pill")).to_have_text("done")
        figures = status.locator(".run-figure").all_inner_texts()
        before, after = (int(n) for n in re.match(r"(\d+) → (\d+) tokens", figures[0]).groups())
        assert after < before
        # Every part of the page that shows the run says the same, still without a reload: the
        # ledger below the panel, and no "queued" banner left over.
        expect(page.locator("#compactions .run").first.locator(".status-pill")).to_have_text("done")
        expect(page.locator(".flash")).to_have_count(0)
        assert page.evaluate("window.stillTheSamePage") is True  # updated in place, never reloaded
        expect(panel.get_by_role("button", name="Compact now")).to_be_disabled()  # nothing left after it
        expect(page.locator(".gauge-over")).to_have_count(0)
        check_page(page, "compaction-compacted")
        page.context.close()
