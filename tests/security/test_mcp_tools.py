"""The MCP tools keep the API's roles and team scoping: every tool, every role, another team's ids.

A tool runs its REST endpoint as the calling key, so these are the REST guarantees seen through
MCP: a read key cannot call a writing tool and the refusal changes nothing; another team's key
finds nothing of this team's, by id or by search, and changes nothing either; and an argument no
API body may hold is refused for every tool and every role before the tool runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.apps import apps

from memory_app.mcp.tools import TOOLS
from memory_app.tenancy.models import ApiKey
from tests.conftest import Tenant
from tests.memory_app.mcp.rpc import call_tool, mcp_client
from tests.security.conftest import World

pytestmark = pytest.mark.django_db
READ, WRITE = ApiKey.Role.READ.value, ApiKey.Role.WRITE.value
RANK = {READ: 0, WRITE: 1, ApiKey.Role.ADMIN.value: 2}


def arguments(tool: str, ids: dict[str, str]) -> dict[str, Any]:
    """Arguments that succeed for the team that owns `ids`."""
    session = ids["session_id"]
    return {
        "memory_append": {"session_id": session, "messages": [{"role": "user", "content": "more"}]},
        "memory_context": {"session_id": session, "recall": "sky"},
        "memory_search": {"query": "sky", "session_id": session},
        "fact_add": {"role": "user", "subject": "grass", "predicate": "is", "object": "green", "session_id": session},
        "facts_query": {"subject": "sky", "session_id": session},
        "experiences_select": {"role": "user", "query": "greeting", "session_id": session},
        "agent_record_add": {
            "session_id": session,
            "agent": "developer",
            "kind": "discovery",
            "entry": {"type": "code_pattern", "content": "the sky is blue"},
        },
        "agent_record_prompt": {"session_id": session, "agent": "developer"},
        "events_list": {"session_id": session},
        "job_status": {"session_id": session},
        # the world's shared file (tests/security/conftest.py); an insert succeeds every time
        "memory_file": {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "x"},
        "memory_file_history": {"path": "/memories/notes.md"},
        "memory_file_revert": {"path": "/memories/notes.md", "version": 1},
    }[tool]


LEAST_ROLE = {
    "memory_append": WRITE,
    "memory_context": READ,
    "memory_search": READ,
    "fact_add": WRITE,
    "facts_query": READ,
    "experiences_select": WRITE,  # every selection is logged, as POST /experiences/select/ does
    "agent_record_add": WRITE,
    "agent_record_prompt": READ,
    "events_list": READ,
    "job_status": READ,
    "memory_file": WRITE,  # a read key may `view` (tests/memory_app/mcp/test_memory_file_tools.py)
    "memory_file_history": READ,
    "memory_file_revert": WRITE,
}


def snapshot() -> dict[str, list[dict[str, Any]]]:
    """Every row of both apps' tables but the usage ledger (a context read is counted, by design)."""
    return {
        model._meta.label: list(model.objects.order_by("pk").values())
        for app in ("memory_app", "experiences_app")
        for model in apps.get_app_config(app).get_models()
        if model._meta.model_name not in ("contextserve", "llmcall")
    }


def key_of(world: World, role: str) -> str:
    return world.clients[role]._credentials["HTTP_AUTHORIZATION"].split(" ", 1)[1]


def test_every_tool_is_classified():
    assert set(LEAST_ROLE) == set(TOOLS)
    assert {name for name, tool in TOOLS.items() if tool.read_only} == {n for n, r in LEAST_ROLE.items() if r == READ}


@pytest.mark.parametrize("tool", sorted(LEAST_ROLE))
def test_lower_roles_are_refused_and_change_nothing_and_the_least_role_succeeds(world: World, tool: str):
    least = LEAST_ROLE[tool]
    for role in (r for r in RANK if RANK[r] < RANK[least]):
        before = snapshot()
        result = call_tool(mcp_client(key_of(world, role)), tool, arguments(tool, world.ids))
        assert result["isError"] is True
        assert result["structuredContent"]["error"] == "permission_denied"
        assert result["structuredContent"]["status"] == 403
        assert snapshot() == before, (tool, role)
    for role in (r for r in RANK if RANK[r] >= RANK[least]):
        result = call_tool(mcp_client(key_of(world, role)), tool, arguments(tool, world.ids))
        assert result["isError"] is False, (tool, role, result["structuredContent"])


