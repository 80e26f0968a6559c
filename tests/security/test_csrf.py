"""CSRF on every browser form; the API has no ambient credentials to forge.

Every page (dashboard, experiences, admin) is rendered as a logged-in curator member of the team
with real objects behind every URL; each `<form method="post">` must carry the CSRF token, and
a POST without the token to any page is refused with 403 before the view runs.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memory_app.compaction.models import CompactionRun
from memory_app.tenancy.models import TeamMembership
from tests.security.conftest import World
from tests.url_routes import Route, all_routes

pytestmark = pytest.mark.django_db

_FORM = re.compile(r"<form\b([^>]*)>(.*?)</form>", re.S | re.I)
_POST = re.compile(r"""method\s*=\s*["']?post""", re.I)
NOT_PAGES = {"login", "logout", "admin:login", "admin:logout", "healthz"}


@pytest.fixture
def curator(world: World, tenant) -> Client:
    user = get_user_model().objects.create_user("curator", password="pw-Staff-12345", is_staff=True, is_superuser=True)
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=True)
    CompactionRun.objects.filter(pk=world.ids["run_id"]).update(status="failed")  # retryable on the ops page
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def page_routes(world: World) -> list[Route]:
    values = {**world.ids, "log_id": world.ids["selection_id"], "job_id": world.ids["run_id"]}
    return [route for route in all_routes(**values) if not route.is_api and route.name not in NOT_PAGES]


def post_forms(html: str) -> list[str]:
    return [body for attributes, body in _FORM.findall(html) if _POST.search(attributes)]


def test_every_post_form_on_every_page_carries_the_csrf_token(world: World, curator: Client):
    forms_seen = 0
    for route in page_routes(world):
        response = curator.get(route.path, follow=True)
        if response.status_code != 200 or "text/html" not in response.get("Content-Type", ""):
            continue  # POST-only actions (405), downloads and JSON partials have no forms
        for body in post_forms(response.content.decode()):
            assert 'name="csrfmiddlewaretoken"' in body, (route.name, body[:300])
            forms_seen += 1
    assert forms_seen >= 20  # the dashboard's, the experiences pages' and the admin's forms


def test_a_post_without_the_token_is_403_on_every_page(world: World, curator: Client):
    for route in page_routes(world):
        response = curator.post(route.path, {"anything": "x"})
        assert response.status_code == 403, (route.name, response.status_code)


def test_no_page_is_csrf_exempt(world: World):
    assert [route.name for route in page_routes(world) if getattr(route.callback, "csrf_exempt", False)] == []


def test_the_api_ignores_the_browser_session(world: World, curator: Client):
    # API views are csrf-exempt because they take only API keys: a logged-in browser gets 401.
    response = curator.post("/api/v1/sessions/", {"system_prompt": "forged"}, content_type="application/json")
    assert response.status_code == 401
