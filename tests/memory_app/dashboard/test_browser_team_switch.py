"""The team switcher in Debian's chromium: choosing a team reloads the dashboard in it, also when
the choice is made before the page's deferred script has run."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect, sync_playwright

from memory_app.conversations import services
from memory_app.tenancy.models import TeamMembership
from tests.conftest import make_tenant
from tests.memory_app.conversations.test_browser import CHROMIUM, LAUNCH_ARGS, PASSWORD, log_in

pytestmark = pytest.mark.browser


@pytest.fixture
def two_teams(transactional_db) -> dict[str, str]:
    """ada is a member of alpha and gamma, one named session each; their ids by name."""
    ada = get_user_model().objects.create_user("ada", password=PASSWORD)
    ids = {}
    for name in ("alpha", "gamma"):
        team = make_tenant(name).team
        TeamMembership.objects.create(team=team, user=ada)
        services.session_create(team=team, external_id=f"{name}-session")
        ids[name] = str(team.pk)
    return ids


@pytest.mark.parametrize("script", ["loaded", "held until the choice is made"])
def test_choosing_a_team_shows_its_sessions(live_server, two_teams: dict[str, str], script: str) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page()
            log_in(page, live_server.url)
            expect(page.get_by_role("link", name="alpha-session")).to_be_visible()  # teams in name order
            held = []
            if script != "loaded":
                page.route("**/dashboard.js", lambda route: held.append(route))
                page.goto(live_server.url + "/", wait_until="commit")
            page.get_by_label("Current team").select_option(label="gamma")
            if held:
                held[0].continue_()
            expect(page.get_by_role("link", name="gamma-session")).to_be_visible()
            expect(page.get_by_role("link", name="alpha-session")).to_have_count(0)
            expect(page.get_by_label("Current team")).to_have_value(two_teams["gamma"])
        finally:
            browser.close()
