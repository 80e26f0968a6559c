"""Content-Security-Policy: every HTML page runs our own scripts only, and an agent's remote
image URL is not fetched by a reader's browser until the reader asks for it.

Every route of the URL resolver is requested (tests/url_routes.py) by a staff member of a team,
and anonymously, so a page added later is covered the moment it exists.
"""

from __future__ import annotations

import html as html_lib
import re

import pytest
from django.contrib.auth import get_user_model
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse

from memory_app.conversations import services
from memory_app.conversations.models import MemoryType, Session
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant
from tests.memory_app.conversations.test_pages import PNG_DATA_URL
from tests.security.conftest import World
from tests.url_routes import Route, all_routes

pytestmark = pytest.mark.django_db

CSP = "Content-Security-Policy"
# Pages that must answer 200 with HTML to the staff member: the walk below must not pass by
# checking only redirects and error pages.
MUST_RENDER = {
    "login",
    "admin:index",
    "admin:memory_app_session_changelist",
    "admin:memory_app_session_change",
    "swagger-ui",
    "dashboard:sessions",
    "dashboard:session",
    "dashboard:session_rounds",
    "dashboard:agent_memory",
    "dashboard:usage",
    "dashboard:facts",
    "dashboard:ops",
    "experiences:list",
    "experiences:detail",
}
TRACKER = "https://tracker.example/pixel.png?reader=ada&t=1"
OTHER_TRACKER = "http://cdn.example.org/b.png"
SCRIPT_TAG = re.compile(r"<script\b[^>]*>", re.I)
STYLE_ELEMENT = re.compile(r"<style\b", re.I)
EVENT_HANDLER = re.compile(r"<[a-z][^>]*\son[a-z]+\s*=", re.I)
IMG_SRC = re.compile(r'<img\b[^>]*\bsrc="([^"]*)"', re.I)


def directives(header: str) -> dict[str, list[str]]:
    """{"img-src": ["'self'", "data:"], ...} from a Content-Security-Policy header."""
    parts = (part.split() for part in header.split(";") if part.strip())
    return {name: values for name, *values in parts}


def is_html(response: HttpResponse) -> bool:
    return response.get("Content-Type", "").startswith("text/html")


def inline_code(page: str) -> list[str]:
    """Inline scripts, <style> elements and on* handlers: what the policy would block."""
    found = [tag for tag in SCRIPT_TAG.findall(page) if "src=" not in tag and "application/json" not in tag]
    return found + STYLE_ELEMENT.findall(page) + EVENT_HANDLER.findall(page)


@pytest.fixture
def staff(world: World, tenant: Tenant) -> Client:
    """A superuser (staff, so the admin and ops pages open) who is a member of the world's team."""
    user = get_user_model().objects.create_superuser("grace", "grace@example.com", "pw-Grace-long-1")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client = Client()
    client.force_login(user)
    return client


def walk(client: Client, routes: list[Route]) -> list[tuple[Route, HttpResponse]]:
    """(route, response) for every route that answered a GET with HTML."""
    answered = [(route, client.get(route.path)) for route in routes]
    return [(route, response) for route, response in answered if is_html(response)]


def staff_routes(world: World) -> list[Route]:
    """Every route, plus the admin's pages of one real session (the admin's ids are per model)."""
    session_pages = [
        route
        for route in all_routes(**world.ids, object_id=world.ids["session_id"])
        if route.name.startswith("admin:memory_app_session_")
    ]
    return all_routes(**world.ids) + session_pages


def test_every_html_page_of_a_staff_member_carries_the_policy(staff: Client, world: World) -> None:
    pages = walk(staff, staff_routes(world))

    rendered = {route.name for route, response in pages if response.status_code == 200}
    assert MUST_RENDER - rendered == set()
    assert [route.name for route, response in pages if CSP not in response] == []
    assert [route.name for route, response in pages if CSP in response and not directives(response[CSP])] == []


def test_no_page_of_a_staff_member_has_inline_script_or_style_elements(staff: Client, world: World) -> None:
    pages = walk(staff, staff_routes(world))

    blocked = {
        route.name: inline_code(response.content.decode())
        for route, response in pages
        if response.status_code == 200 and not response.streaming
    }
    assert {name: found for name, found in blocked.items() if found} == {}


def test_every_html_answer_to_an_anonymous_visitor_carries_the_policy(world: World) -> None:
    pages = walk(Client(), all_routes(**world.ids))

    assert {route.name for route, response in pages if response.status_code == 200} >= {"login", "admin:login"}
    assert [route.name for route, response in pages if CSP not in response] == []


