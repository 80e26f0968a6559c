"""End to end in Debian's chromium: the Content-Security-Policy blocks nothing our pages need,
and an agent's remote image is fetched only after the reader asks for it.

Every violation the browser reports (a `securitypolicyviolation` event or its console line) and
every uncaught script error fails the test. The remote image lives on a loopback "tracker" that
records each request, so the test sees exactly when a reader's browser would be tracked.

Run alone with `pytest -m browser`. Screenshots land in var/screenshots/csp_*.png.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import ConsoleMessage, Page, expect, sync_playwright

from memory_app.conversations import services
from memory_app.conversations.models import MemoryType
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import TeamMembership
from tests.memory_app.conversations.test_browser import CHROMIUM, LAUNCH_ARGS, PASSWORD, gradient_png

pytestmark = pytest.mark.browser

SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
HIDDEN_SCREENSHOT = SCREENSHOTS / "csp_remote_images_hidden.png"
SHOWN_SCREENSHOT = SCREENSHOTS / "csp_remote_images_shown.png"
PIXEL = gradient_png(120, 72)

# Reports every violation to Python as it happens, whichever page of the walk it is on.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.reportCspViolation(
    `${location.pathname}: ${event.effectiveDirective} blocked ${event.blockedURI || "inline"}`
    + ` (${event.sourceFile}:${event.lineNumber})`
  );
}, true);
"""


class Tracker:
    """An agent's image host, on loopback: it records every request a reader's browser makes."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append({"path": self.path, **{name.lower(): value for name, value in self.headers.items()}})
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(PIXEL)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(PIXEL)

            def log_message(self, *args: object) -> None:  # keep the test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def image_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/pixel.png?reader=ada"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


@pytest.fixture
def tracker() -> Iterator[Tracker]:
    server = Tracker()
    yield server
    server.stop()


@pytest.fixture
def demo(transactional_db, tracker: Tracker) -> dict[str, str]:
    """A staff member of a team, and a managed session with a data-URL image and a remote one.

    Created before Playwright starts its event loop, so the ORM runs in a plain thread."""
    team = tenancy.team_get_or_create(name="demo")
    user = get_user_model().objects.create_superuser("grace", "grace@example.com", PASSWORD)
    TeamMembership.objects.create(team=team, user=user)
    tenancy.api_key_create(team=team, name="demo-key")  # a row for the admin's actions to select
    session = services.session_create(
        team=team,
        external_id="photo-review",
        system_prompt="You describe pictures.",
        memory_type=MemoryType.MANAGED_CONVERSATION,
        memory_config={"threshold_tokens": 4000},  # draws the token gauge, whose width is a style attribute
    )
    data_url = "data:image/png;base64," + base64.b64encode(gradient_png()).decode()
    services.message_append(
        session=session,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Here is my photo."},
                    {"type": "image_url", "image_url": {"url": data_url}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "And this one an agent found on the web."},
                    {"type": "image_url", "image_url": {"url": tracker.image_url}},
                ],
            },
            {"role": "assistant", "content": "Two pictures: a gradient, and the same gradient smaller."},
        ],
    )
    return {"session_id": str(session.pk)}


class Watch:
    """Collects CSP violations and uncaught script errors of a page across its navigations."""

    def __init__(self, page: Page) -> None:
        self.violations: list[str] = []
        self.errors: list[str] = []
        page.expose_function("reportCspViolation", self._violation)
        page.add_init_script(REPORT_VIOLATIONS)
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.errors.append(f"{page.url}: {error}"))

    def _violation(self, text: str) -> None:
        self.violations.append(text)

    def _console(self, message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            self.violations.append(f"console: {message.text[:300]}")  # data URLs make long lines


def log_in(page: Page, base_url: str) -> None:
    page.goto(base_url + "/accounts/login/")
    expect(page.get_by_role("button", name="Log in")).to_be_visible()
    page.get_by_label("Username").fill("grace")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()


def check_session_page_remote_images(page: Page, base_url: str, session_id: str, tracker: Tracker) -> None:
    page.goto(f"{base_url}/sessions/{session_id}/")
    expect(page.get_by_role("heading", name="photo-review")).to_be_visible()
    thumbnail = page.locator("#m1 figure.thumb img")
    expect(thumbnail).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth === 160", arg=thumbnail.element_handle())

    placeholder = page.locator("#m2 .remote-image")
    expect(placeholder).to_be_visible()
    expect(placeholder).to_contain_text("127.0.0.1")
    expect(page.locator("#m2 img")).to_have_count(0)
    page.wait_for_load_state("networkidle")
    assert tracker.requests == []
    page.screenshot(path=str(HIDDEN_SCREENSHOT), full_page=True)

    page.locator("#m2").get_by_role("link", name="Show remote images").click()
    expect(page).to_have_url(f"{base_url}/sessions/{session_id}/?remote_images=1")
    remote = page.locator("#m2 figure.thumb img")
    expect(remote).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth === 120", arg=remote.element_handle())
    assert tracker.requests, "the shown remote image was never fetched"
    assert all("referer" not in request for request in tracker.requests)  # referrerpolicy="no-referrer"
    expect(page.get_by_role("link", name="Hide remote images")).to_be_visible()
    page.screenshot(path=str(SHOWN_SCREENSHOT), full_page=True)


def check_swagger_ui(page: Page, base_url: str) -> None:
    page.goto(base_url + "/api/docs/")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible(timeout=20_000)
    assert operations.count() > 10
    operations.first.locator(".opblock-summary").click()
    expect(page.get_by_role("button", name="Try it out").first).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / "csp_api_docs.png"))


def check_admin(page: Page, base_url: str, session_id: str) -> None:
    page.goto(base_url + "/admin/")
    expect(page.get_by_role("heading", name="Site administration")).to_be_visible()
    page.goto(base_url + "/admin/memory_app/session/")  # filters and the date hierarchy
    expect(page.locator("#changelist-filter")).to_be_visible()
    page.goto(base_url + "/admin/memory_app/apikey/")
    page.locator("#action-toggle").check()  # the admin's actions.js counts the selection
    expect(page.locator(".action-counter")).to_contain_text("1 of 1 selected")
    page.goto(f"{base_url}/admin/memory_app/session/{session_id}/change/")
    expect(page.locator("#session_form")).to_be_visible()


def test_no_page_breaks_the_policy_and_remote_images_wait_for_the_reader(
    live_server, demo: dict[str, str], tracker: Tracker
) -> None:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get update && apt-get install -y chromium")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    base_url = live_server.url
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            watch = Watch(page)
            log_in(page, base_url)
            expect(page.get_by_role("link", name="photo-review")).to_be_visible()

            check_session_page_remote_images(page, base_url, demo["session_id"], tracker)

            for path, heading in (
                ("/experiences/", "Experiences in"),
                ("/ops/", "Ops"),
                ("/usage/", "Token economics"),
            ):
                page.goto(base_url + path)
                expect(page.get_by_role("heading", name=heading)).to_be_visible()
                page.wait_for_load_state("networkidle")

            check_swagger_ui(page, base_url)
            check_admin(page, base_url, demo["session_id"])

            page.goto(base_url + "/")
            page.get_by_role("button", name="Log out").click()
            expect(page).to_have_url(f"{base_url}/accounts/login/")
        finally:
            browser.close()
    assert watch.violations == []
    assert watch.errors == []
