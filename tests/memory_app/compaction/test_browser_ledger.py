"""End to end in Debian's chromium: a member reads a compacted session (the token gauge, the
ledger's before/after diff, the raw timeline beside the active context) and reverts the compaction.

Run alone with `pytest -m browser`; skip with `-m "not browser"` on a machine without chromium.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.browser_kit import browser
from tests.memory_app.compaction.compacted_world import build_compacted_world
from tests.memory_app.conversations.test_browser import log_in

pytestmark = pytest.mark.browser

COMPACTION_SCREENSHOT = Path(settings.BASE_DIR) / "var" / "screenshots" / "session_compaction.png"


@pytest.fixture
def compacted(transactional_db, job_outbox) -> dict[str, str]:
    """Created before Playwright starts its event loop, so the ORM runs in a plain thread."""
    return build_compacted_world()


def test_a_member_reads_a_compacted_session_and_reverts_it(live_server, compacted: dict[str, str]) -> None:
    COMPACTION_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    with browser() as opened:
        page = opened.new_page(viewport={"width": 1440, "height": 1000})
        log_in(page, live_server.url)
        page.get_by_role("link", name="norway-trip").click()
        expect(page.get_by_role("heading", name="norway-trip")).to_be_visible()

        gauge = page.locator(".gauge")
        expect(gauge.locator(".gauge-threshold")).to_have_text("1,200")
        assert gauge.locator(".gauge-fill").bounding_box()["width"] > 0

        ledger = page.locator("#compactions")
        run = ledger.locator(f"#run-{compacted['run_id']}")
        expect(run.locator(".status-pill")).to_have_text("done")
        diff = run.locator(".run-diff")
        expect(diff).to_have_attribute("open", "")  # the latest done run's diff starts open
        expect(diff.locator(".diff-before")).to_contain_text("Find a hotel in Oslo near the opera house")
        expect(diff.locator(".diff-after")).to_contain_text("[Compacted Context Summary]")

        raw, context = page.locator(".pane-raw"), page.locator(".pane-context")
        expect(raw.locator("ol.timeline > li")).to_have_count(10)
        expect(raw.locator("#m2 .pill.summarised")).to_be_visible()
        expect(context.locator(".cmsg.kind-summary").first).to_be_visible()
        expect(context.locator(".cmsg.kind-instruction")).to_contain_text("Plan a week in Norway")
        expect(context).to_contain_text("What should we pack for Bergen in March?")
        hotel = context.locator(".cmsg.kind-message", has_text="Find a hotel in Oslo near the opera house")
        expect(hotel).to_have_count(0)  # summarised: only the summary speaks for it
        raw_box, context_box = raw.bounding_box(), context.bounding_box()
        assert context_box["x"] > raw_box["x"] + raw_box["width"] - 1  # side by side

        page.screenshot(path=str(COMPACTION_SCREENSHOT), full_page=True)

        page.once("dialog", lambda dialog: dialog.accept())
        run.get_by_role("button", name="Revert").click()
        expect(page.locator(".flash")).to_contain_text("Compaction reverted")
        expect(run.locator(".status-pill")).to_have_text("reverted")
        expect(context.locator(".cmsg.kind-summary")).to_have_count(0)
        expect(hotel).to_have_count(1)
        expect(page.get_by_role("button", name="Revert")).to_have_count(0)
    assert COMPACTION_SCREENSHOT.stat().st_size > 10_000