def test_the_policy_allows_our_own_scripts_and_nothing_inline(client: Client) -> None:
    header = client.get(reverse("login"))[CSP]
    policy = directives(header)

    assert policy["default-src"] == ["'self'"]
    assert policy["script-src"] == ["'self'"]
    assert policy["img-src"] == ["'self'", "data:"]
    assert policy["connect-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["form-action"] == ["'self'"]
    assert policy["style-src"] == ["'self'"]
    assert "'unsafe-eval'" not in header
    # Only style attributes may be inline (server-computed widths and hues); never scripts.
    assert [name for name, values in policy.items() if "'unsafe-inline'" in values] == ["style-src-attr"]


def test_swagger_ui_loads_its_init_script_as_a_file_under_the_policy(staff: Client) -> None:
    page = staff.get(reverse("swagger-ui"))
    sources = re.findall(r'<script\b[^>]*\bsrc="([^"]*)"', page.content.decode())
    init = [html_lib.unescape(src) for src in sources if src.startswith(reverse("swagger-ui"))]
    assert len(init) == 1

    script = staff.get(init[0])
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle(" in script.content.decode()


# --- remote images wait for the viewer ------------------------------------------------------------


@pytest.fixture
def member(client: Client, tenant: Tenant) -> Client:
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    return client


def session_with_remote_images(tenant: Tenant) -> Session:
    """Remote images in a content part, in `images`, and in a tool result, beside a data URL."""
    session = services.session_create(
        team=tenant.team, memory_type=MemoryType.MANAGED_CONVERSATION, memory_config={"threshold_tokens": 5000}
    )
    call = {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{}"}}
    services.message_append(
        session=session,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is in these?"},
                    {"type": "image_url", "image_url": {"url": TRACKER}},
                ],
                "images": [PNG_DATA_URL],
            },
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "seen", "images": [OTHER_TRACKER]},
        ],
    )
    return session


def img_sources(page: str) -> list[str]:
    return [html_lib.unescape(src) for src in IMG_SRC.findall(page)]


def show_link(page: str) -> str:
    hrefs = re.findall(r'<a\b[^>]*href="([^"]*)"[^>]*>Show remote images</a>', page)
    assert hrefs, "no Show remote images link"
    assert len(set(hrefs)) == 1
    return html_lib.unescape(hrefs[0])


def test_remote_images_are_placeholders_until_the_viewer_asks(member: Client, tenant: Tenant) -> None:
    session = session_with_remote_images(tenant)
    url = reverse("dashboard:session", args=[session.pk])

    hidden = member.get(url)
    page = hidden.content.decode()
    assert [src for src in img_sources(page) if not src.startswith("data:")] == []
    assert PNG_DATA_URL in img_sources(page)  # data URLs stay thumbnails
    assert "tracker.example" in page and "cdn.example.org" in page  # the placeholders name the hosts
    assert TRACKER not in html_lib.unescape(page)
    assert not {"https:", "http:"} & set(directives(hidden[CSP])["img-src"])

    shown = member.get(url + show_link(page))
    page = shown.content.decode()
    assert {TRACKER, OTHER_TRACKER, PNG_DATA_URL} <= set(img_sources(page))
    assert "Show remote images" not in page
    for tag in re.findall(r"<img\b[^>]*>", page):
        assert 'referrerpolicy="no-referrer"' in tag
    assert directives(shown[CSP])["img-src"] == ["'self'", "data:", "https:", "http:"]


def test_showing_remote_images_keeps_the_timeline_position(member: Client, tenant: Tenant) -> None:
    session = session_with_remote_images(tenant)
    url = reverse("dashboard:session", args=[session.pk])

    link = show_link(member.get(url + "?latest=1").content.decode())

    assert link.startswith("?") and "latest=1" in link and "remote_images=1" in link
    hide = re.search(r'<a\b[^>]*href="([^"]*)"[^>]*>Hide remote images</a>', member.get(url + link).content.decode())
    assert hide is not None
    assert "remote_images" not in html_lib.unescape(hide.group(1))
    assert "latest=1" in html_lib.unescape(hide.group(1))


def test_only_the_session_page_loosens_img_src(member: Client, tenant: Tenant) -> None:
    session_with_remote_images(tenant)
    for name in ("dashboard:sessions", "dashboard:usage", "experiences:list"):
        response = member.get(reverse(name) + "?remote_images=1")
        assert response.status_code == 200, name
        assert directives(response[CSP])["img-src"] == ["'self'", "data:"], name
