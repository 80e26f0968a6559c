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
def session_id(api: APIClient) -> str:
    response = api.post("/api/v1/sessions/", {"system_prompt": "You are helpful"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]
