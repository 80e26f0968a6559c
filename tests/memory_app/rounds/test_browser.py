"""End to end in Debian's chromium: a multi-agent session's rounds and an agent's work record.

Log in, open the session, follow its link to the rounds (cards with posts drawn as arrows between
roles and attachments badged by type, the failed round marked, shared memory beside them), then
click an agent and read its discoveries, attempts and decisions on one timeline, with the failed
attempt highlighted and the archived entries behind the archive toggle.

Run alone with `pytest -m browser`. Screenshots land in var/screenshots/rounds_page.png and
var/screenshots/agent_memory_page.png.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import Page, expect, sync_playwright

from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import TeamMembership
from tests.memory_app.conversations.test_browser import CHROMIUM, LAUNCH_ARGS, PASSWORD, log_in
from tests.memory_app.rounds.multi_agent_data import BLOCKER, FAILED_ATTEMPT, OLD_DISCOVERY, build_multi_agent_session

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
ROUNDS_SCREENSHOT = SCREENSHOTS / "rounds_page.png"
AGENT_SCREENSHOT = SCREENSHOTS / "agent_memory_page.png"


@pytest.fixture
def multi_agent(transactional_db) -> dict[str, str]:
    """Built before Playwright starts its event loop, so the ORM runs in a plain thread."""
    team = tenancy.team_get_or_create(name="demo")
    user = get_user_model().objects.create_user("ada", password=PASSWORD)
    TeamMembership.objects.create(team=team, user=user)
    session = build_multi_agent_session(team)
    return {"session_id": str(session.pk)}


def css(page: Page, selector: str, prop: str) -> str:
    return page.locator(selector).first.evaluate(f"e => getComputedStyle(e).getPropertyValue('{prop}')")


def test_a_member_reads_the_rounds_and_an_agents_memory(live_server, multi_agent: dict[str, str]) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get update && apt-get install -y chromium")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    session_id = multi_agent["session_id"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 950})
            log_in(page, live_server.url)
            page.get_by_role("link", name="sales-analysis").click()
            expect(page.get_by_role("heading", name="sales-analysis")).to_be_visible()
            page.get_by_role("link", name="Rounds & agent memory").click()

            # --- the round view ---
            expect(page).to_have_url(f"{live_server.url}/sessions/{session_id}/rounds/")
            expect(page.get_by_role("heading", name="Rounds of sales-analysis")).to_be_visible()
            cards = page.locator("article.round-card")
            expect(cards).to_have_count(3)
            expect(cards.locator(".user-query")).to_have_text(
                [
                    "User query How many rows does sales.csv have?",
                    "User query Plot the monthly revenue.",
                    "User query Plot the monthly amount instead.",
                ]
            )
            expect(cards.locator(".state-pill")).to_have_text(["finished", "failed", "created"])
            # Cards stack vertically, each a box of its own.
            boxes = [cards.nth(i).bounding_box() for i in range(3)]
            assert all(box is not None and box["height"] > 40 for box in boxes)
            assert boxes[0]["y"] + boxes[0]["height"] <= boxes[1]["y"] <= boxes[2]["y"]

            # Posts are arrows between roles, in order.
            first = page.locator("#round-1")
            routes = first.locator(".post-route")
            expect(routes).to_have_count(4)
            expect(routes.nth(1)).to_have_attribute("aria-label", "Planner to CodeInterpreter")
            expect(routes.nth(1).locator(".role-tag")).to_have_text(["Planner", "CodeInterpreter"])
            arrow = routes.nth(1).locator(".route-arrow svg")
            expect(arrow).to_be_visible()
            sender, receiver = (routes.nth(1).locator(".role-tag").nth(i).bounding_box() for i in (0, 1))
            arrow_box = arrow.bounding_box()
            assert sender["x"] + sender["width"] <= arrow_box["x"] + 1  # sender -> arrow -> receiver
            assert arrow_box["x"] + arrow_box["width"] <= receiver["x"] + 1
            # The same role has the same colour on every post.
            planner_colours = {
                tag.evaluate("e => getComputedStyle(e).backgroundColor")
                for tag in page.locator(".post-route .role-tag", has_text="Planner").all()
            }
            assert len(planner_colours) == 1
            assert planner_colours != {
                page.locator(".post-route .role-tag", has_text="CodeInterpreter").first.evaluate(
                    "e => getComputedStyle(e).backgroundColor"
                )
            }

            # Attachments by type: a badge per type, grouped colours, code kept as code.
            reply = first.locator("li.post").nth(2)
            expect(reply.locator(".att-type")).to_have_text(
                ["thought", "reply_content", "execution_status", "execution_result"]
            )
            expect(reply.locator(".attachment.group-code .att-type")).to_have_text(["thought", "reply_content"])
            code = reply.locator(".attachment", has_text="reply_content").locator("pre.att-content")
            expect(code).to_contain_text("df = pd.read_csv('sales.csv')")
            assert css(page, "#round-1 pre.att-content", "white-space") in {"pre", "pre-wrap"}
            plan = first.locator("li.post").nth(1).locator(".attachment.group-planner")
            expect(plan.locator(".att-type")).to_have_text(["plan", "current_plan_step"])
            shared_attachment = first.locator(".attachment.group-shared")
            expect(shared_attachment.locator(".att-type")).to_have_text("shared_memory_entry")
            shared_attachment.locator("summary", has_text="extra").click()
            expect(shared_attachment.locator("pre.json")).to_contain_text('"scope": "conversation"')
            assert css(page, ".attachment.group-planner", "border-left-color") != css(
                page, ".attachment.group-execution", "border-left-color"
            )

            # The failed round is marked, and shows its error attachment.
            failed = page.locator("#round-2")
            expect(failed).to_have_class("card round-card state-failed")
            expect(failed.locator(".state-pill")).to_have_text("failed")
            errors = failed.locator(".attachment.group-execution .att-type")
            expect(errors).to_have_text(["code_error", "revise_message"])
            expect(failed.locator(".attachment", has_text="code_error")).to_contain_text("KeyError: 'revenue'")
            assert css(page, "#round-2", "border-top-color") == "rgb(180, 35, 24)"  # --danger, unlike the others
            assert css(page, "#round-1", "border-top-color") != css(page, "#round-2", "border-top-color")
            expect(page.locator("#round-3 li.post")).to_have_count(1)

            # Shared memory: both scopes, what is in effect now marked.
            shared = page.locator("aside.shared-memory")
            expect(shared.locator(".shared-entry")).to_have_count(3)
            expect(shared.locator(".shared-entry .scope-pill")).to_have_text(["conversation", "round", "round"])
            expect(shared.locator(".shared-entry .cmsg-body")).to_have_text(
                ["load, count, report", "amount, not revenue", "plot amount by month"]
            )
            in_effect = shared.locator(".shared-entry.in-effect")
            expect(in_effect).to_have_count(1)
            expect(in_effect).to_contain_text("plot amount by month")
            expect(in_effect.locator(".effect-pill")).to_be_visible()
            shared_box, rounds_box = shared.bounding_box(), page.locator("section.rounds").bounding_box()
            assert shared_box["x"] >= rounds_box["x"] + rounds_box["width"] - 1  # beside the rounds
            in_effect.get_by_role("link", name="round 3").click()
            expect(page).to_have_url(f"{live_server.url}/sessions/{session_id}/rounds/#round-3")

            page.screenshot(path=str(ROUNDS_SCREENSHOT), full_page=True)

            # --- an agent's memory ---
            agents = page.get_by_role("navigation", name="Agents of this session")
            expect(agents.get_by_role("link")).to_have_text(["developer", "reviewer"])
            agents.get_by_role("link", name="developer").click()
            expect(page).to_have_url(f"{live_server.url}/sessions/{session_id}/agents/developer/")
            expect(page.get_by_role("heading", name="developer memory")).to_be_visible()
            expect(page.locator(".agent-stats .stat dd")).to_have_text(["4", "3", "1", "2"])
            expect(page.locator(".agent-stats .stat-failed")).to_have_class("stat stat-failed alert")
            current = page.get_by_role("navigation", name="Agents of this session").locator("[aria-current=page]")
            expect(current).to_have_text("developer")

            # Discoveries, attempts and decisions interleaved on one timeline, oldest first.
            timeline = page.locator("section.agent-timeline > ol.entries > li.entry")
            expect(timeline).to_have_count(9)
            expect(timeline.locator(".kind-badge")).to_have_text(
                [
                    "decision",
                    "attempt",
                    "discovery",
                    "discovery",
                    "decision",
                    "discovery",
                    "discovery",
                    "attempt",
                    "attempt",
                ]
            )
            times = [t.get_attribute("datetime") for t in timeline.locator(".entry-head time").all()]
            assert len(times) == 9 and times == sorted(times)

            # The failed attempt stands out: its own colour, its error and lessons shown.
            failure = page.locator("li.entry.failure")
            expect(failure).to_have_count(1)
            expect(failure).to_have_id(FAILED_ATTEMPT["id"])
            expect(failure.locator(".result-pill")).to_have_text("failure")
            expect(failure.locator(".plan-step")).to_have_text("step 2")
            expect(failure.locator(".entry-error")).to_contain_text(FAILED_ATTEMPT["error"])
            expect(failure.locator(".lessons li")).to_have_text(FAILED_ATTEMPT["lessons"])
            expect(failure.locator(".entry-commands")).to_contain_text("$ deno add argon2")
            success = page.locator("li.entry.kind-attempt.result-success").first
            assert css(page, "li.entry.failure .entry-card", "background-color") != success.locator(
                ".entry-card"
            ).evaluate("e => getComputedStyle(e).backgroundColor")
            assert css(page, "li.entry.failure .entry-card", "border-left-color") != success.locator(
                ".entry-card"
            ).evaluate("e => getComputedStyle(e).borderLeftColor")

            # The context: current step and blockers.
            context = page.locator("aside.agent-context")
            expect(context.locator(".current-step")).to_contain_text("2")
            expect(context.locator(".blockers li")).to_have_text([BLOCKER])

            # The archive: collapsed at first, then the history line and the moved entry.
            archive = page.locator("details.archive")
            expect(archive).not_to_have_attribute("open", "")
            expect(page.locator("#archived-discovery-000")).to_be_hidden()
            archive.locator("summary").click()
            archived = page.locator("#archived-discovery-000")
            expect(archived).to_be_visible()
            expect(archived).to_contain_text(OLD_DISCOVERY["content"])
            expect(archive.locator(".history-lines")).to_contain_text(
                "discovery-000 [dependency_check/low] The repository pins Deno 1.x"
            )

            page.screenshot(path=str(AGENT_SCREENSHOT), full_page=True)

            # The other agent, and back to the rounds from the breadcrumb.
            page.get_by_role("navigation", name="Agents of this session").get_by_role("link", name="reviewer").click()
            expect(page.get_by_role("heading", name="reviewer memory")).to_be_visible()
            # The developer's failure is the developer's own.
            expect(page.locator("section.agent-timeline")).not_to_contain_text(FAILED_ATTEMPT["error"])
            page.get_by_role("navigation", name="Breadcrumb").get_by_role("link", name="Rounds").click()
            expect(page.locator("article.round-card")).to_have_count(3)
        finally:
            browser.close()
    for screenshot in (ROUNDS_SCREENSHOT, AGENT_SCREENSHOT):
        assert screenshot.stat().st_size > 20_000
