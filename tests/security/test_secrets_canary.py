"""Secrets never appear in API responses, admin pages, logs or task arguments (a canary test).

The secrets: the LLM API key, Django's SECRET_KEY and the API-key HMAC secret, every raw API
key and its stored digest, an admin user's password and its hash. The data: a session filled
through every flow (tests/security/canary_data.py), so every page and endpoint has rows to show.
"""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import get_resolver, reverse
from django.urls.resolvers import URLPattern, URLResolver
from rest_framework.test import APIClient

from experiences_app.models import SelectionLog
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Message
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.models import ContextServe, Webhook, WebhookDelivery
from memory_app.rounds.models import Round
from memory_app.tenancy.models import ApiKey
from tests.conftest import Tenant, make_tenant
from tests.llm_server import Fail, Reply
from tests.security.canary_data import fill_session

LLM_KEY = "sk-LLMKEYcanary0b9e2c41d7"
DJANGO_SECRET = "DJSECRETcanary" + "x7Rq2mN8vB4kL1pZ9wE3tY6uI0oA5sD" * 2
HMAC_SECRET = "HMACSECRETcanary3fG7hJ2kL9mN4pQ8rS1tU6vW0xY5z"
ADMIN_PASSWORD = "ADMINPWcanary-9c1e77-correct-horse"
CONTENT = "CONTENTcanaryM3ss4g3"  # what agents wrote: fine in API bodies, never in task arguments


@pytest.fixture
def secrets(settings, db) -> dict[str, str]:
    settings.LLM_API_KEY = LLM_KEY
    settings.SECRET_KEY = DJANGO_SECRET
    settings.API_KEY_HMAC_SECRET = HMAC_SECRET
    return {"LLM_API_KEY": LLM_KEY, "SECRET_KEY": DJANGO_SECRET, "API_KEY_HMAC_SECRET": HMAC_SECRET}


@pytest.fixture
def world(secrets, settings, llm_server) -> dict[str, Any]:
    """A team with keys of every role, a filled session, a superuser; every secret listed."""
    settings.LLM_API_KEY = LLM_KEY  # llm_server set its own key
    writer = make_tenant("canary-team")
    admin_tenant = make_tenant("canary-team", role=ApiKey.Role.ADMIN)
    reader = make_tenant("canary-team", role=ApiKey.Role.READ)
    filled = fill_session(
        client=writer.client,
        admin=admin_tenant.client,
        team=writer.team,
        canary=CONTENT,
        settings=settings,
        llm_server=llm_server,
    )
    hook = admin_tenant.client.post("/api/v1/webhooks/", {"url": "http://127.0.0.1:9/hook"}, format="json").json()
    webhook = Webhook.objects.get(pk=hook["id"])
    WebhookDelivery.objects.create(team=writer.team, webhook=webhook, kind="compaction_completed", payload={"a": 1})
    settings.LLM_API_KEY = LLM_KEY
    user = get_user_model().objects.create_superuser("root", "root@example.com", ADMIN_PASSWORD)
    all_secrets = dict(secrets)
    all_secrets["admin password"] = ADMIN_PASSWORD
    all_secrets["webhook secret"] = hook["secret"]
    all_secrets["admin password hash"] = user.password.split("$")[-1]
    for tenant in (writer, admin_tenant, reader):
        all_secrets[f"raw key {tenant.api_key.role}"] = tenant.key
        all_secrets[f"raw key {tenant.api_key.role} without prefix"] = tenant.key.split("_", 1)[1]
        all_secrets[f"digest {tenant.api_key.role}"] = tenant.api_key.digest
    return {
        "writer": writer,
        "admin": admin_tenant,
        "session_id": filled.session_id,
        "user": user,
        "secrets": all_secrets,
    }


def assert_no_secret(text: str, secrets: dict[str, str], where: str) -> None:
    leaked = [name for name, value in secrets.items() if value and value in text]
    assert leaked == [], f"{where} shows {leaked}"


def body_text(response: Any) -> str:
    """The response body as text; a zip (exports) is opened and its files read."""
    content = b"".join(response.streaming_content) if getattr(response, "streaming", False) else response.content
    if content[:2] == b"PK":
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            return "\n".join(archive.read(name).decode("utf-8", "replace") for name in archive.namelist())
    return content.decode("utf-8", "replace") + "\n" + json.dumps(dict(response.items()))


# --- API: every GET route ----------------------------------------------------------------------


def _routes(patterns: list[Any], prefix: str = "") -> Iterator[str]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern)


