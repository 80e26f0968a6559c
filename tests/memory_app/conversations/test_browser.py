"""End to end in Debian's chromium: log in, find a session, read its timeline.

Run alone with `pytest -m browser`; skip with `-m "not browser"` on a machine without chromium.
"""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import expect, sync_playwright

from memory_app.conversations import services
from memory_app.conversations.models import MemoryType
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import TeamMembership
from tests.browser_kit import CHROMIUM, LAUNCH_ARGS, PASSWORD

pytestmark = pytest.mark.browser

SCREENSHOT = Path(settings.BASE_DIR) / "var" / "screenshots" / "session_page.png"


def gradient_png(width: int = 160, height: int = 96) -> bytes:
    """A small real PNG (a colour gradient), so the thumbnail has something to show."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(
        b"\x00" + b"".join(bytes((80 + x, 70 + y, 230 - x // 2)) for x in range(width)) for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


@pytest.fixture
def demo(transactional_db) -> dict[str, str]:
    """Created before Playwright starts its event loop, so the ORM runs in a plain thread."""
    team = tenancy.team_get_or_create(name="demo")
    user = get_user_model().objects.create_user("ada", password=PASSWORD)
    TeamMembership.objects.create(team=team, user=user)
    services.session_create(team=team, external_id="unrelated-chat", system_prompt="You write poems.")
    session = services.session_create(
        team=team,
        external_id="trip-planner-42",
        system_prompt="You are a travel planner. Use tools for live data and keep answers short.",
        memory_type=MemoryType.MANAGED_CONVERSATION,
        metadata={"owner": "ada", "channel": "slack"},
    )
    image = "data:image/png;base64," + base64.b64encode(gradient_png()).decode()
    services.message_append(
        session=session,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Here is the map of my route. What's the weather in Oslo tomorrow?"},
                    {"type": "image_url", "image_url": {"url": image}},
                ],
                "send_from": "human",
                "send_to": "planner",
            },
            {
                "role": "assistant",
                "name": "planner",
                "content": "Let me check the forecast.",
                "tool_calls": [
                    {
                        "id": "call_weather_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo", "day": "tomorrow"}'},
                    }
                ],
                "send_from": "planner",
                "send_to": "weather-agent",
            },
            {
                "role": "tool",
                "tool_call_id": "call_weather_1",
                "name": "get_weather",
                "content": '{"city": "Oslo", "forecast": "light snow", "high_c": -1, "low_c": -6}',
            },
            {
                "role": "assistant",
                "name": "planner",
                "content": "Tomorrow in Oslo: light snow, between -6 and -1 °C. Pack a warm coat! "
                "<script>window.pwned = true</script>",
                "send_from": "planner",
                "send_to": "human",
                "structured_data": {"summary": "snow", "confidence": 0.8},
            },
        ],
    )
    return {"username": "ada", "password": PASSWORD, "session_id": str(session.pk)}


def test_a_member_logs_in_searches_and_reads_a_session_timeline(live_server, demo: dict[str, str]) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get update && apt-get install -y chromium")
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(live_server.url + "/")
            expect(page).to_have_url(f"{live_server.url}/accounts/login/?next=/")

            page.screenshot(path=str(SCREENSHOT.with_name("login_page.png")))
            page.get_by_label("Username").fill(demo["username"])
            page.get_by_label("Password").fill(demo["password"])
            page.get_by_role("button", name="Log in").click()
            expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
            expect(page.get_by_role("link", name="unrelated-chat")).to_be_visible()

            page.get_by_label("Search").fill("travel planner")
            page.get_by_role("button", name="Search").click()
            expect(page.get_by_role("link", name="unrelated-chat")).to_have_count(0)
            page.screenshot(path=str(SCREENSHOT.with_name("sessions_list.png")))
            page.get_by_role("link", name="trip-planner-42").click()

            expect(page).to_have_url(f"{live_server.url}/sessions/{demo['session_id']}/")
            expect(page.get_by_role("heading", name="trip-planner-42")).to_be_visible()
            expect(page.locator(".system-prompt")).to_contain_text("You are a travel planner.")
            expect(page.locator("#m1")).to_contain_text("What's the weather in Oslo tomorrow?")
            expect(page.locator("#m1 .route")).to_have_text("human → planner")

            call = page.locator(".tool-call", has_text="get_weather")
            expect(call).to_be_visible()
            expect(call.locator("pre.args")).to_contain_text('"city": "Oslo"')
            result = call.locator(".tool-result")
            expect(result).to_be_visible()
            expect(result).to_contain_text('"forecast": "light snow"')
            expect(result.locator(".seq-inline")).to_have_text("#3")
            expect(page.locator("ol.timeline > li")).to_have_count(3)  # the result is nested, not its own item

            thumbnail = page.locator("#m1 figure.thumb img")
            expect(thumbnail).to_be_visible()
            assert thumbnail.evaluate("img => img.complete && img.naturalWidth") == 160
            box = thumbnail.bounding_box()
            assert box is not None and box["width"] <= 240 and box["height"] <= 180

            expect(page.locator("#m4")).to_contain_text("<script>window.pwned = true</script>")
            assert page.evaluate("() => window.pwned === undefined")
            expect(page.locator("#m4 .tokens")).to_contain_text("tokens")

            page.screenshot(path=str(SCREENSHOT), full_page=True)

            page.get_by_role("button", name="Log out").click()
            expect(page).to_have_url(f"{live_server.url}/accounts/login/")
        finally:
            browser.close()
    assert SCREENSHOT.stat().st_size > 10_000


def log_in(page, base_url: str) -> None:
    page.goto(base_url + "/accounts/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
