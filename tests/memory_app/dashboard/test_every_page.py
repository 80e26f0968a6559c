"""Every dashboard page, with a week of realistic data, at phone and desktop width and in dark
mode: nothing scrolls sideways or is cut off, axe-core finds no serious or critical violation,
and a screenshot of each lands in var/screenshots/ (<route>-390.png, <route>-1280.png,
<route>-dark-1280.png) for a person to look at.

The pages come from the URL resolver, so a page added later is visited without being listed
here; a page that needs an id this world does not have fails until it gets one.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from django.test import Client
from playwright.sync_api import ViewportSize

from experiences_app.models import SelectionLog
from memory_app.facts.models import Fact
from memory_app.usage.models import ContextServe
from memory_app.webhooks.models import Webhook, WebhookDelivery
from tests.browser_kit import DESKTOP, PHONE, assert_accessible, browser, layout_problems, open_page, shoot
from tests.dashboard_world import World, build_world
from tests.url_routes import all_routes

pytestmark = pytest.mark.browser

# Not dashboard pages: Django's admin, the API's Swagger UI (a third-party page), the auth views.
NOT_DASHBOARD = ("admin:", "swagger-ui", "login", "logout", "healthz", "metrics", "schema")


@dataclass(frozen=True)
class Visit:
    name: str  # the route name, used for the screenshot's file name
    path: str


def _ids(world: World) -> dict[str, str]:
    values = world.kwargs()
    team = world.team
    fact = Fact.objects.filter(team=team).order_by("created_at").first()
    delivery = WebhookDelivery.objects.filter(team=team).order_by("created_at").first()
    selection = SelectionLog.objects.filter(team=team).order_by("created_at").first()
    webhook = Webhook.objects.filter(team=team).order_by("created_at").first()
    served = ContextServe.objects.filter(team=team).order_by("created_at").first()
    rows = (
        ("fact_id", fact),
        ("delivery_id", delivery),
        ("log_id", selection),
        ("webhook_id", webhook),
        ("serve_id", served),
    )
    for key, row in rows:
        if row is not None:
            values[key] = str(row.pk)
    recorded = ContextServe.objects.filter(team=team, context_id__isnull=False).order_by("created_at").first()
    if recorded is not None:  # a context served through the API: its id names it
        values["context_id"] = str(recorded.context_id)
    return values


def dashboard_pages(world: World) -> list[Visit]:
    """Every route a member opens as a full page (not a form action, partial or download)."""
    client = Client()
    client.login(username="ada", password="a long browser test password")
    visits, missing = [], []
    for route in all_routes(**_ids(world)):
        if route.is_api or route.name.startswith(NOT_DASHBOARD) or route.pattern.startswith("admin/"):
            continue
        response = client.get(route.path)
        if response.status_code == 405:  # a form action: POST only
            continue
        if response.status_code == 302 and not response["Location"].startswith("/accounts/login/"):
            continue  # another address of a page (a served context by its id): visited at its own
        if response.status_code != 200:
            missing.append(f"{route.name} {route.path} -> {response.status_code}")
            continue
        if not response.get("Content-Type", "").startswith("text/html") or b"<html" not in response.content[:400]:
            continue  # a partial a live region polls, a JSON feed, a download
        visits.append(Visit(name=route.name.replace(":", "-"), path=route.path))
    assert not missing, "pages this world cannot open (give them an id in tests/dashboard_world.py):\n" + "\n".join(
        missing
    )
    return visits


@pytest.fixture
def pages(live_server) -> list[Visit]:
    world = build_world()
    visits = dashboard_pages(world)
    # The session page of each kind of session, not only the first.
    for session in (world.coding, world.managed, world.kg, world.rounds):
        visits.append(Visit(name=f"dashboard-session-{session.memory_type}", path=f"/sessions/{session.pk}/"))
    return visits


def _tour(base_url: str, visits: list[Visit], viewport: ViewportSize, scheme: str) -> list[str]:
    failures: list[str] = []
    suffix = "-dark" if scheme == "dark" else ""
    with browser() as opened:
        page = open_page(opened, base_url, viewport=viewport, color_scheme=scheme)
        for visit in visits:
            page.goto(base_url + visit.path)
            page.wait_for_load_state("networkidle")
            shoot(page, visit.name + suffix)
            failures += [f"{visit.path}: {problem}" for problem in layout_problems(page)[:8]]
            try:
                assert_accessible(page)
            except AssertionError as error:
                failures.append(str(error)[:1500])
    return failures


def test_every_page_fits_and_passes_axe_at_phone_and_desktop_width_light_and_dark(
    live_server, pages: list[Visit]
) -> None:
    assert len(pages) >= 25, [visit.path for visit in pages]
    tours = ((PHONE, "light"), (DESKTOP, "light"), (DESKTOP, "dark"))
    # The three tours run side by side, each with its own Playwright in its own thread: most of a
    # visit is waiting (for the network to go quiet, for chromium to paint), not computing.
    with ThreadPoolExecutor(max_workers=len(tours)) as pool:
        found = [pool.submit(_tour, live_server.url, pages, viewport, scheme) for viewport, scheme in tours]
    failures = [
        f"[{viewport['width']} {scheme}] {failure}"
        for (viewport, scheme), tour in zip(tours, found, strict=True)
        for failure in tour.result()
    ]
    assert not failures, f"{len(failures)} problems:\n" + "\n".join(failures)
