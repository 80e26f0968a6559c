"""Health endpoint, the configured backends, the production profile and the API docs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from memsite.celery import app as celery_app
from memsite.checks import check_job_dispatcher

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ENV = {
    "DJANGO_ENV": "production",
    "SECRET_KEY": "x7#kq2!v9m@p4z$w8r^t6y&u1i*o3e(a5s)d0f-g+h=j_k~l|b;n:c<v>x?",
    "ALLOWED_HOSTS": "memsite.example",
    "PATH": os.environ["PATH"],
}


@pytest.mark.django_db
def test_healthz_reports_database_and_broker_without_auth(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == {"ok": True, "info": connection.vendor}
    assert body["broker"]["ok"] is True


@pytest.mark.django_db
def test_healthz_says_503_when_the_broker_is_unreachable(client, monkeypatch):
    monkeypatch.setattr(celery_app.conf, "broker_url", "redis://127.0.0.1:1/0")
    # Settings pair a Redis URL with no transport of their own (the embedded broker's would win).
    monkeypatch.setitem(celery_app.conf, "broker_transport", None)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["broker"]["ok"] is False


@pytest.mark.every_leg
def test_the_configured_database_and_broker_are_the_ones_in_use():
    """In CI's second run DATABASE_URL/REDIS_URL are set: fail (not skip) if they are not used."""
    if os.environ.get("DATABASE_URL"):
        assert connection.vendor == "postgresql"
    else:
        assert connection.vendor == "sqlite"
        assert settings.DATABASES["default"]["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    if os.environ.get("REDIS_URL"):
        assert celery_app.conf.broker_url.startswith("redis://")
        assert celery_app.conf.broker_transport is None
    else:
        assert celery_app.conf.broker_url == "filesystem://"
        assert celery_app.conf.broker_transport == "memsite.filesystem_broker:Transport"
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=3)


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_production_refuses_to_start_without_a_secret_key():
    env = {k: v for k, v in PRODUCTION_ENV.items() if k != "SECRET_KEY"}
    result = run_manage("check", env=env)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_profile_passes_the_deploy_check_with_no_warnings():
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", env=PRODUCTION_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_a_malformed_boolean_setting_fails_loudly():
    result = run_manage("check", env={"DEBUG": "maybe", "PATH": os.environ["PATH"]})
    assert result.returncode != 0
    assert "DEBUG must be a boolean" in result.stderr


@pytest.mark.parametrize(
    "dispatcher",
    ["memory_app.jobs.dispatchers.CeleryDispatcher", "memory_app.jobs.dispatchers.RecordingDispatcher"],
)
def test_a_job_dispatcher_that_names_a_dispatcher_class_passes_the_check(settings, dispatcher):
    settings.JOB_DISPATCHER = dispatcher
    assert check_job_dispatcher() == []


@pytest.mark.parametrize(
    ("dispatcher", "problem"),
    [
        ("memory_app.jobs.dispatchers.CeleryDispatch", "cannot be imported"),
        ("memory_app.jobs.dispatchers.outbox", "is not a class with a send"),
        ("", "cannot be imported"),
    ],
)
def test_a_mistyped_job_dispatcher_is_refused_at_start_up(settings, dispatcher, problem):
    """A send swallows its errors (the row is durable), so the check is where a typo shows."""
    settings.JOB_DISPATCHER = dispatcher
    [error] = check_job_dispatcher()
    assert error.id == "memsite.E002" and problem in error.msg


def test_the_job_dispatcher_setting_is_read_from_the_environment():
    env = {"MEMSITE_JOB_DISPATCHER": "memory_app.jobs.dispatchers.Nope", "PATH": os.environ["PATH"]}
    result = run_manage("check", env=env)
    assert result.returncode != 0
    assert "memsite.E002" in result.stderr


@pytest.mark.django_db
def test_schema_and_swagger_ui_are_served_without_a_cdn(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/v1/sessions/{session_id}/messages/" in paths
    assert "/api/v1/sessions/{session_id}/context/" in paths
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "swagger-ui" in html
    for cdn in ("cdn.jsdelivr", "unpkg.com", "cdnjs"):
        assert cdn not in html