SESSION_TOOLS = sorted(name for name, tool in TOOLS.items() if "session_id" in tool.required)


@pytest.mark.parametrize("tool", SESSION_TOOLS)
def test_another_teams_session_is_not_found_and_nothing_changes(world: World, other_tenant: Tenant, tool: str):
    before = snapshot()
    result = call_tool(mcp_client(other_tenant.key), tool, arguments(tool, world.ids))
    assert result["isError"] is True
    assert (result["structuredContent"]["error"], result["structuredContent"]["status"]) == ("not_found", 404)
    assert "blue" not in str(result) and "hello" not in str(result)
    assert snapshot() == before


@pytest.mark.parametrize("tool", ["memory_search", "facts_query", "events_list", "experiences_select"])
def test_team_wide_tools_never_show_another_teams_memory(world: World, other_tenant: Tenant, tool: str):
    args = {k: v for k, v in arguments(tool, world.ids).items() if k != "session_id"}
    result = call_tool(mcp_client(other_tenant.key), tool, args)
    assert result["isError"] is False, result
    data = result["structuredContent"]
    found = data.get("results", data.get("selected"))
    assert found == [], data
    assert "blue" not in str(result) and "say hi" not in str(result)


def test_a_session_of_another_team_cannot_be_reached_by_its_external_id(world: World, other_tenant: Tenant):
    owner = mcp_client(key_of(world, WRITE))
    made = call_tool(
        owner,
        "memory_append",
        {"external_id": "shared-name", "create": True, "messages": [{"role": "user", "content": "owner's secret"}]},
    )
    assert made["isError"] is False
    other = call_tool(
        mcp_client(other_tenant.key),
        "memory_append",
        {"external_id": "shared-name", "messages": [{"role": "user", "content": "intruder"}]},
    )
    assert other["structuredContent"]["error"] == "not_found"
    mine = call_tool(
        mcp_client(other_tenant.key),
        "memory_append",
        {"external_id": "shared-name", "create": True, "messages": [{"role": "user", "content": "my own"}]},
    )
    assert mine["structuredContent"]["created"] is True
    assert mine["structuredContent"]["session_id"] != made["structuredContent"]["session_id"]
    context = call_tool(owner, "memory_context", {"session_id": made["structuredContent"]["session_id"]})
    assert [m["content"] for m in context["structuredContent"]["messages"]] == ["owner's secret"]


# Values no API body may hold, as the JSON text that carries them (some only text can: no encoder writes them).
HOSTILE_ARGUMENT_TEXT = {
    "NUL": r'"a\u0000b"',
    "lone surrogate": r'"a\ud800b"',
    "integer past 64 bits": str(10**20),
    "NaN": "NaN",
    "nested 5,000 deep": "[" * 5_000 + "]" * 5_000,
}
_HOLE = "__hostile_argument_here__"


def hostile_call(tool: str, ids: dict[str, str], value_text: str) -> bytes:
    """A tools/call whose first argument (otherwise a good call) holds `value_text`."""
    good = arguments(tool, ids)
    first = next(iter(good))
    params = {"name": tool, "arguments": {**good, first: _HOLE}}
    message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    return message.replace(f'"{_HOLE}"', value_text, 1).encode()


@pytest.mark.parametrize("tool", sorted(LEAST_ROLE))
def test_every_role_gets_hostile_arguments_refused_before_the_tool_runs(world: World, tool: str):
    before = snapshot()
    for role in RANK:
        client = mcp_client(key_of(world, role))
        for family, value_text in HOSTILE_ARGUMENT_TEXT.items():
            response = client.post("/mcp/", hostile_call(tool, world.ids, value_text), content_type="application/json")
            answer = response.json()
            assert response.status_code == 400, (role, family, response.content[:300])
            assert answer["id"] is None and "result" not in answer, (role, family, answer)
            assert answer["error"]["data"]["error"] in ("parse_error", "validation_error"), (role, family, answer)
    assert snapshot() == before
