"""What every dashboard browser test needs: chromium, a logged-in page, and the three checks
each page must pass at phone and desktop width.

- `assert_fits`: the page never scrolls sideways and no element is cut off. Measured on the
  boxes chromium laid out, not on the CSS we meant to write.
- `assert_accessible`: axe-core (from the npm registry, `make test` installs it) finds no
  serious or critical violation.
- `shoot`: a full-page screenshot under var/screenshots/, named after the page and the width,
  for a person to look at.

Data is built with the ORM before `browser()` starts: Playwright runs an event loop in the test's
thread and Django refuses ORM calls inside one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect, sync_playwright

from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import Team, TeamMembership

CHROMIUM = Path("/usr/bin/chromium")
# Without the background-networking flags chromium keeps dialling Google's hosts, which this
# closed network refuses, many at a time.
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PASSWORD = "a long browser test password"
PHONE: ViewportSize = {"width": 390, "height": 844}
DESKTOP: ViewportSize = {"width": 1280, "height": 900}
WIDTHS: tuple[ViewportSize, ...] = (PHONE, DESKTOP)
SCREENSHOTS = Path(settings.BASE_DIR) / "var" / "screenshots"
AXE = Path(settings.BASE_DIR) / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING_IMPACTS = ("serious", "critical")


def member(team_name: str = "demo", username: str = "ada", *, admin: bool = True) -> tuple[Team, Any]:
    """A dashboard user in a team (a team admin unless told otherwise), password PASSWORD."""
    team = tenancy.team_get_or_create(name=team_name)
    user_model = get_user_model()
    user = user_model.objects.filter(username=username).first() or user_model.objects.create_user(
        username, password=PASSWORD
    )
    TeamMembership.objects.get_or_create(team=team, user=user, defaults={"is_admin": admin})
    return team, user


@contextmanager
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail("Debian's chromium is missing: apt-get update && apt-get install -y chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def log_in(page: Page, base_url: str, user: str = "ada") -> None:
    page.goto(base_url + "/accounts/login/")
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    expect(page.locator("header.topbar .logout")).to_be_attached()


def open_page(
    opened: Browser,
    base_url: str,
    *,
    viewport: ViewportSize = DESKTOP,
    user: str | None = "ada",
    color_scheme: str = "light",
) -> Page:
    """A new page at the given width, logged in as `user` (None: signed out)."""
    context = opened.new_context(viewport=viewport, color_scheme=color_scheme)  # type: ignore[arg-type]
    page = context.new_page()
    if user is not None:
        log_in(page, base_url, user)
    return page


def nav_link(page: Page, name: str) -> Locator:
    """A link of the main navigation, unfolding the phone's Menu first when it is folded."""
    menu = page.get_by_role("button", name="Menu")
    if menu.is_visible() and menu.get_attribute("aria-expanded") == "false":
        menu.click()
    return page.get_by_role("navigation", name="Main").get_by_role("link", name=name, exact=True)


# Runs in the page. An element "spills" when its box reaches past the right edge of the
# viewport without a scrolling ancestor to hold it, and is "clipped" when an ancestor that
# hides overflow cuts part of it off (a scrolling ancestor is fine: the reader can scroll).
# Invisible, zero-size and visually-hidden elements are not looked at.
_LAYOUT_PROBE = (Path(__file__).parent / "layout_probe.js").read_text(encoding="utf-8")


def layout_problems(page: Page) -> list[str]:
    return page.evaluate(_LAYOUT_PROBE)


def assert_fits(page: Page) -> None:
    """No sideways page scroll and no element cut off, at the page's current width."""
    problems = layout_problems(page)
    assert not problems, f"{page.url} at {page.viewport_size}:\n" + "\n".join(problems[:25])


def axe_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now.

    The script is evaluated through the DevTools protocol, which the page's
    Content-Security-Policy does not govern, so the page keeps its real policy while tested."""
    if not AXE.exists():
        pytest.fail("axe-core is missing: run `npm ci` (make test does)")
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    results = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.slice(0, 5).map(n => n.target.join(' ') + ' :: ' + n.failureSummary)}))"
    )
    return [v for v in results if v["impact"] in BLOCKING_IMPACTS]


def assert_accessible(page: Page) -> None:
    violations = axe_violations(page)
    assert not violations, f"{page.url}: axe found\n" + json.dumps(violations, indent=1)[:6000]


def shoot(page: Page, name: str) -> Path:
    """Writes var/screenshots/<name>-<width>.png (the whole page) and returns its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    width = (page.viewport_size or DESKTOP)["width"]
    path = SCREENSHOTS / f"{name}-{width}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def check_page(page: Page, name: str) -> None:
    """The checks every page passes at every width: fits, accessible, photographed."""
    shoot(page, name)
    assert_fits(page)
    assert_accessible(page)
