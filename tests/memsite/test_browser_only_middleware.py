"""API calls made with a key skip the browser's session, auth and messages middleware; pages and
the session-authenticated API (Swagger UI) keep all of it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memory_app.tenancy.models import TeamMembership

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser(tenant) -> Client:
    user = get_user_model().objects.create_user("dana", password="pw-not-used-here")
    TeamMembership.objects.create(team=tenant.team, user=user, is_admin=True)
    client = Client()
    client.force_login(user)
    return client


def test_an_api_key_call_skips_the_browser_session_even_with_its_cookies(tenant, browser):
    cookie = "; ".join(f"{name}={morsel.value}" for name, morsel in browser.cookies.items())
    response = tenant.client.get("/api/v1/sessions/", headers={"Cookie": cookie})
    assert response.status_code == 200
    request = response.wsgi_request
    assert not hasattr(request, "session") and not hasattr(request, "_messages")
    assert not response.cookies  # no session or CSRF cookie set or refreshed
    assert "Cookie" not in response.get("Vary", "")  # the answer depends on the key, never on cookies


def test_a_page_still_has_its_session_user_and_csrf_token(browser):
    response = browser.get("/")
    assert response.status_code == 200
    assert response.wsgi_request.user.username == "dana" and response.wsgi_request.session.session_key
    assert b"dana" in response.content
    assert b'name="csrfmiddlewaretoken"' in response.content or "csrftoken" in response.cookies


def test_the_api_docs_still_open_for_a_logged_in_user_without_a_key(browser, settings):
    settings.API_DOCS_PUBLIC = False
    assert browser.get("/api/schema/").status_code == 200
    assert Client().get("/api/schema/").status_code in (401, 403)
