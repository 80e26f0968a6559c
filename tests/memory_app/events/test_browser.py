"""The event feed in Debian's chromium at phone and desktop width: it fits, passes axe, filters by
type and by session on the server, and links each event to its session and run."""

from __future__ import annotations

import pytest
from playwright.sync_api import ViewportSize, expect

from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from tests.browser_kit import WIDTHS, browser, check_page, member, nav_link, open_page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

Kind = MemoryEvent.Kind


def build_feed() -> dict[str, str]:
    """Two sessions of team demo with a day's worth of events, and one event of another team."""
    team, _ = member("demo", "ada", admin=False)
    coding = services.session_create(team=team, external_id="coding-session-with-a-rather-long-external-identifier-240")
    kg = services.session_create(team=team, external_id="kg-notes")
    run = CompactionRun.objects.create(team=team, session=coding, trigger="auto", status="done", covered_to_seq=1)
    event_record(team_id=team.pk, session=coding, kind=Kind.IMPORTED, data={"messages": 240})
    for index in range(5):
        event_record(
            team_id=team.pk,
            session=coding,
            kind=Kind.COMPACTION_COMPLETED,
            data={"run_id": str(run.pk), "trigger": "auto", "tokens_before": 91000 + index, "tokens_after": 12000},
        )
    event_record(team_id=team.pk, session=kg, kind=Kind.FACTS_EXTRACTED, data={"facts": 12})
    event_record(team_id=team.pk, kind=Kind.EXPERIENCE_APPROVED, data={"exp_id": "file-checks", "revision": 2})
    other, _ = member("other-team", "lin", admin=True)
    event_record(team_id=other.pk, kind=Kind.RESET, data={"secret": "theirs"})
    return {"coding": str(coding.pk), "run": str(run.pk)}


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: str(v["width"]))
def test_the_event_feed_fits_and_filters_by_type_and_session(live_server, viewport: ViewportSize) -> None:
    ids = build_feed()
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        nav_link(page, "Events").click()
        expect(page.get_by_role("heading", name="Events in demo")).to_be_visible()
        expect(page.locator(".event-row")).to_have_count(8)
        expect(page.get_by_text("theirs")).to_have_count(0)
        check_page(page, "events")

        page.get_by_label("Event type").select_option("compaction_completed")
        page.get_by_role("button", name="Filter").click()
        expect(page.locator(".event-row")).to_have_count(5)
        first = page.locator(".event-row").first
        expect(first.get_by_role("link", name="Compaction run")).to_have_attribute(
            "href", f"/sessions/{ids['coding']}/#run-{ids['run']}"
        )
        first.locator("summary").click()
        expect(first.locator("pre")).to_contain_text('"tokens_before": 91004')

        page.get_by_label("Event type").select_option("")
        page.get_by_role("button", name="Filter").click()
        page.locator(".event-row").filter(has_text="imported").get_by_role("link", name="only this session").click()
        expect(page.locator(".event-row")).to_have_count(6)
        expect(page.get_by_label("Session")).to_have_value(ids["coding"])

        page.get_by_label("Session").fill("no-such-session")
        page.get_by_role("button", name="Filter").click()
        expect(page.locator("#id_session_error")).to_contain_text("No session of this team")
        expect(page.locator(".event-row")).to_have_count(0)
        check_page(page, "events-filtered")
