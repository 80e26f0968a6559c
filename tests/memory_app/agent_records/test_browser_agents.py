"""End to end in Debian's chromium, at phone and desktop width: from the nav's Agents link to the
list of every agent name, then to one agent's page with its sessions, messages, work records,
experience selections, facts and tokens; and from a session's work record back to the agent.

Run alone with `pytest -m browser`. Screenshots: var/screenshots/agents-{390,1280}.png and
agent-{390,1280}.png.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory_app.conversations import services
from tests.browser_kit import DESKTOP, PHONE, WIDTHS, browser, check_page, member, open_page
from tests.memory_app.agent_records.agents_data import (
    DEVELOPER_REPLY,
    PICKED,
    SELECTION_QUERY,
    SERVED_TOKENS,
    build_agents_world,
)

pytestmark = pytest.mark.browser


@pytest.fixture
def world(transactional_db) -> dict[str, str]:
    """Built before Playwright starts its event loop, so the ORM runs in a plain thread."""
    team, _ = member()
    built = build_agents_world(team)
    return {"rounds_session": str(built.rounds_session.pk)}


@pytest.mark.parametrize("viewport", WIDTHS, ids=lambda v: f"{v['width']}px")
def test_a_member_goes_from_the_agents_list_to_everything_one_agent_did(live_server, world, viewport) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=viewport)
        menu = page.get_by_role("button", name="Menu")
        if menu.is_visible():  # at phone width the main nav folds behind its toggle
            menu.click()
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Agents").click()
        expect(page.get_by_role("heading", name="Agents in demo")).to_be_visible()
        table = page.get_by_role("table", name="Agents of demo")
        expect(table.get_by_role("rowheader")).to_have_count(6)
        developer = table.get_by_role("row").filter(has=page.get_by_role("link", name="developer", exact=True))
        # sessions, messages (hover says what each counts)
        expect(developer.get_by_title("2 sessions with this agent")).to_have_text("2")
        expect(developer.get_by_title("2 messages sent by this agent")).to_have_text("2")
        check_page(page, "agents")

        # the filter runs on the server
        page.get_by_label("Name contains").fill("dev")
        page.get_by_role("button", name="Apply").click()
        expect(page).to_have_url(f"{live_server.url}/agents/?q=dev&order=recent")
        expect(table.get_by_role("rowheader")).to_have_count(1)

        page.get_by_role("link", name="developer", exact=True).click()
        expect(page).to_have_url(f"{live_server.url}/agents/developer/")
        expect(page.get_by_role("heading", name="developer across 2 sessions")).to_be_visible()
        sessions = page.locator("#sessions")
        expect(sessions.get_by_role("link", name="auth-refactor")).to_be_visible()
        expect(sessions.get_by_role("link", name="sales-analysis")).to_be_visible()
        expect(page.locator("#messages")).to_contain_text(DEVELOPER_REPLY)
        expect(page.locator("#records")).to_contain_text("attempt-003")
        expect(page.locator("#selections")).to_contain_text(SELECTION_QUERY)
        expect(page.locator("#selections").get_by_role("link", name=PICKED)).to_be_visible()
        expect(page.locator("#facts")).to_contain_text("login hashes with bcrypt")
        expect(page.locator("#tokens").get_by_title("Tokens the 1 contexts served for developer held")).to_have_text(
            f"{SERVED_TOKENS} tokens"
        )
        check_page(page, "agent")

        # a message opens in its session, where it is
        page.locator("#messages").get_by_title("Open message", exact=False).first.click()
        expect(page.get_by_text(DEVELOPER_REPLY).first).to_be_visible()


def test_a_sessions_work_record_leads_to_the_agent_across_sessions(live_server, world) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=DESKTOP)
        page.goto(f"{live_server.url}/sessions/{world['rounds_session']}/agents/developer/")
        page.get_by_role("link", name="Everything developer did, across sessions").click()
        expect(page).to_have_url(f"{live_server.url}/agents/developer/")
        expect(page.get_by_role("heading", name="developer across 2 sessions")).to_be_visible()


def test_the_agent_page_fits_a_phone_with_a_long_agent_name(live_server, transactional_db) -> None:
    team, _ = member()
    session = services.session_create(team=team, external_id="a-very-long-external-session-identifier-" * 3)
    long_name = "agent-with-an-extraordinarily-long-name-that-never-breaks-by-itself-" * 2
    services.message_append(session=session, messages=[{"role": "assistant", "name": long_name, "content": "x" * 400}])
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=PHONE)
        page.goto(f"{live_server.url}/agents/")
        check_page(page, "agents-long-name")
        page.get_by_role("link", name=long_name).click()
        expect(page.locator("#messages")).to_contain_text("x" * 50)
        check_page(page, "agent-long-name")


def test_the_agent_pages_follow_a_dark_system_setting(live_server, world) -> None:
    with browser() as opened:
        page = open_page(opened, live_server.url, viewport=DESKTOP, color_scheme="dark")
        page.goto(f"{live_server.url}/agents/")
        check_page(page, "agents-dark")
        page.goto(f"{live_server.url}/agents/developer/")
        check_page(page, "agent-dark")
