"""A team with one of everything (so every route's lookups succeed) and a key of each role."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from experiences_app import services as experience_services
from experiences_app.models import SelectionLog
from memory_app.compaction.models import CompactionRun
from memory_app.facts.models import FactExtractionRun
from memory_app.models import WebhookDelivery
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey
from tests.conftest import Tenant


@dataclass
class World:
    ids: dict[str, str]  # URL kwargs naming the team's real objects (see tests/url_routes.py)
    clients: dict[str, APIClient]  # one client per ApiKey.Role


def client_for(raw_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


@pytest.fixture
def world(tenant: Tenant, settings) -> World:
    settings.LLM_BASE_URL, settings.LLM_BACKEND = "", ""  # selections use the offline backend
    api = tenant.client
    # A managed session with a turn before the protected one: there is something to compact.
    managed = {"system_prompt": "be brief", "memory_type": "managed_conversation"}
    session_id = api.post("/api/v1/sessions/", managed, format="json").json()["id"]
    message = api.post(
        f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": "hello"}, format="json"
    ).json()
    api.post(
        f"/api/v1/sessions/{session_id}/messages/",
        {
            "messages": [
                {"role": "assistant", "content": "hi"},
                {"role": "user", "content": "and?"},
                {"role": "assistant", "content": "done"},
            ]
        },
        format="json",
    )
    run = CompactionRun.objects.create(
        team=tenant.team, session_id=session_id, trigger="manual", status="done", covered_to_seq=1
    )
    fact = api.post(
        "/api/v1/facts/",
        {"role": "user", "subject": "sky", "predicate": "is", "object": "blue", "session": session_id},
        format="json",
    ).json()
    extraction = FactExtractionRun.objects.create(
        team=tenant.team, session_id=session_id, trigger="manual", status="quarantined", raw_output="not json"
    )
    experience_services.experience_create(
        team=tenant.team, exp_id="some-experience", who=[], when="greeting", what="say hi", actor="t"
    )
    log = SelectionLog.objects.create(team=tenant.team, role="user", query="hello", session_id=session_id)
    api.post(
        f"/api/v1/sessions/{session_id}/agents/developer/memory/attempts/",
        {"planStep": 1, "description": "try it"},
        format="json",
    )
    api.post(f"/api/v1/sessions/{session_id}/rounds/", {"user_query": "q", "id": "round-1"}, format="json")
    api.post(
        "/api/v1/memory-files/command/",
        {"command": "create", "path": "/memories/notes.md", "file_text": "the sky is blue\n"},
        format="json",
    )
    clients = {ApiKey.Role.WRITE.value: api}
    for role in (ApiKey.Role.READ, ApiKey.Role.ADMIN):
        _, raw = tenancy.api_key_create(team=tenant.team, name=f"{role}-key", role=role)
        clients[role.value] = client_for(raw)
    hook = clients[ApiKey.Role.ADMIN.value].post("/api/v1/webhooks/", {"url": "http://127.0.0.1:9/hook"}, format="json")
    delivery = WebhookDelivery.objects.create(
        team=tenant.team, webhook_id=hook.json()["id"], kind="compaction_completed", payload={}, status="failed"
    )
    ids = {
        "webhook_id": hook.json()["id"],
        "delivery_id": str(delivery.pk),
        "session_id": session_id,
        "message_id": message["message_id"],
        "run_id": str(run.pk),
        "fact_id": fact["id"],
        "extraction_id": str(extraction.pk),
        "selection_id": str(log.pk),
        # A context served by the API: its id names it to the replay endpoint.
        "context_id": api.get(f"/api/v1/sessions/{session_id}/context/").json()["context_id"],
    }
    return World(ids=ids, clients=clients)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # pytest 9.2 builds a Function's node id from `originalname` and its callspec only, and
    # schemathesis 4.32 passes the bare test name there: every operation's item would share one
    # id ("test_x" for all 67). Put the operation back ("test_x[GET /api/v1/sessions/]") so
    # reports, -k, --deselect and --lf tell the operations apart.
    for item in items:
        label = getattr(item, "operation_label", None)
        if label and f"[{label}]" not in item.nodeid:
            item._id = item._id.with_params(label)
