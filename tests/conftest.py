"""Shared fixtures: teams, keys and authenticated clients."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from memory_app import services
from memory_app.models import ApiKey, Team


@dataclass
class Tenant:
    team: Team
    key: str
    api_key: ApiKey
    client: APIClient


def make_tenant(name: str, role: str = ApiKey.Role.WRITE) -> Tenant:
    team = services.team_get_or_create(name=name)
    api_key, raw = services.api_key_create(team=team, name=f"{name}-key", role=role)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return Tenant(team=team, key=raw, api_key=api_key, client=client)


@pytest.fixture
def tenant(db) -> Tenant:
    return make_tenant("alpha")


@pytest.fixture
def other_tenant(db) -> Tenant:
    return make_tenant("beta")


@pytest.fixture
def api(tenant: Tenant) -> APIClient:
    return tenant.client


@pytest.fixture
def admin_api(tenant: Tenant) -> APIClient:
    """An admin key of the same team as `api` (team settings, approvals and purges need one)."""
    _, raw = services.api_key_create(team=tenant.team, name="alpha-admin", role=ApiKey.Role.ADMIN)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def session_id(api: APIClient) -> str:
    response = api.post("/api/v1/sessions/", {"system_prompt": "You are helpful"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


@pytest.fixture
def llm_server(settings):
    """The scripted OpenAI-compatible server, configured as the LLM backend."""
    import json

    from tests.llm_server import ScriptedLLMServer

    answer = {
        "user_request_summary": "the requests",
        "summary": "what happened",
        "salient_facts": [],
        "open_threads": [],
        "keep_images": [],
    }
    server = ScriptedLLMServer(default=lambda body: json.dumps(answer)).start()
    settings.LLM_BASE_URL = server.base_url
    settings.LLM_API_KEY = "sk-test-secret"
    settings.LLM_MODEL = "scripted-model"
    settings.LLM_TIMEOUT = 5.0
    yield server
    server.stop()


@pytest.fixture
def sent_tasks(monkeypatch) -> list[tuple[str, float]]:
    """Record compaction tasks instead of sending them to a broker (in-process tests)."""
    sent: list[tuple[str, float]] = []
    monkeypatch.setattr(
        "memory_app.compaction._send", lambda run_id, countdown=0: sent.append((str(run_id), countdown))
    )
    return sent
