"""The token economics page: server-rendered figures, scoping, and the page in chromium."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect, sync_playwright

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType
from memory_app.models import LLMCall
from memory_app.tenancy.models import TeamMembership
from memory_app.usage.pages import usage_chart
from memory_app.usage.selectors import DailyUsage
from tests.conftest import make_tenant
from tests.experiences_app.conftest import add_experience
from tests.llm_server import Reply
from tests.memory_app.conversations.test_browser import CHROMIUM, LAUNCH_ARGS, PASSWORD, log_in

SCREENSHOT = Path(settings.BASE_DIR) / "var" / "screenshots" / "usage_page.png"
SUMMARY = json.dumps(
    {
        "user_request_summary": "plan a week in Norway",
        "summary": "Oslo for three nights, then the Bergen line; hotel and train booked.",
        "salient_facts": ["hotel Amerikalinjen 3-6 March"],
        "open_threads": [],
        "keep_images": [],
    }
)


def scripted_team(llm_server) -> dict[str, str]:
    """A team whose planner session was compacted and selected experiences through the scripted
    server, and whose agents read their contexts over real HTTP from the live server."""
    tenant = make_tenant("demo")
    user = get_user_model().objects.create_user("ada", password=PASSWORD)
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=True)
    session = services.session_create(
        team=tenant.team,
        external_id="norway-trip",
        system_prompt="You are a travel planner.",
        memory_type=MemoryType.MANAGED_CONVERSATION,
        metadata={"agent_name": "planner"},
    )
    for turn in range(8):
        services.message_append(
            session=session,
            messages=[
                {"role": "user", "content": f"Day {turn}: what should we do in Oslo and Bergen? " * 6},
                {"role": "assistant", "content": f"Day {turn}: the opera, the fjord cruise, the fish market. " * 12},
            ],
        )
    small = services.session_create(team=tenant.team, external_id="quick-question", metadata={"agent_name": "helper"})
    services.message_append(session=small, messages=[{"role": "user", "content": "What time is it in Oslo?"}])
    add_experience(
        tenant.team, "norway-tips", when="Use when the user plans travel in Norway.", what="Book trains early."
    )
    add_experience(tenant.team, "unused-tip", when="Use when the user asks about taxes.", what="Cite the law.")
    llm_server.script(
        Reply(SUMMARY, prompt_tokens=4200, completion_tokens=310),
        Reply('{"norway-tips": true, "unused-tip": false}', prompt_tokens=180, completion_tokens=9),
    )
    run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    selected = tenant.client.post(
        "/api/v1/experiences/select/", {"role": "planner", "query": "Trains in Norway?"}, format="json"
    )
    assert selected.status_code == 200, selected.content
    return {"key": tenant.key, "session_id": str(session.pk), "small_id": str(small.pk), "team": tenant.team.name}


@pytest.fixture
def economics(transactional_db, llm_server, job_outbox) -> dict[str, str]:
    return scripted_team(llm_server)


def read_contexts(base_url: str, data: dict[str, str]) -> None:
    headers = {"Authorization": f"Bearer {data['key']}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=10) as client:
        for _ in range(3):
            assert client.get(f"/api/v1/sessions/{data['session_id']}/context/").status_code == 200
        assert client.get(f"/api/v1/sessions/{data['small_id']}/context/").status_code == 200


@pytest.mark.browser
def test_a_member_reads_the_token_economics_of_a_scripted_session(live_server, economics) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get update && apt-get install -y chromium")
    read_contexts(live_server.url, economics)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1360, "height": 1000})
            log_in(page, live_server.url)
            page.get_by_role("link", name="Usage").click()
            expect(page.get_by_role("heading", name="Token economics")).to_be_visible()

            totals = page.locator("#usage-totals")
            expect(totals.locator(".stat-spent dd")).to_contain_text("4,699")  # 4200 + 310 + 180 + 9
            expect(totals.locator(".stat-net dd")).to_contain_text("+")
            expect(totals).to_contain_text("Contexts served")
            # Whole contexts of a compacted session: its saving is compaction's, none the window's.
            split = totals.locator("#saved-split")
            expect(split).to_contain_text("window kept out 0")
            expect(split).to_contain_text("compaction saved")
            assert split.locator("strong").nth(1).inner_text() != "0"
            chart = page.locator("svg.usage-chart")
            expect(chart.locator("rect.bar.spent")).to_have_count(1)  # everything happened today
            expect(chart.locator("rect.bar.saved")).to_have_count(1)
            assert chart.locator("rect.bar.saved").bounding_box()["height"] > 10

            expect(page.locator("#top-spend-table tbody tr").first).to_contain_text("norway-trip")
            expect(page.locator("#top-saved-table tbody tr").first).to_contain_text("norway-trip")
            expect(page.locator("#by-purpose-table")).to_contain_text("summarize")
            expect(page.locator("#by-purpose-table")).to_contain_text("select_experiences")
            hit = page.locator("#hit-rate-table tbody tr", has_text="norway-tips")
            expect(hit.locator(".hit-rate")).to_have_text("100%")
            expect(page.locator("#hit-rate-table tbody tr", has_text="unused-tip").locator(".hit-rate")).to_have_text(
                "0%"
            )
            page.screenshot(path=str(SCREENSHOT), full_page=True)
            page.set_viewport_size({"width": 390, "height": 844})
            expect(split).to_be_in_viewport(ratio=1)  # the split stays readable on a phone, not cut off
            page.screenshot(path=str(SCREENSHOT.with_name("usage_page_phone.png")), full_page=True)
            page.set_viewport_size({"width": 1360, "height": 1000})

            page.locator("#by-agent-table").get_by_role("link", name="helper").click()
            expect(page.locator(".scope-line")).to_contain_text("helper")
            expect(page.locator("#usage-totals .stat-spent dd")).to_have_text("0 tokens")
            expect(page.locator("#usage-totals .stat-contexts dd")).to_have_text("1")
            # One short message: the context is no smaller than its history, so it saved nothing.
            expect(page.locator("#top-saved-table tbody tr")).to_contain_text("No context in this range")
        finally:
            browser.close()
    assert SCREENSHOT.stat().st_size > 20_000


# --- server-rendered, without a browser -------------------------------------------------------------


@pytest.fixture
def member(client: Client, tenant) -> Client:
    user = get_user_model().objects.create_user("bob", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_page_shows_only_the_members_team(member: Client, tenant, other_tenant) -> None:
    LLMCall.objects.create(team=tenant.team, purpose="summarize", backend="openai", outcome="ok", prompt_tokens=1234)
    LLMCall.objects.create(
        team=other_tenant.team, purpose="summarize", backend="openai", outcome="ok", prompt_tokens=99
    )

    response = member.get(reverse("dashboard:usage"))

    assert response.status_code == 200
    assert response.context["totals"].spent_tokens == 1234
    foreign = services.session_create(team=other_tenant.team)
    assert member.get(reverse("dashboard:usage"), {"session": str(foreign.pk)}).status_code == 404


@pytest.mark.django_db
def test_anonymous_users_are_sent_to_log_in(client: Client) -> None:
    response = client.get(reverse("dashboard:usage"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_the_chart_scales_bars_to_the_largest_day() -> None:
    from datetime import date

    chart = usage_chart([DailyUsage(date(2026, 11, 1), 100, 400), DailyUsage(date(2026, 11, 2), 0, 200)])
    spent, saved = chart.spent, chart.saved
    assert saved[0].height == pytest.approx(2 * saved[1].height)
    assert spent[0].height == pytest.approx(saved[0].height / 4)
    assert spent[1].height == 0 and not chart.empty
    assert all(bar.y + bar.height == pytest.approx(chart.baseline) for bar in spent + saved)
