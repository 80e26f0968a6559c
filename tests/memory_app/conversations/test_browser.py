"""End to end in Debian's chromium: log in, find a session, read its timeline.

Run alone with `pytest -m browser`; skip with `-m "not browser"` on a machine without chromium.
"""

from __future__ import annotations

import base64
import os
import struct
import subprocess
import threading
import time
import uuid
import zlib
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect, sync_playwright

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import MemoryType, Session
from memory_app.ops import pages as ops_pages
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import TeamMembership
from tests.browser_kit import CHROMIUM, LAUNCH_ARGS, PASSWORD
from tests.celery_worker import celery_worker_argv

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


# --- compaction on the session page, and the ops page ---------------------------------------------

COMPACTION_SCREENSHOT = SCREENSHOT.with_name("session_compaction.png")
OPS_SCREENSHOT = SCREENSHOT.with_name("ops_page.png")
TRIP = [
    (
        "Plan a week in Norway in March: Oslo first, then Bergen by train.",
        "Oslo for three nights, then the Bergen line. It is one of the most scenic rail trips in Europe: "
        "seven hours across the Hardangervidda plateau, snow-covered in March. Bergen deserves two nights "
        "at least, and a fjord cruise from there fills the last day nicely.",
    ),
    (
        "Find a hotel in Oslo near the opera house under 180 EUR a night.",
        "Amerikalinjen fits: a five minute walk from the opera, 165 EUR a night in March. The Sommerro is a "
        "good second choice at 175 EUR, with a rooftop bar and a pool, but it is a tram ride from the "
        "waterfront. Both have free cancellation until two days before arrival.",
    ),
    (
        "Book Amerikalinjen for the 3rd to the 6th.",
        "Booked Amerikalinjen, 3 to 6 March, confirmation AMX-4471. Breakfast is included and check-in opens "
        "at 15:00; the room is a superior double on the sixth floor facing the harbour. The confirmation was "
        "sent to the email on file, and the hotel holds the room until midnight on arrival day.",
    ),
    (
        "Now the train to Bergen on the 6th, a window seat please.",
        "Reserved Vy regional train 61, leaving Oslo S at 08:25 on 6 March, car 4 seat 52. It is a window seat "
        "on the left side, which gets the fjord views after Voss. The ticket is a Vy Lowfare at 649 NOK, "
        "changeable for a fee until departure, and it is in the Vy app under the same email.",
    ),
    (
        "What should we pack for Bergen in March?",
        "Layers, a waterproof shell and good shoes: Bergen gets rain on most March days and it stays between "
        "1 and 6 °C.",
    ),
]


