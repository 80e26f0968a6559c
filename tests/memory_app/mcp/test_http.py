"""The MCP server under gunicorn, driven by the official MCP Python SDK over Streamable HTTP.

Each test runs in both protocol eras the SDK speaks: the current revision (2026-07-28, a
self-contained request each time) and the initialize handshake (2025-11-25).
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from mcp.shared.exceptions import MCPError

from memory_app.search import services as search
from memory_app.search.models import IndexRun
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey, Team
from tests.conftest import make_tenant
from tests.memory_app.mcp.conftest import MODES, Server, connect, leaf_error, run

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TOOL_NAMES = {
    "memory_append",
    "memory_context",
    "memory_search",
    "fact_add",
    "facts_query",
    "experiences_select",
    "agent_record_add",
    "agent_record_prompt",
    "events_list",
    "job_status",
    "memory_file",
    "memory_file_history",
    "memory_file_revert",
}
WEATHER_TURN = [
    {"role": "user", "content": "What is the weather in Oslo?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 4, "sky": "rain"}'},
    {"role": "assistant", "content": "It is 4 °C and raining in Oslo."},
]


def replayed(server: Server, key: str, context_id: str) -> dict[str, Any]:
    """GET /contexts/{id}/, asked again while the worker that served it has not written it yet."""
    for _ in range(40):
        response = rest(server, key, "GET", f"/api/v1/contexts/{context_id}/")
        if response.status_code != 404 or response.json()["error"] != "not_recorded_yet":
            break
        time.sleep(0.25)
    assert response.status_code == 200, response.text
    return response.json()


def rest(server: Server, key: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(
        method, f"{server.url}{path}", headers={"Authorization": f"Bearer {key}"}, timeout=30, **kwargs
    )


def index_now(team: Team) -> None:
    """Run the team's pending index runs here (no Celery worker runs in these tests)."""
    for run_id in IndexRun.objects.filter(team=team, status=IndexRun.Status.PENDING).values_list("pk", flat=True):
        search.search_index_execute(run_id=str(run_id))


@pytest.mark.parametrize("mode", MODES)
def test_lists_the_tools_with_input_schemas_and_hints(gunicorn: Server, mode: str):
    tenant = make_tenant("alpha")

    async def listing() -> Any:
        async with connect(gunicorn.mcp_url, tenant.key, mode=mode) as client:
            return client.protocol_version, client.server_info, client.instructions, (await client.list_tools()).tools

    version, server_info, instructions, tools = run(listing)
    assert version == {"auto": "2026-07-28", "legacy": "2025-11-25"}[mode]
    assert server_info is not None and server_info.name == "memsite"
    assert instructions and "memory_context" in instructions
    assert {tool.name for tool in tools} == TOOL_NAMES
    for tool in tools:
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"]), tool.name
        assert len(tool.description or "") > 80, tool.name
        assert not any(key.startswith("x-") for spec in schema["properties"].values() for key in spec)
    hints = {tool.name: tool.annotations.read_only_hint for tool in tools if tool.annotations}
    assert hints == {name: name not in WRITING for name in TOOL_NAMES}


