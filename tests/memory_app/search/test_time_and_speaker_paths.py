"""Every way a message is written carries its time and its speaker into search: the REST append
(one message and a batch), the session import, MCP's memory_append, a round's post, and the
Python client (add and load_from_file) against a live server. Through each, the time given
(`occurred_at`) is the time the message's index item carries and the one `from`/`to` find it
by, and the speaker given (`name`; a post's `send_from`) is what the `agent` filter matches."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from memory_app.search.models import SearchItem, SearchKind
from memory_client import MemoryManager
from tests.conftest import Tenant, make_tenant
from tests.memory_app.mcp.rpc import call_tool, mcp_client
from tests.memory_app.search.test_indexing import run_index

pytestmark = pytest.mark.usefixtures("job_outbox")  # sends are recorded, never reach a broker

API = "/api/v1"
# (speaker, what they said, when: given with an offset, as stored in UTC). Both say "kayak", so
# only the filters tell them apart.
SAID = [
    ("Ana", "kayak trip on the lake", "2025-03-10T09:00:00+01:00", datetime(2025, 3, 10, 8, 0, tzinfo=UTC)),
    ("Ben", "kayak repair at the shop", "2025-05-20T18:30:00-04:00", datetime(2025, 5, 20, 22, 30, tzinfo=UTC)),
]
ANA, BEN = (text for _, text, _, _ in SAID)


def chat_messages() -> list[dict[str, Any]]:
    return [{"role": "user", "content": text, "name": who, "occurred_at": when} for who, text, when, _ in SAID]


def created(response: Any) -> Any:
    assert response.status_code in (200, 201), response.content
    return response.json()


def new_session(api: APIClient) -> str:
    return created(api.post(f"{API}/sessions/", {}, format="json"))["id"]


# --- the in-process write paths: each writes SAID into the tenant's team -----------------------------


def rest_append(api: APIClient, tenant: Tenant) -> None:
    session_id = new_session(api)
    for message in chat_messages():
        created(api.post(f"{API}/sessions/{session_id}/messages/", message, format="json"))


def rest_batch_append(api: APIClient, tenant: Tenant) -> None:
    session_id = new_session(api)
    created(api.post(f"{API}/sessions/{session_id}/messages/", {"messages": chat_messages()}, format="json"))


def session_import(api: APIClient, tenant: Tenant) -> None:
    document = {"memory_type": "conversation_history", "messages": chat_messages()}  # save_to_file's shape
    created(api.post(f"{API}/sessions/import/", document, format="json"))


def mcp_memory_append(api: APIClient, tenant: Tenant) -> None:
    arguments = {"external_id": "diary", "create": True, "messages": chat_messages()}
    result = call_tool(mcp_client(tenant.key), "memory_append", arguments)
    assert result["isError"] is False, result


def round_posts(api: APIClient, tenant: Tenant) -> None:
    rounds = f"{API}/sessions/{new_session(api)}/rounds/"
    round_id = created(api.post(rounds, {"user_query": "plan the weekend"}, format="json"))["id"]
    for who, text, when, _ in SAID:
        post = {"message": text, "send_from": who, "send_to": "User", "occurred_at": when}
        created(api.post(f"{rounds}{round_id}/posts/", post, format="json"))


# --- what every path must show ---------------------------------------------------------------------


def found(api: APIClient, **filters: Any) -> list[str]:
    """The messages a "kayak" search returns under the filters (every item of so small an index
    is a candidate of the vector engine, so the filters alone decide)."""
    body = {"query": "kayak", "kinds": [SearchKind.MESSAGE], **filters}
    return sorted(hit["text"] for hit in created(api.post(f"{API}/search/", body, format="json"))["results"])


def assert_time_and_speaker_reach_search(api: APIClient, team_id: int) -> None:
    run_index(team_id)

    items = SearchItem.objects.filter(team_id=team_id, kind=SearchKind.MESSAGE).select_related("message")
    assert sorted((item.message.content, item.occurred_at, item.agent) for item in items) == sorted(
        (text, stored, who) for who, text, _, stored in SAID
    )
    # (a) from/to find each message by the time it was said (both ends inclusive), not by when it was stored.
    assert found(api) == sorted([ANA, BEN])
    assert found(api, **{"from": "2025-03-10T08:00:00Z", "to": "2025-03-10T08:00:00Z"}) == [ANA]
    assert found(api, **{"from": "2025-03-01T00:00:00Z", "to": "2025-04-01T00:00:00Z"}) == [ANA]
    assert found(api, **{"from": "2025-05-20T22:30:00Z"}) == [BEN]
    assert found(api, to="2025-03-10T07:59:59Z") == []
    assert found(api, **{"from": "2025-06-01T00:00:00Z"}) == []  # as they were stored (today): no message
    # (b) the agent filter matches the speaker given.
    assert found(api, agent="Ana") == [ANA]
    assert found(api, agent="Ben") == [BEN]
    assert found(api, agent="Cleo") == []


@pytest.mark.parametrize(
    "write",
    [rest_append, rest_batch_append, session_import, mcp_memory_append, round_posts],
    ids=lambda write: write.__name__,
)
def test_time_and_speaker_reach_search(api: APIClient, tenant: Tenant, write: Callable[..., None]) -> None:
    write(api, tenant)

    assert_time_and_speaker_reach_search(api, tenant.team.pk)


# --- the Python client, against a live server --------------------------------------------------------


def client_add(memory: MemoryManager, tmp_path: Path) -> None:
    for who, text, when, _ in SAID:
        memory.add(role="user", content=text, name=who, occurred_at=when)


def client_load_from_file(memory: MemoryManager, tmp_path: Path) -> None:
    path = tmp_path / "memory.json"  # a marsys save_to_file document, with the times of its messages
    path.write_text(json.dumps({"memory_type": "conversation_history", "messages": chat_messages(), "timestamp": 0}))
    memory.load_from_file(str(path))


@pytest.fixture
def live_tenant(transactional_db: None) -> Tenant:
    return make_tenant("paths-client")


@pytest.mark.parametrize("write", [client_add, client_load_from_file], ids=lambda write: write.__name__)
def test_time_and_speaker_reach_search_from_the_python_client(
    live_server: Any, live_tenant: Tenant, tmp_path: Path, write: Callable[[MemoryManager, Path], None]
) -> None:
    memory = MemoryManager(base_url=live_server.url, api_key=live_tenant.key)
    try:
        write(memory, tmp_path)
    finally:
        memory.close()

    assert_time_and_speaker_reach_search(live_tenant.client, live_tenant.team.pk)
