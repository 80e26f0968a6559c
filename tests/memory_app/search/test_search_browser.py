"""End to end in Debian's chromium: search the team's memory, read the highlighted hits, open a
score breakdown, follow a hit to its message; at a desktop and a phone width (screenshots in the
var dir's screenshots/, to look at).

Run alone with `pytest -m browser`.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import Page, expect, sync_playwright

from memory_app.agent_records import services as agent_records
from memory_app.conversations import services
from memory_app.facts import services as facts
from memory_app.search.models import SearchItem
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import TeamMembership
from memory_app.usage.models import ContextServe
from tests.memory_app.conversations.test_browser import CHROMIUM, LAUNCH_ARGS, PASSWORD
from tests.memory_app.search.test_search_page import run_index

pytestmark = pytest.mark.browser

SCREENSHOTS = settings.VAR_DIR / "screenshots"
TRIP = [
    ("user", "Plan a week in Norway in March: Oslo first, then Bergen by train."),
    ("assistant", "Oslo for three nights, then the Bergen line across the Hardangervidda plateau."),
    ("user", "What's the weather in Oslo tomorrow? <script>window.pwned = true</script>"),
    ("assistant", "Tomorrow in Oslo: light snow, between -6 and -1 °C. Pack a warm coat and boots for the weather."),
    ("user", "Book the hotel near the opera house, under 180 EUR a night."),
]


@pytest.fixture
def memories(transactional_db, job_outbox) -> dict[str, str]:
    """A team's chat, facts (one replaced), an agent's discovery, and a served context with recall,
    all indexed; another team's chat about the same things. Built before Playwright's event loop starts."""
    team = tenancy.team_get_or_create(name="demo")
    other = tenancy.team_get_or_create(name="elsewhere")
    user = get_user_model().objects.create_user("ada", password=PASSWORD)
    TeamMembership.objects.create(team=team, user=user, is_admin=True)
    session = services.session_create(team=team, external_id="trip-planner-42")
    services.message_append(session=session, messages=[{"role": role, "content": text} for role, text in TRIP])
    facts.fact_add(team=team, role="user", subject="Ada", predicate="travels to", object="Bergen", session=session)
    facts.fact_add(team=team, role="user", subject="Ada", predicate="lives in", object="Paris", session=session)
    replaced, _ = facts.fact_add(team=team, role="user", subject="Oslo weather", predicate="is", object="mild")
    facts.fact_invalidate(fact=replaced)
    facts.fact_add(team=team, role="user", subject="Oslo weather", predicate="is", object="snowy in March")
    agent_records.agent_memory_entry_append(
        session=session,
        agent="planner",
        kind="discovery",
        entry={"type": "code_pattern", "content": "The weather API for Oslo needs the city id, not the name."},
    )
    theirs = services.session_create(team=other, external_id="their-trip")
    services.message_append(
        session=theirs, messages=[{"role": "user", "content": "Secret: the weather in Oslo is their business"}]
    )
    run_index(team.pk)
    run_index(other.pk)
    # The chat's items written over the past days, so the recency factor has something to show.
    for days, item in enumerate(SearchItem.objects.filter(team=team).order_by("-pk")):
        SearchItem.objects.filter(pk=item.pk).update(occurred_at=timezone.now() - timedelta(days=days * 3))
    item = SearchItem.objects.filter(team=team, kind="message", seq=4).get()
    ContextServe.objects.create(
        team=team,
        session=session,
        agent="planner",
        raw_tokens=400,
        served_tokens=180,
        recall_query="oslo weather tomorrow",
        recalled=[
            {
                "kind": "message",
                "id": item.source_key,
                "item_id": item.pk,
                "session": str(session.pk),
                "seq": 4,
                "score": 0.031,
            }
        ],
    )
    return {"session_id": str(session.pk)}


def log_in(page: Page, base_url: str, path: str) -> None:
    page.goto(base_url + path)
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


# What sticks out past the right edge of the window (tag.class and its right edge), for the failure message.
OVERFLOWING = """() => [...document.querySelectorAll("body *")]
  .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
  .slice(0, 8)
  .map((el) => `${el.tagName.toLowerCase()}.${el.className} ${Math.round(el.getBoundingClientRect().right)}`)"""


def fits_the_width(page: Page) -> bool:
    return page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


def test_a_member_searches_reads_highlights_and_opens_the_score_breakdown(live_server, memories) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get update && apt-get install -y chromium")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            log_in(page, live_server.url, "/search/")
            expect(page.get_by_role("heading", name="Search")).to_be_visible()
            expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Search")).to_have_attribute(
                "aria-current", "page"
            )

            page.get_by_label("Query").fill("weather in Oslo")
            page.get_by_role("button", name="Search").click()
            hits = page.locator("ol.search-hits > li.hit")
            expect(hits.first).to_be_visible()
            expect(page.locator("ol.search-hits")).not_to_contain_text("Secret")  # another team's
            expect(page.locator("ol.search-hits")).not_to_contain_text("mild")  # invalidated: not asked for
            first = hits.first
            expect(first.locator(".snippet mark").first).to_be_visible()
            marked = {text.lower() for text in page.locator(".snippet mark").all_inner_texts()}
            assert {"oslo", "weather"} <= marked
            expect(page.locator(".hit", has_text="window.pwned")).to_have_count(1)  # shown as text
            assert page.evaluate("() => window.pwned === undefined")

            explain = first.locator("dl.explain")
            expect(explain).to_be_hidden()
            first.locator(".score-details summary").click()
            expect(explain).to_be_visible()
            expect(explain).to_contain_text("Words rank")
            expect(explain).to_contain_text("Fused score")
            assert fits_the_width(page)
            page.screenshot(path=str(SCREENSHOTS / "search_1280.png"), full_page=True)

            page.get_by_text("Filters").click()
            page.get_by_label("Include invalidated").check()
            page.locator("label.facet", has_text="Facts").click()
            page.get_by_role("button", name="Search").click()
            expect(page.locator(".hit.kind-fact.invalidated")).to_contain_text("mild")
            expect(page.locator(".hit.invalidated .invalidated-pill")).to_be_visible()
            expect(page.locator(".kind-badge")).to_have_text(["fact"] * page.locator(".kind-badge").count())
            page.screenshot(path=str(SCREENSHOTS / "search_facts_1280.png"), full_page=True)

            page.get_by_label("From").fill("2024-05-02T10:00:00")
            page.get_by_label("To", exact=False).last.fill("2024-05-01T10:00:00")
            page.get_by_role("button", name="Search").click()
            expect(page.locator(".search-filters .field", has=page.get_by_label("To UTC"))).to_contain_text(
                "must not be before from"
            )
            expect(page.locator("ol.search-hits")).to_have_count(0)

            page.set_viewport_size({"width": 390, "height": 844})
            page.goto(live_server.url + "/search/?q=weather+in+Oslo&explain=1")
            expect(page.locator(".hit").first).to_be_visible()
            page.screenshot(path=str(SCREENSHOTS / "search_390.png"), full_page=True)
            page.screenshot(path=str(SCREENSHOTS / "search_390_top.png"))
            assert fits_the_width(page), page.evaluate(OVERFLOWING)
            page.get_by_text("Filters").click()
            assert fits_the_width(page)
            page.screenshot(path=str(SCREENSHOTS / "search_390_filters.png"))

            page.set_viewport_size({"width": 1280, "height": 900})
            message = page.locator(".hit.kind-message", has_text="light snow")
            message.locator("a.source-link").click()
            expect(page).to_have_url(f"{live_server.url}/sessions/{memories['session_id']}/?after=3#m4")
            expect(page.locator("#m4")).to_contain_text("light snow")
            recalls = page.locator("#recalls")
            expect(recalls).to_contain_text("oslo weather tomorrow")
            expect(recalls.locator("a.source-link")).to_have_text("message #4")
            recalls.screenshot(path=str(SCREENSHOTS / "session_recalls_1280.png"))

            page.goto(live_server.url + "/ops/")
            index = page.locator("#search-index")
            expect(index).to_contain_text("Search index")
            page.once("dialog", lambda dialog: dialog.accept())
            index.get_by_role("button", name="Reindex demo").click()
            expect(page.locator(".flash")).to_contain_text("Search index of demo: rebuilding (")
            page.screenshot(path=str(SCREENSHOTS / "ops_search_1280.png"), full_page=True)
        finally:
            browser.close()
    assert (SCREENSHOTS / "search_1280.png").stat().st_size > 10_000
    assert (SCREENSHOTS / "search_390.png").stat().st_size > 10_000


@pytest.fixture
def drowned_experience(transactional_db, job_outbox) -> None:
    """Thirty messages about a flaky test, and one curated experience about flaky tests."""
    from experiences_app import services as experiences
    from tests.browser_kit import member

    team, _ = member("demo", "ada", admin=True)
    session = services.session_create(team=team, external_id="ci-chat")
    services.message_append(
        session=session,
        messages=[
            {"role": "user", "content": f"the flaky test failed again on run {n}, retrying the flaky test"}
            for n in range(30)
        ],
    )
    experiences.experience_create(
        team=team,
        exp_id="flaky-tests",
        who=[],
        when="a test fails only sometimes (a flaky test)",
        what="quarantine it and open an issue with the seed",
        actor="ada",
        status="approved",
    )
    run_index(team.pk)


@pytest.mark.parametrize("width", [390, 1280])
def test_a_curated_experience_shows_beside_messages_that_fill_the_results(
    live_server, drowned_experience: None, width: int
) -> None:
    from tests.browser_kit import browser, check_page, open_page

    with browser() as opened:
        page = open_page(opened, live_server.url, viewport={"width": width, "height": 900})
        page.goto(live_server.url + "/search/?q=flaky+test")
        other = page.get_by_role("region", name="Best of other kinds")
        expect(other.get_by_role("link", name="experience flaky-tests")).to_be_visible()
        expect(page.locator("ol.search-hits:not(.other-kind-hits) > li.hit")).to_have_count(20)
        check_page(page, "search-other-kinds")
