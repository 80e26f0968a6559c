"""Adapters against the live server: a write key of the client tenant, and the scripted LLM server."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Tenant


@pytest.fixture
def memsite_env(server_url: str, client_tenant: Tenant) -> dict[str, str]:
    """The connection settings every adapter reads when not given base_url/api_key."""
    return {"base_url": server_url, "api_key": client_tenant.key}


def stored_messages(tenant: Tenant, external_id: str) -> list[dict[str, Any]]:
    """What the server keeps for the named session, as its REST API shows it."""
    found = tenant.client.get("/api/v1/sessions/", {"external_id": external_id}).json()["results"]
    assert len(found) == 1
    return tenant.client.get(f"/api/v1/sessions/{found[0]['id']}/messages/").json()["results"]