WRITING = {"memory_append", "fact_add", "experiences_select", "agent_record_add", "memory_file", "memory_file_revert"}


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_keeps_and_reads_its_memory_through_every_tool(gunicorn: Server, mode: str, settings):
    tenant = make_tenant("alpha")
    admin = tenancy.api_key_create(team=tenant.team, name="admin", role=ApiKey.Role.ADMIN)[1]
    made = rest(
        gunicorn,
        admin,
        "POST",
        "/api/v1/experiences/",
        json={
            "exp_id": "oslo-weather",
            "who": ["assistant"],
            "when": "the user asks about the weather in Oslo",
            "what": "Give the temperature in Celsius.",
        },
    )
    assert made.status_code == 201, made.text
    approved = rest(gunicorn, admin, "POST", "/api/v1/experiences/oslo-weather/approve/", json={})
    assert approved.json()["status"] == "approved", approved.text

    async def session(client: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await client.call_tool(name, arguments)
        assert result.is_error is False, (name, result.content)
        assert json.loads(result.content[0].text) == result.structured_content or name == "agent_record_prompt"
        return result.structured_content

    async def work() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with connect(gunicorn.mcp_url, tenant.key, mode=mode) as client:
            first = await session(
                client,
                "memory_append",
                {
                    "external_id": "ticket-7",
                    "create": True,
                    "system_prompt": "You are a weather agent.",
                    "messages": WEATHER_TURN,
                },
            )
            again = await session(
                client,
                "memory_append",
                {"external_id": "ticket-7", "messages": [{"role": "user", "content": "And tomorrow?"}]},
            )
            sid = first["session_id"]
            seen["append"] = (first, again)
            seen["context"] = await session(client, "memory_context", {"session_id": sid, "max_tokens": 4000})
            seen["fact"] = await session(
                client,
                "fact_add",
                {
                    "subject": "oslo",
                    "predicate": "weather_today",
                    "object": "rain",
                    "role": "assistant",
                    "session_id": sid,
                },
            )
            seen["facts"] = await session(client, "facts_query", {"subject": "oslo"})
            seen["selected"] = await session(
                client,
                "experiences_select",
                {"role": "assistant", "query": "What is the weather in Oslo?", "session_id": sid},
            )
            seen["entry"] = await session(
                client,
                "agent_record_add",
                {
                    "session_id": sid,
                    "agent": "forecaster",
                    "kind": "attempt",
                    "entry": {"description": "call get_weather for Oslo", "result": "failure", "error": "timeout"},
                },
            )
            prompt = await client.call_tool("agent_record_prompt", {"session_id": sid, "agent": "forecaster"})
            seen["prompt"] = (prompt.content[0].text, prompt.structured_content)
            await session(client, "events_list", {"session_id": sid})
            extraction = rest(gunicorn, tenant.key, "POST", f"/api/v1/sessions/{sid}/extract-facts/", json={}).json()
            seen["jobs"] = await session(client, "job_status", {"session_id": sid, "job_id": extraction["id"]})
            seen["extraction"] = extraction
            await run_in_thread(index_now, tenant.team)
            seen["search"] = await session(client, "memory_search", {"query": "raining in Oslo", "session_id": sid})
            seen["recall"] = await session(
                client, "memory_context", {"session_id": sid, "recall": "weather in Oslo", "recall_kinds": ["fact"]}
            )
        return seen

    seen = run(work)
    first, again = seen["append"]
    sid = first["session_id"]
    assert first["created"] is True and [m["seq"] for m in first["messages"]] == [1, 2, 3, 4]
    assert again["created"] is False and again["session_id"] == sid and again["messages"][0]["seq"] == 5
    # One path per operation: the tool's context is the REST endpoint's, byte for byte, and each
    # answer names itself; the tool's served context replays as it was (a gunicorn worker may
    # still hold its batch: the replay then says so, and is asked again).
    again_served = rest(gunicorn, tenant.key, "GET", f"/api/v1/sessions/{sid}/context/", params={"max_tokens": 4000})
    tool_context_id = seen["context"].pop("context_id")
    assert again_served.json().pop("context_id") != tool_context_id
    assert seen["context"] == {k: v for k, v in again_served.json().items() if k != "context_id"}
    assert replayed(gunicorn, tenant.key, tool_context_id)["messages"] == seen["context"]["messages"]
    assert seen["context"]["messages"][0] == {"role": "system", "content": "You are a weather agent."}
    assert seen["context"]["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert [f["object"] for f in seen["facts"]["results"]] == ["rain"]
    assert seen["fact"]["id"] == seen["facts"]["results"][0]["id"]
    assert [e["exp_id"] for e in seen["selected"]["selected"]] == ["oslo-weather"], {
        k: v for k, v in seen["selected"].items() if k != "context"
    }
    assert seen["entry"]["id"] == "attempt-001"
    text, structured = seen["prompt"]
    assert "call get_weather for Oslo" in text and structured["text"] == text
    assert [run["id"] for run in seen["jobs"]["fact_extractions"]] == [seen["extraction"]["id"]]
    assert seen["jobs"]["compactions"] == []
    assert any("raining in Oslo" in hit["snippet"].replace("**", "") for hit in seen["search"]["results"])
    assert [memory["id"] for memory in seen["recall"]["recall"]["memories"]] == [seen["fact"]["id"]]
    relevant = seen["recall"]["messages"][1]
    assert relevant["role"] == "system" and "oslo weather today rain" in relevant["content"].replace("_", " ")


async def run_in_thread(function: Any, *args: Any) -> Any:
    import anyio

    return await anyio.to_thread.run_sync(function, *args)


@pytest.mark.parametrize("mode", MODES)
def test_bad_arguments_name_the_argument_and_write_nothing(gunicorn: Server, mode: str):
    tenant = make_tenant("alpha")
    cases = [
        ("memory_append", {"session_id": "not-a-uuid", "messages": [{"role": "user", "content": "x"}]}, "session_id"),
        ("memory_append", {"external_id": "t-9", "create": True, "messages": []}, "messages"),
        ("memory_append", {"messages": [{"role": "user", "content": "x"}]}, "session_id"),
        (
            "memory_append",
            {
                "external_id": "t-9",
                "create": True,
                "messages": [{"role": "user", "content": "fine"}, {"role": "robot", "content": "x"}],
            },
            "messages[1].role",
        ),
        ("memory_context", {"session_id": "00000000-0000-4000-8000-000000000000", "max_tokens": "lots"}, "max_tokens"),
        ("memory_search", {"query": "x", "sesion": "typo"}, "sesion"),
        ("memory_search", {"query": "x", "kinds": ["emails"]}, "kinds[0]"),
        ("fact_add", {"subject": "a", "predicate": "b", "object": "c", "role": "user", "confidence": 7}, "confidence"),
        (
            "agent_record_add",
            {"session_id": "00000000-0000-4000-8000-000000000000", "agent": "a/b", "kind": "attempt", "entry": {}},
            "agent",
        ),
    ]

    async def calls() -> list[Any]:
        async with connect(gunicorn.mcp_url, tenant.key, mode=mode) as client:
            return [await client.call_tool(name, arguments) for name, arguments, _ in cases]

    for (name, _, argument), result in zip(cases, run(calls), strict=True):
        assert result.is_error is True, name
        error = result.structured_content
        assert error["error"] == "validation_error" and error["status"] == 400, (name, error)
        assert argument in error["fields"], (name, argument, error["fields"])
        assert error["detail"].startswith(argument), error["detail"]
    sessions = rest(gunicorn, tenant.key, "GET", "/api/v1/sessions/").json()
    assert sessions["count"] == 0  # the failed create-and-append left no session behind


@pytest.mark.parametrize("mode", MODES)
def test_an_unknown_tool_is_a_protocol_error_listing_the_tools(gunicorn: Server, mode: str):
    tenant = make_tenant("alpha")

    async def call() -> Any:
        async with connect(gunicorn.mcp_url, tenant.key, mode=mode) as client:
            return await client.call_tool("memory_delete_everything", {})

    with pytest.raises((MCPError, ExceptionGroup)) as raised:
        run(call)
    error = leaf_error(raised.value)
    assert isinstance(error, MCPError) and error.error.code == -32602
    assert "memory_delete_everything" in error.error.message
    assert set(error.error.data["tools"]) == TOOL_NAMES


@pytest.mark.parametrize("mode", MODES)
def test_a_missing_or_revoked_key_cannot_connect(gunicorn: Server, mode: str):
    tenant = make_tenant("alpha")
    tenancy.api_key_revoke(api_key=tenant.api_key)

    for key in (None, tenant.key, "msk_guessed0000000000000000000000000000000"):

        async def listing(key: str | None = key) -> Any:
            async with connect(gunicorn.mcp_url, key, mode=mode) as client:
                return await client.list_tools()

        with pytest.raises((MCPError, ExceptionGroup)) as raised:
            run(listing)
        error = leaf_error(raised.value)
        assert isinstance(error, MCPError) and error.error.code == -32001, repr(error)
        assert error.error.message in ("Invalid or revoked API key.", "No API key: send 'Authorization: Bearer <key>'.")
    answer = httpx.post(gunicorn.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30)
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert answer.json()["error"]["data"] == {"error": "not_authenticated"}
    assert (
        httpx.get(gunicorn.mcp_url, timeout=30).json()["error"] == "not_authenticated"
    )  # not JSON-RPC: the API's shape


@pytest.mark.parametrize("mode", MODES)
def test_a_read_key_reads_but_cannot_write(gunicorn: Server, mode: str):
    tenant = make_tenant("alpha")
    reader = tenancy.api_key_create(team=tenant.team, name="reader", role=ApiKey.Role.READ)[1]
    sid = rest(gunicorn, tenant.key, "POST", "/api/v1/sessions/", json={"system_prompt": "be brief"}).json()["id"]

    async def calls() -> tuple[Any, Any]:
        async with connect(gunicorn.mcp_url, reader, mode=mode) as client:
            wrote = await client.call_tool(
                "memory_append", {"session_id": sid, "messages": [{"role": "user", "content": "sneaky"}]}
            )
            read = await client.call_tool("memory_context", {"session_id": sid})
            return wrote, read

    wrote, read = run(calls)
    assert wrote.is_error is True and wrote.structured_content["error"] == "permission_denied"
    assert read.is_error is False and read.structured_content["messages"] == [{"role": "system", "content": "be brief"}]


@pytest.mark.parametrize("mode", MODES)
def test_another_teams_key_finds_nothing_of_this_teams_memory(gunicorn: Server, mode: str):
    owner, intruder = make_tenant("alpha"), make_tenant("beta")
    body = {"role": "user", "subject": "vault", "predicate": "code", "object": "4711"}
    sid = rest(gunicorn, owner.key, "POST", "/api/v1/sessions/", json={"system_prompt": "secret keeper"}).json()["id"]
    rest(gunicorn, owner.key, "POST", "/api/v1/facts/", json={**body, "session": sid})

    async def calls() -> list[Any]:
        async with connect(gunicorn.mcp_url, intruder.key, mode=mode) as client:
            return [
                await client.call_tool("memory_context", {"session_id": sid}),
                await client.call_tool(
                    "memory_append", {"session_id": sid, "messages": [{"role": "user", "content": "x"}]}
                ),
                await client.call_tool("job_status", {"session_id": sid}),
                await client.call_tool("facts_query", {"subject": "vault"}),
                await client.call_tool("memory_search", {"query": "vault code"}),
            ]

    context, append, jobs, facts, found = run(calls)
    for refused in (context, append, jobs):
        assert refused.is_error is True and refused.structured_content["error"] == "not_found"
    assert facts.structured_content["results"] == [] and found.structured_content["results"] == []
    assert "4711" not in str([context, append, jobs, facts, found])
    messages = rest(gunicorn, owner.key, "GET", f"/api/v1/sessions/{sid}/messages/").json()["results"]
    assert messages == []
