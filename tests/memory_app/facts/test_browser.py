"""End to end in Debian's chromium: search the facts, walk the graph, curate a quarantined extraction.

Run alone with `pytest -m browser`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from memory_app.conversations import services
from memory_app.facts import extraction as fact_extraction
from memory_app.facts import services as facts
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import TeamMembership
from tests.memory_app.conversations.test_browser import CHROMIUM, LAUNCH_ARGS, PASSWORD

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
TRIP = [
    "Hi, I'm Ada. I work at Acme as a data engineer.",
    "Acme is based in Oslo, so I moved there from Paris last spring.",
    "Bob from my team also works at Acme and he loves jazz.",
    "Oslo is in Norway, and the Oslo Jazz Festival is in August.",
]


@pytest.fixture
def knowledge(transactional_db, job_outbox) -> dict[str, str]:
    """A team with facts from a session's messages, a replaced fact and a quarantined run."""
    team = tenancy.team_get_or_create(name="demo")
    member = get_user_model().objects.create_user("bob", password=PASSWORD)
    curator = get_user_model().objects.create_user("ada", password=PASSWORD)
    for user in (member, curator):
        TeamMembership.objects.create(team=team, user=user, is_admin=user is curator)
    session = services.session_create(team=team, external_id="ada-onboarding")
    services.message_append(session=session, messages=[{"role": "user", "content": text} for text in TRIP])
    extracted = FactExtractionRun.objects.create(
        team=team, session=session, trigger="manual", status="failed", from_seq=1, to_seq=3, finished_at=timezone.now()
    )
    facts.fact_add(team=team, role="user", subject="Ada", predicate="lives in", object="Paris", session=session)
    fact_extraction.fact_extraction_accept(
        run=extracted,
        output=json.dumps(
            [
                {"subject": "Ada", "predicate": "works at", "object": "Acme", "confidence": 0.92},
                {"subject": "Acme", "predicate": "is based in", "object": "Oslo", "confidence": 0.88},
                {"subject": "Ada", "predicate": "lives in", "object": "Oslo", "replaces": True},
                {"subject": "Bob", "predicate": "works at", "object": "Acme"},
                {"subject": "Bob", "predicate": "likes", "object": "jazz", "confidence": 0.7},
            ]
        ),
    )
    facts.fact_add(team=team, role="assistant", subject="Ada", predicate="role", object="data engineer")
    FactExtractionRun.objects.create(
        team=team,
        session=session,
        trigger="manual",
        status="quarantined",
        from_seq=4,
        to_seq=4,
        attempts=1,
        backend="openai",
        model="scripted-model",
        raw_output='Here are the facts:\n[{"subject": "Oslo", "predicate": "is in", "object": "Norway"},\n'
        ' {"subject": "Oslo Jazz Festival", "predicate": "is in',
        error="the output is not valid JSON: unterminated string at line 2",
        finished_at=timezone.now(),
    )
    return {"session_id": str(session.pk)}


