"""The production profile: `check --deploy` clean, secrets required, docs private, no CORS wildcard."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from tests.security.conftest import World
from tests.url_routes import all_routes

ROOT = Path(__file__).resolve().parents[2]


def run_production(*args: str, secret_key: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "MEMSITE_API_DOCS_PUBLIC", "SECRET_KEY")}
    env.update(DJANGO_ENV="production", ALLOWED_HOSTS="memsite.example.com")
    if secret_key is not None:
        env["SECRET_KEY"] = secret_key
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_at_warning_level_in_production():
    result = run_production("check", "--deploy", "--fail-level", "WARNING", secret_key=secrets.token_urlsafe(64))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize("secret_key", [None, "short", "a" * 60], ids=["missing", "short", "repetitive"])
def test_production_refuses_to_start_without_a_strong_secret_key(secret_key):
    result = run_production("check", secret_key=secret_key)
    assert result.returncode != 0 and "SECRET_KEY" in result.stderr


def test_production_keeps_the_api_docs_private_and_debug_off():
    code = "from django.conf import settings; print(settings.API_DOCS_PUBLIC, settings.DEBUG)"
    result = run_production("shell", "--verbosity", "0", "-c", code, secret_key=secrets.token_urlsafe(64))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False"]


def test_no_cors_middleware_or_wildcard_is_configured():
    assert not any("cors" in middleware.lower() for middleware in settings.MIDDLEWARE)
    assert not any("cors" in app.lower() for app in settings.INSTALLED_APPS)
    assert getattr(settings, "CORS_ALLOW_ALL_ORIGINS", False) is False


@pytest.mark.django_db
def test_the_api_docs_answer_options_without_crashing(client):
    assert client.options("/api/docs/").status_code == 405
    assert client.options("/api/schema/").status_code == 200


@pytest.mark.django_db
def test_no_response_ever_carries_a_cors_wildcard(world: World, client):
    origin = {"HTTP_ORIGIN": "https://evil.example"}
    checked = 0
    for route in all_routes(**world.ids):
        responses = [client.get(route.path, **origin), client.options(route.path, **origin)]
        if route.is_api:
            api = world.clients["admin"]
            responses += [api.get(route.path, **origin), api.options(route.path, **origin)]
        for response in responses:
            assert response.get("Access-Control-Allow-Origin") in (None, ""), (route.name, dict(response.headers))
            assert "Access-Control-Allow-Credentials" not in response.headers
            checked += 1
    assert checked > 300
