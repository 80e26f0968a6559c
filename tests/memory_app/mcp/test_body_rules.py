"""/mcp/ reads a body by the REST API's rules, and only once the key is proven.

Every body an attacker's probe sent (nesting deeper than any parser's stack, NaN for an id, a
NUL or a lone surrogate in an argument, an integer past 64 bits, more bytes than the API takes)
is a JSON-RPC error with HTTP 400 (413 for size), naming why in `error.data`, and nothing is
stored. Without a valid key the body is never parsed: the answer is the same 401 whatever it holds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from memory_app.conversations.models import Message, Session
from memory_app.tenancy import services as tenancy
from tests.conftest import Tenant
from tests.memory_app.mcp.rpc import ENVELOPE, VERSION, mcp_client, post

pytestmark = pytest.mark.django_db

CURRENT_ERA_HEADERS = {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/call", "Mcp-Name": "memory_append"}


def strict_json(content: bytes) -> Any:
    """`content` as JSON, refusing NaN and Infinity (which Python's json accepts and no JSON parser must)."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(content, parse_constant=refuse)


def post_raw(client: Client, body: str | bytes, **headers: str) -> Any:
    return client.post("/mcp/", body, content_type="application/json", headers=headers)


def nested_text(depth: int, *, closed: bool = True) -> str:
    """`{"a":` `depth` times around 1 (unclosed: the probe's body, which stops before its end)."""
    return '{"a":' * depth + ("1" + "}" * depth if closed else "")


def append_with_arguments(arguments_text: str) -> str:
    """A current-era tools/call of memory_append whose `arguments` are the given JSON text."""
    params = json.dumps({"name": "memory_append", "_meta": ENVELOPE})[:-1] + ',"arguments":' + arguments_text + "}"
    return '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":' + params + "}"


def appended_message(content: str) -> str:
    """memory_append arguments storing one message of `content` (given as JSON string text)."""
    return '{"external_id":"probe","create":true,"messages":[{"role":"user","content":' + content + "}]}"


DEEP_PARAMS = '{"jsonrpc":"2.0","id":1,"method":"ping","params":' + nested_text(100_000, closed=False)
DEEP_CLOSED_PARAMS = '{"jsonrpc":"2.0","id":1,"method":"ping","params":' + nested_text(100_000) + "}"
DEEP_ARGUMENTS = append_with_arguments(nested_text(5_000))
NAN_ID = '{"jsonrpc":"2.0","id":NaN,"method":"ping"}'
HOSTILE_BODIES = {
    "params nested 100,000 deep, unclosed": DEEP_PARAMS,
    "params nested 100,000 deep": DEEP_CLOSED_PARAMS,
    "arguments nested 5,000 deep": DEEP_ARGUMENTS,
    "NaN for an id": NAN_ID,
    "not JSON": '{"jsonrpc":"2.0","id":1,',
    "not UTF-8": b'{"jsonrpc":"2.0","id":1,"method":"\xff"}',
}


@pytest.fixture
def mcp(tenant: Tenant) -> Client:
    return mcp_client(tenant.key)


def assert_refused(response: Any, *, code: int, status: int = 400) -> dict[str, Any]:
    """The JSON-RPC error answer (no id: the message was not read as a request); its `error`."""
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json"
    answer = strict_json(response.content)
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None and "result" not in answer, answer
    assert answer["error"]["code"] == code, answer
    return answer["error"]


def assert_nothing_stored() -> None:
    assert not Session.objects.exists()
    assert not Message.objects.exists()


# --- what the API refuses, /mcp/ refuses -----------------------------------------------------


@pytest.mark.parametrize("body", [DEEP_PARAMS, DEEP_CLOSED_PARAMS, DEEP_ARGUMENTS], ids=["unclosed", "params", "args"])
def test_it_refuses_a_body_nested_past_the_parsers_stack_as_a_parse_error(mcp: Client, body: str):
    error = assert_refused(post_raw(mcp, body, **CURRENT_ERA_HEADERS), code=-32700)
    assert error["data"]["error"] == "parse_error"
    assert "nested more than 100 levels deep" in error["data"]["detail"]
    assert_nothing_stored()


def test_it_refuses_nesting_past_the_apis_limit_naming_the_field(mcp: Client):
    response = post_raw(mcp, append_with_arguments(appended_message(nested_text(150))), **CURRENT_ERA_HEADERS)
    error = assert_refused(response, code=-32600)
    assert error["data"]["error"] == "validation_error"
    assert error["data"]["fields"] == {"params": ["nested more than 100 levels deep"]}
    assert_nothing_stored()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (r'"a\u0000b"', "NUL characters (U+0000) are not allowed"),
        (r'"a\ud800b"', "not valid Unicode: a lone UTF-16 surrogate (\\ud800-\\udfff) without its pair"),
        ("100000000000000000000", "integers must lie between -9223372036854775808 and 9223372036854775807"),
    ],
    ids=["nul", "lone-surrogate", "past-64-bits"],
)
def test_it_refuses_what_the_api_refuses_in_a_body_naming_the_field(mcp: Client, content: str, why: str):
    response = post_raw(mcp, append_with_arguments(appended_message(content)), **CURRENT_ERA_HEADERS)
    error = assert_refused(response, code=-32600)
    assert error["data"]["fields"] == {"params.arguments.messages[0].content": [why]}
    assert_nothing_stored()


