"""Deny by default: every route of the URL resolver refuses a caller without credentials.

API routes answer 401/403 for every method; pages (dashboard, experiences, admin) redirect to a
login page. The routes come from the resolver (tests/url_routes.py), so a new route is checked
the moment it exists; only the allowlist below may answer anonymously, each with its reason.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from memory_app.tenancy import services as tenancy
from tests.url_routes import Route, all_routes, resolves_to_itself

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")

PUBLIC: dict[str, str] = {
    "healthz": "liveness probe for load balancers; reports ok/failing only, no data",
    "login": "the dashboard's login form",
    "logout": "logging out needs no login (Django's LogoutView)",
    "admin:login": "the admin's login form",
    "admin:logout": "logging out needs no login",
    "schema": "OpenAPI schema: public only while MEMSITE_API_DOCS_PUBLIC is on (the default outside "
    "production); see test_api_docs_need_credentials_when_not_public",
    "swagger-ui": "Swagger UI for the schema above, under the same setting",
}

# Not under api/ and not a page: refused with a JSON 401/403 (their own credentials), never a redirect.
TOKEN_PROTECTED: dict[str, str] = {
    "metrics": "Prometheus scrapes it with MEMSITE_METRICS_TOKEN; staff sessions may read it too",
}

ROUTES = all_routes()
LOGIN_PATHS = {reverse("login"), reverse("admin:login")}


def test_every_sample_path_reaches_its_own_route():
    assert [route.name for route in ROUTES if not resolves_to_itself(route)] == []


def test_the_allowlist_names_only_existing_routes():
    assert set(PUBLIC) <= {route.name for route in ROUTES}


def _login_chain(client: Client, method: str, route: Route) -> list[tuple[int, str]]:
    """(status, location) of the anonymous request and the redirects it leads to (followed with GET)."""
    response = client.generic(method.upper(), route.path)
    chain = [(response.status_code, response.get("Location", ""))]
    for _ in range(3):  # the admin's "<object_id>/" RedirectView goes to ".../change/" first
        status, location = chain[-1]
        if status not in (301, 302) or urlsplit(location).path in LOGIN_PATHS:
            break
        response = client.get(location)
        chain.append((response.status_code, response.get("Location", "")))
    return chain


@pytest.mark.parametrize("route", [r for r in ROUTES if r.name not in PUBLIC and r.is_api], ids=lambda r: r.name)
def test_api_routes_answer_401_without_a_key_for_every_method(route: Route):
    client = APIClient()
    answered = {method: getattr(client, method)(route.path, {}, format="json") for method in METHODS}
    statuses = {method: response.status_code for method, response in answered.items()}
    assert set(statuses.values()) <= {401, 403}, statuses
    for response in answered.values():
        assert response["Content-Type"] == "application/json"
        assert _error_code(response.json()) in ("not_authenticated", "authentication_failed", "permission_denied")


def _error_code(body: dict) -> str:
    """The API's error code, from its own shape or from a JSON-RPC error's data (/mcp/ answers a POST of JSON so)."""
    error = body["error"]
    return error if isinstance(error, str) else error["data"]["error"]


@pytest.mark.parametrize("route", [r for r in ROUTES if r.name not in PUBLIC and r.is_api], ids=lambda r: r.name)
def test_api_routes_refuse_revoked_and_malformed_keys(route: Route, tenant):
    tenancy.api_key_revoke(api_key=tenant.api_key)
    for header in (f"Bearer {tenant.key}", "Bearer msk_notakeyatall", "Basic YWRtaW46YWRtaW4=", "Bearer"):
        response = APIClient().get(route.path, HTTP_AUTHORIZATION=header)
        assert response.status_code == 401, (header, response.status_code)


# Bodies a parser must never see from a caller without credentials: a route that parsed before it
# authenticated would answer them 400 (or 500: nesting past the parser's stack), not its refusal.
WELL_FORMED_BODY = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}'
HOSTILE_BODIES: dict[str, bytes] = {
    "nested 100,000 deep": b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b'{"a":' * 100_000,
    "NaN": b'{"jsonrpc":"2.0","id":NaN,"method":"ping","params":{"n":NaN}}',
    "not JSON": b'{"unterminated": [1, ',
}
NO_CREDENTIALS: dict[str, dict[str, str]] = {
    "no key": {},
    "a wrong key": {"HTTP_AUTHORIZATION": "Bearer msk_guessed0000000000000000000000000000000"},
}


def _refusal(client: Client, method: str, route: Route, body: bytes, credentials: dict[str, str]) -> tuple:
    """(status, Location, JSON body or None) of one request: what a caller without credentials learns."""
    response = client.generic(method.upper(), route.path, body, content_type="application/json", **credentials)
    is_json = response.get("Content-Type") == "application/json"
    return response.status_code, response.get("Location", ""), response.json() if is_json else None


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.name)
def test_it_authenticates_before_it_reads_a_body_on_every_route(route: Route, settings):
    # For every method, a hostile body changes nothing in the answer to a caller without a valid
    # key: API routes answer 401, pages their login redirect, public routes their usual answer.
    # The login pages count each POST without credentials as a failed login; their throttle is not under test here.
    settings.LOGIN_MAX_FAILURES = settings.LOGIN_MAX_FAILURES_PER_IP = 1_000
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": route.name}}
    client = Client()
    for method in METHODS:
        for credentials in NO_CREDENTIALS.values():
            benign = _refusal(client, method, route, WELL_FORMED_BODY, credentials)
            for name, body in HOSTILE_BODIES.items():
                hostile = _refusal(client, method, route, body, credentials)
                assert hostile == benign, (method, name, credentials, hostile[:2], benign[:2])
                assert hostile[0] != 400 and hostile[0] < 500, (method, name, hostile)
                if route.is_api and route.name not in PUBLIC:
                    assert hostile[0] == 401, (method, name, credentials, hostile)


@pytest.mark.parametrize("route", [r for r in ROUTES if r.name in TOKEN_PROTECTED], ids=lambda r: r.name)
def test_token_protected_routes_refuse_anonymous_callers_for_every_method(route: Route):
    client = Client()
    for method in METHODS:
        response = client.generic(method.upper(), route.path)
        assert response.status_code in (401, 403, 405), (method, response.status_code)
        if response.status_code != 405:
            assert response.json()["error"] in ("not_authenticated", "permission_denied")
    assert client.get(route.path, HTTP_AUTHORIZATION="Bearer guessed-token").status_code == 403


@pytest.mark.parametrize(
    "route", [r for r in ROUTES if r.name not in PUBLIC | TOKEN_PROTECTED.keys() and not r.is_api], ids=lambda r: r.name
)
def test_pages_redirect_to_a_login_page_for_every_method(route: Route):
    client = Client()
    for method in METHODS:
        chain = _login_chain(client, method, route)
        assert chain[0][0] in (301, 302), (method, chain)
        assert urlsplit(chain[-1][1]).path in LOGIN_PATHS, (method, chain)


def test_a_logged_in_user_outside_every_team_sees_no_team_data(django_user_model, tenant):
    # Logged in is not enough: the team pages answer 403 to a user who belongs to no team.
    user = django_user_model.objects.create_user("stranger", password="pw-Stranger-1")
    client = Client()
    client.force_login(user)
    assert client.get(reverse("dashboard:sessions")).status_code == 403
    assert client.get(reverse("experiences:list")).status_code == 403
    assert client.get("/admin/").status_code == 302  # not staff: the admin's own login


def test_api_docs_need_credentials_when_not_public(settings, tenant, django_user_model):
    settings.API_DOCS_PUBLIC = False
    for name in ("schema", "swagger-ui"):
        assert APIClient().get(reverse(name)).status_code in (401, 403)
        assert tenant.client.get(reverse(name)).status_code == 200
    member = Client()
    member.force_login(django_user_model.objects.create_user("reader", password="pw-Reader-1"))
    assert member.get(reverse("schema")).status_code == 200


def test_healthz_reveals_only_reachability(settings):
    response = Client().get(reverse("healthz"))
    assert set(response.json()) == {"status", "database", "broker"}
    for secret in (settings.SECRET_KEY, settings.CELERY_BROKER_URL, settings.DATABASES["default"]["NAME"]):
        assert secret not in response.content.decode()
