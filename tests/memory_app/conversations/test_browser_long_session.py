"""End to end in Debian's chromium, at phone and desktop width: a 240-message coding session
read a page at a time, searched by tool, role and text, its long console output folded and
opened, its markdown rendered, its call arguments as indented JSON and its images enlarged from
the keyboard; the sessions list's agents, tokens and failed-compaction badge; a kg session's facts.

Run alone with `pytest -m browser`. Screenshots: var/screenshots/sessions-*.png, session-long-*.png,
session-search-*.png, session-kg-*.png.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.browser_kit import WIDTHS, browser, check_page, member, open_page
from tests.memory_app.conversations.long_session_data import (
    LONG_OUTPUT_LINES,
    coding_session,
    failed_compaction,
    kg_session,
)

pytestmark = pytest.mark.browser

# A 240-message session once made a 26,000 px page; one page of it now stays a few screens tall.
MAX_PAGE_HEIGHT = {390: 16_000, 1280: 9_000}


@pytest.fixture
def world(transactional_db) -> dict[str, str]:
    """Built before Playwright starts its event loop, so the ORM runs in a plain thread."""
    team, _ = member()
    long_session = coding_session(team)
    failed_compaction(long_session)
    kg = kg_session(team)
    return {"long": f"/sessions/{long_session.pk}/", "kg": f"/sessions/{kg.pk}/"}


def page_height(page: Page) -> int:
    return page.evaluate("() => document.documentElement.scrollHeight")


def viewport_id(viewport: dict) -> str:
    return f"{viewport['width']}px"


@pytest.mark.parametrize("viewport", WIDTHS, ids=viewport_id)
def test_the_sessions_list_shows_agents_tokens_and_a_failed_compaction(live_server, world, viewport) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(live_server.url + "/")
        row = page.get_by_role("row").filter(has=page.get_by_role("link", name="refactor-240"))
        expect(row.get_by_text("compaction failed")).to_be_visible()
        expect(row.get_by_role("link", name="coder")).to_be_visible()
        expect(row.get_by_role("link", name="lead")).to_be_visible()
        expect(row.get_by_title("240 stored messages")).to_have_text("240")
        expect(row.locator("[title*='tokens of raw history']")).to_be_visible()
        check_page(page, "sessions")

        page.get_by_label("Latest compaction failed").check()
        page.get_by_role("button", name="Search").click()
        expect(page).to_have_url(re.compile(r"compaction_failed=on"))
        expect(page.get_by_role("link", name="refactor-240")).to_be_visible()
        expect(page.get_by_role("link", name="kg-notes")).to_have_count(0)


@pytest.mark.parametrize("viewport", WIDTHS, ids=viewport_id)
def test_a_long_session_reads_a_page_at_a_time_with_folded_output(live_server, world, viewport) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(live_server.url + world["long"])
        expect(page.get_by_text("messages #1\N{EN DASH}#25 of 240").first).to_be_visible()
        assert page_height(page) < MAX_PAGE_HEIGHT[viewport["width"]], page_height(page)
        check_page(page, "session-long")

        # Console output: monospace, whitespace kept, scrolled inside its own box.
        console = page.locator("#m3 pre.console")
        style = console.evaluate(
            "el => { const s = getComputedStyle(el); return [s.fontFamily, s.whiteSpace, s.overflowX]; }"
        )
        assert "monospace" in style[0] and style[1:] == ["pre", "auto"], style

        # 82 lines of test output: a preview until opened, then all of it, then folded again.
        fold = page.locator("#m7 .fold")
        full = fold.locator("details pre.console")
        expect(fold.locator(".fold-preview").first).to_be_visible()
        expect(full).to_be_hidden()
        # Folded, its end shows too: the verdict a test run prints last.
        expect(fold.locator(".fold-tail")).to_contain_text(f"==== {LONG_OUTPUT_LINES} passed ====")
        expect(fold.locator(".fold-gap")).to_have_text(f"… {LONG_OUTPUT_LINES + 2 - 8 - 6} lines hidden …")
        fold.get_by_text(f"Show all {LONG_OUTPUT_LINES + 2} lines").click()
        expect(full).to_be_visible()
        expect(full).to_contain_text(f"==== {LONG_OUTPUT_LINES} passed ====")
        expect(fold.locator(".fold-preview")).to_have_count(2)
        expect(fold.locator(".fold-preview").first).to_be_hidden()
        expect(fold.locator(".fold-tail")).to_be_hidden()
        fold.get_by_text("Collapse").click()
        expect(full).to_be_hidden()

        # Markdown rendered, not shown raw.
        answer = page.locator("#m4")
        expect(answer.locator("strong", has_text="passed")).to_be_visible()
        expect(answer.locator("li", has_text="keep the public API")).to_be_visible()
        expect(answer.get_by_role("link", name="the docs")).to_have_attribute("href", "https://docs.python.org/3/")
        expect(answer).not_to_contain_text("**passed**")

        # Call arguments as indented JSON.
        arguments = page.locator("#m2 .tool-call pre.json").first
        expect(arguments).to_have_text(
            re.compile(r'^\{\n  "path": "src/module_0.py",\n  "options": \{\n    "verbose": true')
        )

        # The image opens enlarged from the keyboard and closes with Escape, focus back on it.
        thumbnail = page.locator("#m1").get_by_role("button", name="Enlarge the image")
        thumbnail.focus()
        page.keyboard.press("Enter")
        dialog = page.locator("dialog#image-zoom")
        expect(dialog).to_be_visible()
        enlarged = dialog.locator("img")
        expect(enlarged).to_be_visible()
        assert enlarged.evaluate("img => img.complete && img.naturalWidth") == 64
        page.keyboard.press("Escape")
        expect(dialog).to_be_hidden()
        expect(thumbnail).to_be_focused()

        # Go to a message by its number: the page that starts with it, scrolled to it.
        jump = page.get_by_role("search", name="Go to a message").first
        jump.get_by_label("Go to").fill("#137")
        jump.get_by_role("button", name="Go").click()
        expect(page).to_have_url(re.compile(r"\?after=136#m137$"))
        expect(page.locator("#m137")).to_be_in_viewport()


@pytest.mark.parametrize("viewport", WIDTHS, ids=viewport_id)
def test_a_member_searches_a_long_session_by_tool_role_and_text(live_server, world, viewport) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(live_server.url + world["long"])
        search = page.get_by_role("search", name="Search this session's messages")

        search.get_by_label("Tool").select_option("run_tests")
        search.get_by_role("button", name="Search").click()
        expect(page).to_have_url(re.compile(r"tool=run_tests"))
        expect(search.get_by_role("status")).to_contain_text("40 messages match")
        # A page holds 25 of the 40 matches: 13 calls, each with its result nested under it.
        expect(page.locator("ol.timeline > li")).to_have_count(13)
        expect(page.locator("ol.timeline code.fn", has_text="run_tests")).to_have_count(13)
        expect(page.locator("ol.timeline .tool-result")).to_have_count(13)
        expect(page.locator("ol.timeline code.fn", has_text="read_file")).to_have_count(0)
        expect(page.get_by_text("25 of 40 matches").first).to_be_visible()
        check_page(page, "session-search")

        page.get_by_role("link", name="Clear").click()
        search.get_by_label("Role").select_option("user")
        search.get_by_label("Text").fill("step 42")
        search.get_by_role("button", name="Search").click()
        expect(search.get_by_role("status")).to_contain_text("1 message matches")
        expect(page.locator("ol.timeline > li")).to_have_count(1)
        expect(page.locator("ol.timeline > li#m169")).to_contain_text("Please do step 42")


@pytest.mark.parametrize("viewport", WIDTHS, ids=viewport_id)
def test_a_kg_session_shows_its_facts_and_extraction_runs(live_server, world, viewport) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        page.goto(live_server.url + world["kg"])
        facts = page.get_by_role("region", name="Facts from this session")
        expect(facts.get_by_role("link", name="Ada").first).to_be_visible()
        expect(facts.get_by_text("Analytical Engines Ltd").first).to_be_visible()
        expect(facts.get_by_text("LLM timed out")).to_be_visible()
        check_page(page, "session-kg")

        facts.get_by_role("link", name="All facts of this session").click()
        expect(page).to_have_url(re.compile(r"/facts/\?session="))
        expect(page.get_by_text("Charles").first).to_be_visible()