def _path_values(session_id: str) -> dict[str, str]:
    message = Message.objects.filter(session_id=session_id).order_by("seq").first()
    return {
        "session_id": session_id,
        "message_id": str(message.pk),
        "run_id": str(CompactionRun.objects.filter(session_id=session_id).first().pk),
        "fact_id": str(Fact.objects.filter(session_id=session_id).first().pk),
        "extraction_id": str(FactExtractionRun.objects.filter(session_id=session_id).first().pk),
        "agent": "developer",
        "attempt_id": "attempt-001",
        "round_id": Round.objects.filter(session_id=session_id).first().round_id,
        "exp_id": "canary-exp",
        "selection_id": str(SelectionLog.objects.filter(session_id=session_id).first().pk),
        "webhook_id": str(Webhook.objects.get().pk),
        "delivery_id": str(WebhookDelivery.objects.get().pk),
        # The newest context served in the world (its replay holds the messages as sent).
        "context_id": str(
            ContextServe.objects.filter(session_id=session_id)
            .order_by("-created_at")
            .values_list("context_id", flat=True)
            .first()
        ),
    }


QUERY_VARIANTS = ["", "?format=yaml", "?format=text", "?format=rawko", "?include_invalidated=true", "?entity=Ada"]


def test_no_get_api_endpoint_shows_a_secret(world, settings) -> None:
    settings.SSE_MAX_SECONDS = 0.3  # the event stream is read to its end: keep it short
    values = _path_values(world["session_id"])
    urls = []
    for route in _routes(get_resolver().url_patterns):
        if not route.startswith("api/"):
            continue
        path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", lambda m: values[m.group(1)], route)
        urls.append(path)
    assert len(urls) > 40
    answered = 0
    for client in (world["writer"].client, world["admin"].client):
        for path in urls:
            for query in QUERY_VARIANTS:
                response = client.get(path + query)
                assert response.status_code < 500, (path + query, response.status_code)
                answered += response.status_code == 200
                assert_no_secret(body_text(response), world["secrets"], f"GET {path}{query}")
    assert answered > 100


def test_key_lists_and_errors_never_echo_a_key(world) -> None:
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION=f"Bearer {world['writer'].key}x")
    response = bad.get("/api/v1/sessions/")
    assert response.status_code == 401
    assert world["writer"].key not in body_text(response)


# --- admin: every changelist and change page as a superuser -------------------------------------


def test_no_admin_page_shows_a_secret(world) -> None:
    browser = APIClient()
    browser.force_login(world["user"])
    pages = 0
    for model, model_admin in admin.site._registry.items():
        opts = model._meta
        changelist = browser.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
        assert changelist.status_code == 200, opts.label
        assert_no_secret(body_text(changelist), world["secrets"], f"{opts.label} changelist")
        pages += 1
        for obj in model_admin.get_queryset(changelist.wsgi_request)[:5]:
            page = browser.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]))
            assert page.status_code == 200, (opts.label, obj.pk)
            assert_no_secret(body_text(page), world["secrets"], f"{opts.label} {obj.pk} change page")
            pages += 1
    assert pages > 30
    # The index and the team deletion summary too.
    assert_no_secret(body_text(browser.get("/admin/")), world["secrets"], "admin index")
    team = world["writer"].team
    confirm = browser.get(f"/admin/memory_app/team/{team.pk}/delete/")
    assert confirm.status_code == 200
    assert_no_secret(body_text(confirm), world["secrets"], "team delete confirmation")


def test_a_new_key_is_shown_once_on_its_creation_response_only(world) -> None:
    browser = APIClient()
    browser.force_login(world["user"])
    team = world["writer"].team
    created = browser.post("/admin/memory_app/apikey/add/", {"team": team.pk, "name": "once", "role": "read"})
    assert created.status_code == 200
    raw = re.search(r"<code>(msk_[\w-]+)</code>", created.content.decode()).group(1)
    key = ApiKey.objects.get(name="once")
    secrets = {"new raw key": raw, "new digest": key.digest}
    for path in ["/admin/memory_app/apikey/", f"/admin/memory_app/apikey/{key.pk}/change/", "/admin/"]:
        assert_no_secret(body_text(browser.get(path)), secrets, path)
    assert key.digest not in created.content.decode()


# --- logs: every record of every flow ----------------------------------------------------------


def _record_text(record: logging.LogRecord) -> str:
    parts = [record.getMessage(), repr(record.args), record.exc_text or "", str(record.__dict__)]
    if record.exc_info:
        parts.append(logging.Formatter().formatException(record.exc_info))
    return "\n".join(parts)