def log_in(page, base_url: str, username: str) -> None:
    page.goto(base_url + "/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()


def test_a_member_searches_facts_and_walks_the_graph(live_server, knowledge: dict[str, str]) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get update && apt-get install -y chromium")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 950})
            log_in(page, live_server.url, "bob")
            page.get_by_role("navigation", name="Main").get_by_role("link", name="Facts").click()
            expect(page.get_by_role("heading", name="Facts")).to_be_visible()
            table = page.locator("table.facts-table tbody")
            expect(table.locator("tr.fact-row")).to_have_count(6)
            expect(page.get_by_role("button", name="Invalidate")).to_have_count(0)  # not curator

            page.get_by_label("Search").fill("acme")
            page.get_by_role("button", name="Search").click()
            expect(table.locator("tr.fact-row")).to_have_count(3)
            expect(table).not_to_contain_text("jazz")

            page.get_by_label("Search").fill("")
            page.get_by_label("Include invalidated").check()
            page.get_by_role("button", name="Search").click()
            expect(table.locator("tr.fact-row")).to_have_count(7)
            paris = table.locator("tr.fact-row.invalidated")
            expect(paris).to_contain_text("Paris")
            expect(paris.get_by_role("link", name="replaced by →")).to_be_visible()
            acme = table.locator("tr.fact-row", has_text="is based in")
            expect(acme.locator(".source-link")).to_have_text("message #2")
            page.screenshot(path=str(SCREENSHOTS / "facts_page.png"), full_page=True)

            acme.locator(".source-link").click()
            expect(page).to_have_url(f"{live_server.url}/sessions/{knowledge['session_id']}/?after=1#m2")
            expect(page.locator("#m2")).to_contain_text("Acme is based in Oslo")
            page.go_back()

            page.get_by_role("link", name="Graph", exact=True).click()
            expect(page.locator("#graph-centre")).to_have_text("Ada")  # the newest fact's subject
            graph = page.locator("#fact-graph")
            expect(graph.locator("g.node")).to_have_count(4)  # Ada and, 1 hop away, Acme, Oslo, data engineer
            page.get_by_label("Depth").select_option("2")
            expect(graph.locator("g.node")).to_have_count(5)  # + Bob, who works at Acme (jazz is 3 hops away)
            expect(graph.locator("g.node.centre")).to_have_attribute("data-id", "ada")

            graph.locator('g.node[data-id="acme"]').click()
            expect(page.locator("#graph-centre")).to_have_text("Acme")
            expect(graph.locator("g.node.centre")).to_have_attribute("data-id", "acme")
            expect(page).to_have_url(f"{live_server.url}/facts/graph/?entity=Acme&depth=2")
            expect(page.locator("#graph-edge-rows")).to_contain_text("likes")
            expect(page.locator("#graph-edge-rows tr", has_text="is based in")).to_have_count(1)
            page.screenshot(path=str(SCREENSHOTS / "facts_graph.png"), full_page=True)

            page.go_back()
            expect(page.locator("#graph-centre")).to_have_text("Ada")
        finally:
            browser.close()
    assert (SCREENSHOTS / "facts_graph.png").stat().st_size > 10_000


def test_staff_accept_an_edited_quarantined_output_and_the_facts_appear(live_server, knowledge: dict[str, str]) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get update && apt-get install -y chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 950})
            log_in(page, live_server.url, "ada")
            page.goto(live_server.url + "/facts/")
            page.get_by_role("link", name="Quarantine").click()
            card = page.locator("article.run-card")
            expect(card).to_have_count(1)
            expect(card.locator(".run-error")).to_contain_text("unterminated string")
            expect(card.locator(".input-range")).to_have_text("messages #4\N{EN DASH}#4")
            page.screenshot(path=str(SCREENSHOTS / "facts_quarantine.png"), full_page=True)

            output = card.get_by_label("Corrected output")
            output.fill('[{"subject": "Oslo", "predicate": "is in"}]')
            card.get_by_role("button", name="Accept edited output").click()
            expect(page.locator(".accept-error")).to_contain_text("Not accepted")
            expect(page.get_by_label("Corrected output")).to_have_value('[{"subject": "Oslo", "predicate": "is in"}]')

            page.get_by_label("Corrected output").fill(
                json.dumps(
                    [
                        {"subject": "Oslo", "predicate": "is in", "object": "Norway"},
                        {"subject": "Oslo Jazz Festival", "predicate": "is in", "object": "August"},
                    ]
                )
            )
            page.get_by_role("button", name="Accept edited output").click()
            expect(page.locator(".flash")).to_contain_text("Accepted: 2 facts added, 0 seen again.")
            expect(page.locator(".run-card .status-pill")).to_have_text("done")
            expect(page.locator(".run-facts tbody tr")).to_have_count(2)

            page.get_by_role("navigation", name="Main").get_by_role("link", name="Facts").click()
            norway = page.locator("tr.fact-row", has_text="Norway")
            expect(norway).to_have_count(1)
            expect(norway.locator(".source-link")).to_have_text("message #4")
            expect(norway.locator("code.extractor")).to_have_text("manual")
            expect(page.locator(".subnav .count-badge")).to_have_count(0)  # nothing left in quarantine

            page.once("dialog", lambda dialog: dialog.accept())
            norway.get_by_role("button", name="Invalidate").click()
            expect(page.locator(".flash")).to_contain_text("Invalidated")
            expect(page.locator("tr.fact-row", has_text="Norway")).to_have_count(0)
        finally:
            browser.close()
    assert Fact.objects.filter(object="Norway", invalidated_at__isnull=False).count() == 1
