"""/mcp/ in-process: the JSON-RPC and transport rules of both protocol eras, and that a tool is
its REST endpoint (same answer, same usage ledger, counted in the metrics)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from memory_app.usage.models import ContextServe
from tests.conftest import Tenant
from tests.memory_app.mcp.rpc import ENVELOPE, VERSION, call_tool, mcp_client, post, request
from tests.memsite.metrics_scrape import METRICS_TOKEN, parse, total

pytestmark = pytest.mark.django_db


@pytest.fixture
def mcp(tenant: Tenant) -> Client:
    return mcp_client(tenant.key)


@pytest.fixture
def session_id(tenant: Tenant) -> str:
    api = tenant.client
    sid = api.post("/api/v1/sessions/", {"system_prompt": "You help."}, format="json").json()["id"]
    messages = [{"role": "user", "content": "My cat is called Miso."}, {"role": "assistant", "content": "Hi Miso!"}]
    api.post(f"/api/v1/sessions/{sid}/messages/", {"messages": messages}, format="json")
    api.post("/api/v1/facts/", {"role": "user", "subject": "cat", "predicate": "name", "object": "Miso"}, format="json")
    attempt = {"description": "feed the cat", "result": "failure", "error": "no food"}
    api.post(f"/api/v1/sessions/{sid}/agents/coder/memory/attempts/", attempt, format="json")
    return sid


# --- the transport ---------------------------------------------------------------------------


def test_only_post_carries_messages(mcp: Client):
    for method in ("get", "put", "patch", "delete"):
        response = getattr(mcp, method)("/mcp/")
        assert response.status_code == 405 and response["Allow"] == "POST", method
        assert response.json()["error"]["code"] == -32600


def test_the_path_without_its_slash_is_the_same_endpoint(mcp: Client):
    response = mcp.post(
        "/mcp", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}), content_type="application/json"
    )
    assert response.status_code == 200 and response.json()["result"] == {}


def test_a_body_that_is_not_json_is_a_parse_error(mcp: Client):
    response = mcp.post("/mcp/", "{not json", content_type="application/json")
    assert response.status_code == 400
    answer = response.json()
    assert answer["id"] is None and answer["error"]["code"] == -32700
    assert answer["error"]["message"] == "The body is not valid JSON."
    assert answer["error"]["data"]["error"] == "parse_error"  # the REST API's words for the same body
    assert answer["error"]["data"]["detail"].startswith("JSON parse error - ")


def test_a_body_of_another_type_is_refused(mcp: Client):
    response = mcp.post("/mcp/", "method=ping", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415


@pytest.mark.parametrize(
    "message",
    [
        [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],  # batches left JSON-RPC in MCP 2025-06-18
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "method": ""},
        {"jsonrpc": "2.0", "id": {"no": 1}, "method": "ping"},
        "ping",
    ],
)
def test_a_message_that_is_not_a_json_rpc_request_is_an_invalid_request(mcp: Client, message):
    response = post(mcp, message)
    assert response.status_code == 400 and response.json()["error"]["code"] == -32600


def test_notifications_and_client_answers_are_accepted_without_a_body(mcp: Client):
    for message in (
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 5, "result": {}},
    ):
        response = post(mcp, message)
        assert response.status_code == 202 and response.content == b""


def test_another_sites_page_cannot_call_it_but_the_servers_own_and_allowed_origins_can(mcp: Client, settings):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert post(mcp, ping, Origin="http://evil.example").status_code == 403
    assert post(mcp, ping, Origin="http://testserver").status_code == 200
    settings.MCP_ALLOWED_ORIGINS = ["http://ide.example:3000"]
    assert post(mcp, ping, Origin="http://ide.example:3000").status_code == 200


# --- the handshake era (2024-11-05 .. 2025-11-25) --------------------------------------------


@pytest.mark.parametrize(
    ("asked", "agreed"), [("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"), ("1999-01-01", "2025-11-25")]
)
def test_initialize_agrees_on_the_clients_version_or_offers_the_newest(mcp: Client, asked: str, agreed: str):
    params = {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    result = post(mcp, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}).json()["result"]
    assert result["protocolVersion"] == agreed
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "memsite"
    assert "Mcp-Session-Id" not in post(mcp, {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": params})


def test_an_unsupported_version_header_is_refused(mcp: Client):
    response = post(mcp, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, **{"MCP-Protocol-Version": "2000-01-01"})
    assert response.status_code == 400
    assert "2025-11-25" in response.json()["error"]["data"]["supported"]


def test_an_unknown_method_is_method_not_found(mcp: Client):
    answer = post(mcp, {"jsonrpc": "2.0", "id": 7, "method": "resources/list"}).json()
    assert answer == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32601, "message": "Method not found: resources/list"},
    }


# --- the current era (2026-07-28) ------------------------------------------------------------


def test_discover_names_the_version_capabilities_and_server(mcp: Client):
    response = request(mcp, "server/discover")
    result = response.json()["result"]
    assert result["supportedVersions"] == [VERSION]
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "memsite"


def test_every_result_says_its_type(mcp: Client):
    assert request(mcp, "tools/list").json()["result"]["resultType"] == "complete"


@pytest.mark.parametrize(
    ("headers", "code"),
    [
        ({"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/list"}, -32020),  # disagrees with _meta
        ({"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/call"}, -32020),
        ({"Mcp-Method": "tools/list"}, -32020),
    ],
)
def test_headers_that_disagree_with_the_envelope_are_refused(mcp: Client, headers, code):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ENVELOPE}}
    response = post(mcp, body, **headers)
    assert response.status_code == 400 and response.json()["error"]["code"] == code


def test_a_tool_name_header_must_match_the_call(mcp: Client):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "events_list", "_meta": ENVELOPE}}
    response = post(mcp, body, **{"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/call", "Mcp-Name": "x"})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32020


def test_an_unknown_version_is_refused_naming_the_supported_ones(mcp: Client):
    meta = {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    response = post(mcp, body, **{"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "server/discover"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32022
    assert response.json()["error"]["data"] == {"supported": [VERSION], "requested": "2099-01-01"}


def test_a_request_without_its_envelope_is_invalid_params(mcp: Client):
    body = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}}
    response = post(mcp, body, **{"MCP-Protocol-Version": VERSION, "Mcp-Method": "server/discover"})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32602


def test_unknown_methods_and_tools_are_protocol_errors(mcp: Client):
    assert request(mcp, "prompts/list").status_code == 404
    unknown = request(mcp, "tools/call", {"name": "drop_tables", "arguments": {}})
    assert unknown.status_code == 400 and unknown.json()["error"]["code"] == -32602
    not_an_object = request(mcp, "tools/call", {"name": "events_list", "arguments": [1]})
    assert not_an_object.json()["error"] == {"code": -32602, "message": "`arguments` must be an object."}


# --- a tool is its REST endpoint ------------------------------------------------------------


def test_read_tools_answer_exactly_what_their_endpoints_answer(mcp: Client, tenant: Tenant, session_id: str):
    api = tenant.client
    pairs = [
        (
            "memory_context",
            {"session_id": session_id, "max_tokens": 50},
            f"/api/v1/sessions/{session_id}/context/",
            {"max_tokens": 50},
        ),
        ("facts_query", {"subject": "cat"}, "/api/v1/facts/", {"subject": "cat"}),
        ("events_list", {"session_id": session_id}, "/api/v1/events/", {"session": session_id}),
        (
            "agent_record_prompt",
            {"session_id": session_id, "agent": "coder"},
            f"/api/v1/sessions/{session_id}/agents/coder/memory/prompt/",
            {},
        ),
    ]
    for tool, arguments, path, query in pairs:
        result = call_tool(mcp, tool, arguments)
        assert result["isError"] is False, (tool, result)
        by_rest = api.get(path, query).json()
        # Each context read is its own, under its own id: the rest is the same answer.
        if tool == "memory_context":
            assert result["structuredContent"].pop("context_id") != by_rest.pop("context_id")
        assert result["structuredContent"] == by_rest, tool
    by_mcp = call_tool(mcp, "memory_search", {"query": "cat", "session_id": session_id})["structuredContent"]
    by_rest = api.post("/api/v1/search/", {"query": "cat", "session": session_id}, format="json").json()
    # A score decays with age by the microsecond: compare what was found, in order, and its text.
    assert [(r["kind"], r["id"], r["text"]) for r in by_mcp["results"]] == [
        (r["kind"], r["id"], r["text"]) for r in by_rest["results"]
    ]
    assert by_mcp["results"]


def test_errors_carry_the_endpoints_code_and_fields_named_as_arguments(mcp: Client, tenant: Tenant):
    body = {"role": "user", "subject": "a", "predicate": "b", "object": "c", "confidence": 3, "session": "nope"}
    by_rest = tenant.client.post("/api/v1/facts/", body, format="json").json()
    by_mcp = call_tool(mcp, "fact_add", {**{k: v for k, v in body.items() if k != "session"}})["structuredContent"]
    assert by_mcp["error"] == by_rest["error"] == "validation_error"
    assert by_mcp["fields"]["confidence"] == by_rest["fields"]["confidence"]
    assert by_mcp["status"] == 400
    bad_session = call_tool(mcp, "facts_query", {"session_id": "nope"})["structuredContent"]
    assert bad_session["fields"] == {"session_id": ["Must be a valid UUID."]}
    bad_entry = call_tool(
        mcp,
        "agent_record_add",
        {
            "session_id": tenant.client.post("/api/v1/sessions/", {}, format="json").json()["id"],
            "agent": "coder",
            "kind": "attempt",
            "entry": {"result": "maybe"},
        },
    )["structuredContent"]
    assert {"entry.description", "entry.result"} <= set(bad_entry["fields"]), bad_entry


def test_a_context_read_through_mcp_is_in_the_usage_ledger_like_any(mcp: Client, tenant: Tenant, session_id: str):
    call_tool(mcp, "memory_context", {"session_id": session_id, "agent": "helper"})
    tenant.client.get(f"/api/v1/sessions/{session_id}/context/", {"agent": "helper"})
    rows = list(ContextServe.objects.filter(session_id=session_id).values_list("agent", "served_tokens"))
    assert len(rows) == 2 and rows[0] == rows[1] and rows[0][0] == "helper"


def test_tool_calls_are_counted_by_tool_and_outcome(mcp: Client, session_id: str, settings):
    settings.METRICS_TOKEN = METRICS_TOKEN

    def scrape():
        return parse(Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {METRICS_TOKEN}").content.decode())

    before = scrape()
    call_tool(mcp, "memory_context", {"session_id": session_id})
    call_tool(mcp, "memory_context", {"session_id": "00000000-0000-4000-8000-000000000000"})
    after = scrape()
    for outcome in ("ok", "not_found"):
        name = "memsite_mcp_tool_calls_total"
        grown = total(after, name, tool="memory_context", outcome=outcome) - total(
            before, name, tool="memory_context", outcome=outcome
        )
        assert grown == 1, outcome
    assert (
        total(after, "memsite_http_requests_total", endpoint="/mcp/", method="POST")
        - total(before, "memsite_http_requests_total", endpoint="/mcp/", method="POST")
        == 2
    )


def test_an_append_retried_with_its_idempotency_key_is_stored_once(mcp: Client, tenant: Tenant, session_id: str):
    arguments = {
        "session_id": session_id,
        "messages": [{"role": "user", "content": "Feed Miso at six."}],
        "idempotency_key": "turn-3-of-agent-7",
    }
    first = call_tool(mcp, "memory_append", arguments)["structuredContent"]
    again = call_tool(mcp, "memory_append", arguments)["structuredContent"]
    assert again == first
    stored = tenant.client.get(f"/api/v1/sessions/{session_id}/messages/").json()["results"]
    assert [m["content"] for m in stored].count("Feed Miso at six.") == 1