def test_no_log_record_of_any_flow_holds_a_secret(world, llm_server, caplog, settings) -> None:
    caplog.set_level(logging.DEBUG)  # everything, including the SDK's and httpx's debug lines
    writer: Tenant = world["writer"]
    # More flows with the LLM server: a compaction refused with 401, then one that succeeds.
    settings.LLM_BASE_URL = llm_server.base_url
    session_id = writer.client.post(
        "/api/v1/sessions/",
        {"memory_type": "managed_conversation", "memory_config": {"threshold_tokens": 100000}},
        format="json",
    ).json()["id"]
    turns = [{"role": r, "content": f"turn {i} " * 30} for i in range(6) for r in ("user", "assistant")]
    writer.client.post(f"/api/v1/sessions/{session_id}/messages/", {"messages": turns}, format="json")
    asked = len(llm_server.requests)
    llm_server.script(Fail(401, body='{"error": {"message": "bad key", "type": "invalid_request_error"}}'))
    run = writer.client.post(f"/api/v1/sessions/{session_id}/compact/")
    assert run.status_code == 202, run.content
    assert compaction.compaction_execute(run_id=run.json()["id"]) == "failed"
    llm_server.script(Reply(json.dumps({"user_request_summary": "u", "summary": "s", "salient_facts": []})))
    run = writer.client.post(f"/api/v1/sessions/{session_id}/compact/")
    assert compaction.compaction_execute(run_id=run.json()["id"]) == "done"
    assert len(llm_server.requests) == asked + 2
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION=f"Bearer {writer.key}x")
    bad.get("/api/v1/sessions/")
    assert caplog.records, "the flows log something"

    text = "\n".join(_record_text(record) for record in caplog.records)
    assert_no_secret(text, world["secrets"] | {"the refused key": writer.key + "x"}, "the logs")


def test_the_setup_flows_log_no_secret(secrets, settings, llm_server, caplog) -> None:
    """The world fixture's own flows (append, compaction, extraction, selection), captured from the start."""
    caplog.set_level(logging.DEBUG)
    settings.LLM_API_KEY = LLM_KEY
    tenant = make_tenant("log-team")
    fill_session(
        client=tenant.client,
        admin=make_tenant("log-team", role=ApiKey.Role.ADMIN).client,
        team=tenant.team,
        canary=CONTENT,
        settings=settings,
        llm_server=llm_server,
    )
    text = "\n".join(_record_text(record) for record in caplog.records)
    assert_no_secret(text, secrets | {"raw key": tenant.key, "digest": tenant.api_key.digest}, "the logs")


# --- task arguments: ids only --------------------------------------------------------------------


@pytest.fixture
def published(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every task message the app would publish (Celery.send_task is where apply_async ends)."""
    sent: list[dict[str, Any]] = []

    def send_task(self: Celery, name: str, args: Any = None, kwargs: Any = None, **options: Any) -> None:
        sent.append({"name": name, "args": list(args or ()), "kwargs": dict(kwargs or {}), "options": options})

    monkeypatch.setattr(Celery, "send_task", send_task)
    return sent


def _is_id(value: Any) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return True
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True


@pytest.mark.django_db(transaction=True)
def test_tasks_are_sent_with_ids_only(secrets, settings, llm_server, published) -> None:
    settings.LLM_API_KEY = LLM_KEY
    settings.FACTS_DEBOUNCE_SECONDS = 0
    tenant = make_tenant("task-team")
    fill_session(
        client=tenant.client,
        admin=make_tenant("task-team", role=ApiKey.Role.ADMIN).client,
        team=tenant.team,
        canary=CONTENT,
        settings=settings,
        llm_server=llm_server,
    )
    # Automatic jobs: a managed session over its threshold, a "kg" session's debounced extraction.
    managed = tenant.client.post(
        "/api/v1/sessions/",
        {"memory_type": "managed_conversation", "memory_config": {"threshold_tokens": 50}},
        format="json",
    ).json()["id"]
    kg = tenant.client.post("/api/v1/sessions/", {"memory_type": "kg"}, format="json").json()["id"]
    for sid in (managed, kg):
        body = {"messages": [{"role": "user", "content": f"{CONTENT} " * 40}, {"role": "assistant", "content": "ok"}]}
        assert tenant.client.post(f"/api/v1/sessions/{sid}/messages/", body, format="json").status_code == 201

    names = {message["name"] for message in published}
    assert {"memory_app.tasks.compact_session", "memory_app.tasks.extract_facts"} <= names, names
    for message in published:
        assert all(_is_id(arg) for arg in message["args"]), message
        assert message["kwargs"] == {}, message
        text = json.dumps(message, default=str)
        assert CONTENT not in text, message
        assert_no_secret(text, secrets | {"raw key": tenant.key, "digest": tenant.api_key.digest}, "a task message")