def run_in_thread(function) -> None:
    """Django's ORM refuses to run inside Playwright's event loop: use a plain thread."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            function()
        except BaseException as exc:  # re-raised in the test
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(30)
    if errors:
        raise errors[0]


@pytest.fixture
def compacted(transactional_db, job_outbox) -> dict[str, str]:
    """A managed session with one done compaction (offline extractive backend) and a failed one elsewhere."""
    team = tenancy.team_get_or_create(name="demo")
    other = tenancy.team_get_or_create(name="research")
    user = get_user_model().objects.create_user("ada", password=PASSWORD)
    TeamMembership.objects.create(team=team, user=user, is_admin=True)
    session = services.session_create(
        team=team,
        external_id="norway-trip",
        system_prompt="You are a travel planner. Book what the user asks for and keep answers short.",
        memory_type=MemoryType.MANAGED_CONVERSATION,
        memory_config={"threshold_tokens": 1200, "active_context": {"summarization": {"grace_recent_messages": 1}}},
    )
    for question, answer in TRIP[:4]:
        services.message_append(
            session=session,
            messages=[{"role": "user", "content": question}, {"role": "assistant", "content": answer}],
        )
    run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    question, answer = TRIP[4]
    services.message_append(
        session=session, messages=[{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    )
    stuck = services.session_create(team=other, external_id="lit-review-7", memory_type=MemoryType.MANAGED_CONVERSATION)
    for question, answer in TRIP[:2]:  # something to compact when the operator retries
        services.message_append(
            session=stuck, messages=[{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        )
    CompactionRun.objects.create(
        team=other,
        session=stuck,
        trigger="threshold",
        status="failed",
        attempts=4,
        error="gave up after 4 attempts: 429 Too Many Requests (rate limit of the provider reached)",
        finished_at=timezone.now() - timedelta(minutes=12),
    )
    waiting = services.session_create(
        team=other, external_id="lit-review-8", memory_type=MemoryType.MANAGED_CONVERSATION
    )
    for question, answer in TRIP[:2]:
        services.message_append(
            session=waiting, messages=[{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
        )
    CompactionRun.objects.filter(pk=compaction.compaction_request(session=waiting, trigger="threshold")[0].pk).update(
        created_at=timezone.now() - timedelta(minutes=3, seconds=20),
        pending_since=timezone.now() - timedelta(minutes=3, seconds=20),
    )
    return {"session_id": str(session.pk), "run_id": str(run.pk), "other_team_id": str(other.pk)}


def log_in(page, base_url: str) -> None:
    page.goto(base_url + "/accounts/login/")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()


class PingWorker:
    """A real Celery worker on the test's broker, on a queue of its own (it only answers pings)."""

    def __init__(self) -> None:
        self.name = f"ops-browser-{uuid.uuid4().hex[:6]}@%h"
        self.process = subprocess.Popen(
            celery_worker_argv(self.name, f"ops-browser-{uuid.uuid4().hex[:6]}", ["--pool", "solo"], "WARNING"),
            cwd=settings.BASE_DIR,
            env={**os.environ, "MEMSITE_VAR_DIR": str(settings.VAR_DIR)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_until_it_answers(self, timeout: float = 60) -> str:
        from memsite.celery import app as celery_app

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "the worker exited"
            for reply in celery_app.control.ping(timeout=0.5):
                for name in reply:
                    if name.startswith(self.name.split("@")[0]):
                        return name
        raise AssertionError("the worker never answered a ping")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


def test_a_member_reads_a_compacted_session_and_reverts_it(live_server, compacted: dict[str, str]) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get update && apt-get install -y chromium")
    COMPACTION_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
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
        finally:
            browser.close()
    assert COMPACTION_SCREENSHOT.stat().st_size > 10_000


def test_operators_watch_the_queues_refresh_and_retry_a_failure(
    live_server, compacted: dict[str, str], monkeypatch
) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get update && apt-get install -y chromium")
    # The operator of the deployment: the failure is another team's ("research").
    get_user_model().objects.filter(username="ada").update(is_superuser=True)
    monkeypatch.setattr(ops_pages, "OPS_REFRESH_SECONDS", 1)
    # The filesystem broker polls once a second: a 0.5 s reply window can miss every ping of a
    # slow run (it did once in CI). A window over one poll catches the first.
    monkeypatch.setattr(ops_pages, "OPS_PING_TIMEOUT", 1.5)
    worker = PingWorker()
    try:
        worker_name = worker.wait_until_it_answers()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                log_in(page, live_server.url)
                page.get_by_role("link", name="Ops").click()
                expect(page.get_by_role("heading", name="Ops")).to_be_visible()

                queue = page.locator("#queue-compaction")
                expect(queue.locator(".stat-pending dd")).to_have_text("1")
                expect(queue.locator(".stat-failed dd")).to_contain_text("1")
                expect(queue.locator(".stat-age dd")).to_contain_text("3 min")
                # A broadcast answer can miss one ping's window; the page remembers it once seen.
                expect(page.locator(".workers code.worker")).to_have_text(worker_name, timeout=15_000)
                failure = queue.locator("table.failures tbody tr")
                expect(failure).to_have_count(1)
                expect(failure.locator(".team-tag")).to_have_text("research")
                expect(failure).to_contain_text("429 Too Many Requests")
                page.screenshot(path=str(OPS_SCREENSHOT), full_page=True)

                # The page polls its partial: a job queued now shows up without a reload.
                run_in_thread(
                    lambda: compaction.compaction_request(
                        session=Session.objects.get(external_id="norway-trip"), trigger="manual"
                    )
                )
                expect(queue.locator(".stat-pending dd")).to_have_text("2", timeout=10_000)

                failure.get_by_role("button", name="Retry").click()
                flash = page.locator(".flash")
                expect(flash).to_contain_text("queued a new job for session lit-review-7", timeout=10_000)
                expect(page.locator("#queue-compaction .stat-pending dd")).to_have_text("3")
                expect(page.locator("#queue-compaction table.failures .pill")).to_have_text("retried")
            finally:
                browser.close()
    finally:
        worker.stop()
    assert OPS_SCREENSHOT.stat().st_size > 10_000
