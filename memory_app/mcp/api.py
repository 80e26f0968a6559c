"""`/mcp/`: the MCP server over Streamable HTTP, authenticated by the API's Bearer keys.

One POST, one JSON-RPC message, one JSON answer (protocol.py says why that is all either era
of the specification needs). The key is checked before the body is read, so an unauthenticated
caller learns nothing, not even the tool list, and no parser ever sees its body; tools then run
as that key (tools.py). The body is read by the REST API's own rules (memsite.parsers).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.exceptions import ParseError
from rest_framework.request import Request

from memory_app.mcp import protocol
from memory_app.mcp.protocol import Incoming, RpcError
from memory_app.mcp.tools import TOOLS, Call, ToolFailed, ToolResult
from memory_app.ops import metrics
from memory_app.tenancy.auth import ApiKeyAuthentication
from memory_app.tenancy.models import ApiKey
from memory_client.vocabulary.wire import ErrorBody, RequestId, RpcAnswer, RpcFailure
from memsite.api_errors import error_body, validation_error_body
from memsite.errors import InvalidInput
from memsite.parsers import parse_json

log = logging.getLogger("memsite.mcp")
SERVER_INFO: dict[str, str] = {
    "name": "memsite",
    "title": "memsite memory hub",
    "version": str(settings.SPECTACULAR_SETTINGS["VERSION"]),
}
INSTRUCTIONS = (
    "memsite keeps this team's agent memory: conversations (memory_append, memory_context), hybrid search over "
    "everything stored (memory_search), facts (fact_add, facts_query), curated experiences to follow "
    "(experiences_select), each agent's record of discoveries, attempts and decisions (agent_record_add, "
    "agent_record_prompt), and the background work on it (events_list, job_status). Before an LLM call, "
    "memory_context gives the messages to send within a token budget, with relevant memories when `recall` "
    "is given."
)
CAPABILITIES = {"tools": {"listChanged": False}}
# JSON-RPC leaves -32000..-32099 to servers: this one says the API key was refused (HTTP 401).
UNAUTHORIZED = -32001


@csrf_exempt  # a Bearer key authenticates every call; no cookie is ever read here
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    # Who is calling comes first, for every method: a caller without a key learns nothing.
    if not _origin_allowed(request):
        return JsonResponse(error_body("permission_denied", "This Origin may not call the MCP endpoint."), status=403)
    api_key = _authenticated_key(request)
    if isinstance(api_key, HttpResponse):
        return api_key
    if request.method != "POST":
        # No server-to-client stream: every answer is in the POST's response (spec: 405 for GET).
        response = _rpc_response(
            None, RpcError(protocol.INVALID_REQUEST, "Use POST: this server sends no stream."), 405
        )
        response["Allow"] = "POST"
        return response
    if request.content_type != "application/json":
        return _rpc_response(None, RpcError(protocol.INVALID_REQUEST, "Content-Type must be application/json."), 415)
    try:
        payload = _read_body(request)
    except BodyRefused as refused:
        # No id: a body that breaks the rules was not read as a request (JSON-RPC 2.0, section 5).
        return _rpc_response(None, refused.error, refused.status)
    headers = {name.lower(): value for name, value in request.headers.items()}
    try:
        incoming = protocol.read_message(payload, headers)
    except RpcError as error:
        return _rpc_response(protocol.answerable_id(payload), error, protocol.error_status(error, modern=True))
    if incoming is None or incoming.notification:
        return HttpResponse(status=202)
    try:
        result = _dispatch(incoming, request, api_key)
    except RpcError as error:
        return _rpc_response(incoming.id, error, protocol.error_status(error, modern=incoming.modern))
    return _json_response(protocol.answer(incoming, result, SERVER_INFO))


class BodyRefused(Exception):
    """The body breaks a rule of every API body: the JSON-RPC error and HTTP status that say which."""

    def __init__(self, error: RpcError, status: int) -> None:
        super().__init__(error.message)
        self.error = error
        self.status = status


def _read_body(request: HttpRequest) -> Any:
    """The body as the REST API's parser reads it (memsite.parsers.parse_json), or BodyRefused.

    Not JSON at all is a parse error; JSON breaking a body rule (NUL, lone surrogate, integer
    range, depth) an invalid request naming the field; either way `data` is the API's error shape.
    """
    try:
        return parse_json(request.body, encoding=request.encoding or settings.DEFAULT_CHARSET)
    except RequestDataTooBig as too_big:  # Django's DATA_UPLOAD_MAX_MEMORY_SIZE, read as the body is
        body = error_body("payload_too_large", str(too_big))
        raise BodyRefused(RpcError(protocol.INVALID_REQUEST, body["detail"], body), 413) from too_big
    except ParseError as not_json:
        body = error_body("parse_error", str(not_json.detail))
        raise BodyRefused(RpcError(protocol.PARSE_ERROR, "The body is not valid JSON.", body), 400) from not_json
    except InvalidInput as invalid:
        body = validation_error_body(invalid.fields)
        raise BodyRefused(RpcError(protocol.INVALID_REQUEST, body["detail"], body), 400) from invalid


def _dispatch(incoming: Incoming, request: HttpRequest, api_key: ApiKey) -> dict[str, Any]:
    method, params = incoming.method, incoming.params
    if method == "initialize" and not incoming.modern:
        return {
            "protocolVersion": protocol.negotiated_version(params.get("protocolVersion")),
            "capabilities": CAPABILITIES,
            "serverInfo": SERVER_INFO,
            "instructions": INSTRUCTIONS,
        }
    if method == "server/discover":
        return {
            "supportedVersions": list(protocol.MODERN_VERSIONS),
            "capabilities": CAPABILITIES,
            "instructions": INSTRUCTIONS,
            "cacheScope": "private",
            "ttlMs": 0,
        }
    if method == "ping":
        return {}
    if method == "tools/list":
        listing: dict[str, Any] = {"tools": [tool.describe() for tool in TOOLS.values()]}
        return {**listing, "cacheScope": "private", "ttlMs": 0} if incoming.modern else listing
    if method == "tools/call":
        return _call_tool(params, request, api_key)
    raise RpcError(protocol.METHOD_NOT_FOUND, f"Method not found: {method}")


def _call_tool(params: dict[str, Any], request: HttpRequest, api_key: ApiKey) -> dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments") or {}
    if not isinstance(name, str) or name not in TOOLS:
        raise RpcError(protocol.INVALID_PARAMS, f"Unknown tool: {name}", {"tools": list(TOOLS)})
    if not isinstance(arguments, dict):
        raise RpcError(protocol.INVALID_PARAMS, "`arguments` must be an object.")
    call = Call(request=request, api_key=api_key, arguments=arguments)
    started = time.monotonic()
    try:
        result: ToolResult | ToolFailed = TOOLS[name].call(call)
    except ToolFailed as failed:
        result = failed
    seconds = time.monotonic() - started
    outcome = "ok" if isinstance(result, ToolResult) else str(result.body.get("error") or "error")
    metrics.observe_mcp_call(tool=name, outcome=outcome, seconds=seconds)
    log.info(
        "mcp %s %s",
        name,
        outcome,
        extra={"tool": name, "outcome": outcome, "endpoint": call.endpoint, "duration_ms": round(seconds * 1000, 1)},
    )
    if isinstance(result, ToolFailed):
        error = {**result.body, "status": result.status}
        return {"content": [_text(json.dumps(error, ensure_ascii=False))], "structuredContent": error, "isError": True}
    return {"content": [_text(result.text)], "structuredContent": result.data, "isError": False}


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _authenticated_key(request: HttpRequest) -> ApiKey | HttpResponse:
    """The request's active API key, or the 401 answer (with the API's words for why)."""
    try:
        found = ApiKeyAuthentication().authenticate(Request(request))
    except exceptions.AuthenticationFailed as failed:
        return _unauthorized(request, str(failed.detail))
    if found is None:
        return _unauthorized(request, "No API key: send 'Authorization: Bearer <key>'.")
    return found[1]


def _unauthorized(request: HttpRequest, detail: str) -> HttpResponse:
    """HTTP 401 with `WWW-Authenticate`, as MCP's authorization rules ask.

    A POST of JSON, what a JSON-RPC message comes as, gets a JSON-RPC error in the body, which MCP
    clients show to their user ("Invalid or revoked API key.") instead of a bare status; anything
    else the API's error shape. The body of a caller without a valid key is never read, not even
    for its id: its id is null, which JSON-RPC allows for a request it could not read and clients
    match to the request they sent (the MCP SDK, memory_client.mcp).
    """
    body: ErrorBody | RpcFailure = error_body("not_authenticated", detail)
    if request.method == "POST" and request.content_type == "application/json":
        body = protocol.error_answer(None, RpcError(UNAUTHORIZED, detail, {"error": "not_authenticated"}))
    response = JsonResponse(body, status=401)
    response["WWW-Authenticate"] = 'Bearer realm="memsite"'
    return response


def _origin_allowed(request: HttpRequest) -> bool:
    """Browsers send Origin; a page of another site must not reach a local server (DNS rebinding)."""
    origin = request.headers.get("Origin")
    if not origin:
        return True
    if origin in settings.MCP_ALLOWED_ORIGINS:
        return True
    return urlsplit(origin).netloc == request.get_host()


def _rpc_response(request_id: RequestId, error: RpcError, status: int) -> JsonResponse:
    return _json_response(protocol.error_answer(request_id, error), status=status)


def _json_response(answer: RpcAnswer, status: int = 200) -> JsonResponse:
    # Strict JSON out: NaN or Infinity would break every client's parser, so they fail here, loudly.
    return JsonResponse(answer, status=status, json_dumps_params={"allow_nan": False})
