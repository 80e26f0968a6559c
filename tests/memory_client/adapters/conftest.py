"""Adapters against the live server: a write key of the client tenant, and the scripted LLM server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Tenant
from tests.memory_client.adapters.langgraph_suite import NOT_APPLICABLE, SUITE_MODULES, RemoteStore

_LEFT_OUT = pytest.StashKey[list[tuple[str, str]]]()


@pytest.fixture
def memsite_env(server_url: str, client_tenant: Tenant) -> dict[str, str]:
    """The connection settings every adapter reads when not given base_url/api_key."""
    return {"base_url": server_url, "api_key": client_tenant.key}


def stored_messages(tenant: Tenant, external_id: str) -> list[dict[str, Any]]:
    """What the server keeps for the named session, as its REST API shows it."""
    found = tenant.client.get("/api/v1/sessions/", {"external_id": external_id}).json()["results"]
    assert len(found) == 1
    return tenant.client.get(f"/api/v1/sessions/{found[0]['id']}/messages/").json()["results"]


@pytest.fixture
def memsite_store_server(memsite_env: dict[str, str]) -> Iterator[None]:
    """The live server every RemoteStore of LangGraph's vendored store tests talks to."""
    RemoteStore.connection = memsite_env
    yield
    for store in RemoteStore.opened:
        store.close()
    RemoteStore.opened.clear()
    RemoteStore.connection = {}


def _not_applicable(item: pytest.Item) -> str | None:
    if item.path.name not in SUITE_MODULES:
        return None
    return NOT_APPLICABLE.get(getattr(item, "originalname", item.name))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (never skip) LangGraph's store tests that cannot apply to a remote store, and keep
    them for the summary: CI forbids skipped tests, and the list says why each one is left out."""
    left_out = [(item.nodeid, reason) for item in items if (reason := _not_applicable(item))]
    if not left_out:
        return
    names = {nodeid for nodeid, _ in left_out}
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid in names])
    items[:] = [item for item in items if item.nodeid not in names]
    config.stash[_LEFT_OUT] = left_out


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    left_out = config.stash.get(_LEFT_OUT, [])
    if left_out:
        terminalreporter.section("LangGraph store tests not applicable to a remote store (deselected)")
        for nodeid, reason in left_out:
            terminalreporter.line(f"{nodeid}: {reason}")