@pytest.mark.parametrize(
    "body",
    [
        NAN_ID,
        '{"jsonrpc":"2.0","id":Infinity,"method":"ping"}',
        '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":-Infinity}}',
        '{"jsonrpc":"2.0","id":1e400,"method":"ping"}',  # a float literal that overflows to infinity
    ],
    ids=["nan-id", "infinity-id", "minus-infinity-param", "overflowing-float-id"],
)
def test_it_refuses_non_json_constants_and_never_echoes_them(mcp: Client, body: str):
    error = assert_refused(post_raw(mcp, body), code=-32700)
    assert error["data"]["error"] == "parse_error"


def test_an_append_with_a_non_json_constant_stores_nothing(mcp: Client):
    arguments = '{"external_id":"probe","create":true,"messages":[{"role":"user","content":"x","weight":NaN}]}'
    assert_refused(post_raw(mcp, append_with_arguments(arguments), **CURRENT_ERA_HEADERS), code=-32700)
    assert_nothing_stored()


def test_an_id_of_the_wrong_type_is_refused_without_being_echoed(mcp: Client):
    answer = post(mcp, {"jsonrpc": "2.0", "id": {"nested": [1]}, "method": "ping"}).json()
    assert answer["id"] is None and answer["error"]["code"] == -32600


def test_it_refuses_a_body_over_djangos_upload_limit_as_payload_too_large(mcp: Client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048  # below the body-size middleware's own cap
    body = append_with_arguments(appended_message(json.dumps("x" * 4096)))
    error = assert_refused(post_raw(mcp, body, **CURRENT_ERA_HEADERS), code=-32600, status=413)
    assert error["data"]["error"] == "payload_too_large"
    assert_nothing_stored()


@pytest.mark.parametrize("key", ["valid", None], ids=["with-a-key", "without-a-key"])
def test_a_body_over_the_apis_size_cap_is_413_before_anything_reads_it(tenant: Tenant, settings, key):
    settings.MAX_BODY_BYTES = 2048
    body = append_with_arguments(appended_message(json.dumps("x" * 4096)))
    response = post_raw(mcp_client(tenant.key if key else None), body, **CURRENT_ERA_HEADERS)
    assert response.status_code == 413
    assert response.json()["error"] == "payload_too_large"
    assert_nothing_stored()


def test_a_body_within_every_rule_still_appends(mcp: Client):
    nested = nested_text(90)  # within the API's 100 levels, with the envelope around it
    arguments = '{"external_id":"probe","create":true,"messages":[{"role":"user","content":"hi","structured_data":'
    response = post_raw(mcp, append_with_arguments(arguments + nested + "}]}"), **CURRENT_ERA_HEADERS)
    assert response.status_code == 200, response.content[:300]
    assert strict_json(response.content)["result"]["isError"] is False
    assert Message.objects.count() == 1


# --- authentication before the body ----------------------------------------------------------


@pytest.mark.parametrize("body", list(HOSTILE_BODIES.values()), ids=list(HOSTILE_BODIES))
@pytest.mark.parametrize("key", ["none", "wrong", "revoked"])
def test_it_answers_401_without_reading_the_body_of_a_caller_without_a_valid_key(
    tenant: Tenant, key: str, body: str | bytes
):
    if key == "revoked":
        tenancy.api_key_revoke(api_key=tenant.api_key)
    raw_key = {"none": None, "wrong": "msk_guessed0000000000000000000000000000000", "revoked": tenant.key}[key]
    response = post_raw(mcp_client(raw_key), body, **CURRENT_ERA_HEADERS)
    assert response.status_code == 401, response.content[:300]
    assert response["WWW-Authenticate"].startswith("Bearer")
    answer = strict_json(response.content)
    assert answer["id"] is None  # the body was not read, so its id is not known
    assert answer["error"]["code"] == -32001
    assert answer["error"]["data"] == {"error": "not_authenticated"}
    assert_nothing_stored()


def test_a_refused_key_gets_the_same_answer_whatever_the_body_holds(tenant: Tenant):
    tenancy.api_key_revoke(api_key=tenant.api_key)
    client = mcp_client(tenant.key)
    benign = post(client, {"jsonrpc": "2.0", "id": 1, "method": "ping"})
    for body in HOSTILE_BODIES.values():
        hostile = post_raw(client, body)
        assert (hostile.status_code, hostile.json()) == (benign.status_code, benign.json())
