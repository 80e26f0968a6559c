"""MCP's JSON-RPC messages over Streamable HTTP, both eras of the specification, stateless.

- 2026-07-28 (the current revision): every request is self-contained. `params._meta` carries
  the protocol version and client capabilities, the `MCP-Protocol-Version`, `Mcp-Method` and
  (for tools/call) `Mcp-Name` headers repeat them, `server/discover` replaces the handshake,
  and every result says `resultType`.
- 2024-11-05 to 2025-11-25: `initialize` negotiates a version, then plain requests follow.
  This server keeps no session between them (no `Mcp-Session-Id`), which those revisions allow.

Either way one POST carries one JSON-RPC message and gets one JSON answer (or 202 for a
notification), which is what a WSGI worker serves well: no stream is held open.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memory_client.vocabulary.wire import RequestId, RpcErrorObject, RpcFailure, RpcSuccess

MODERN_VERSIONS = ("2026-07-28",)
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[-1]
# Assumed for a handshake-era request without the header (Streamable HTTP, 2025-06-18 on).
DEFAULT_HANDSHAKE_VERSION = "2025-03-26"

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
UNSUPPORTED_PROTOCOL_VERSION = -32022

# The HTTP status of an error answer in the current revision (the SDKs' table); the older
# revisions answer a JSON-RPC error with 200, except a message that is not JSON-RPC at all.
_MODERN_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def as_error(self) -> RpcErrorObject:
        error: RpcErrorObject = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


@dataclass(frozen=True)
class Incoming:
    """One JSON-RPC message from the client, and the protocol era it speaks."""

    id: str | int | None
    method: str
    params: dict[str, Any]
    notification: bool  # no id: answered with 202 and no body
    version: str  # the revision this message follows

    @property
    def modern(self) -> bool:
        return self.version in MODERN_VERSIONS


def read_message(payload: Any, headers: dict[str, str]) -> Incoming | None:
    """The request in `payload` (decoded JSON), None for a client's JSON-RPC response, or RpcError."""
    if not isinstance(payload, dict) or payload.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, "Expected one JSON-RPC 2.0 message object (batches are not supported).")
    if "method" not in payload and ("result" in payload or "error" in payload):
        return None  # an answer to a server request; this server sends none, so it is only acknowledged
    method, params = payload.get("method"), payload.get("params", {})
    request_id = payload.get("id")
    if not isinstance(method, str) or not method:
        raise RpcError(INVALID_REQUEST, "`method` must be a non-empty string.")
    if request_id is not None and not _is_valid_id(request_id):
        raise RpcError(INVALID_REQUEST, "`id` must be a string or an integer.")
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "`params` must be an object.")
    return Incoming(request_id, method, params, "id" not in payload, _version_of(method, params, headers))


def answerable_id(payload: Any) -> str | int | None:
    """The id to answer a refused message with: its own when it is a valid id, else null.

    JSON-RPC 2.0 (section 5) answers null when the id could not be read; echoing an object or a
    float back would hand the client a value it never sent as an id.
    """
    request_id = payload.get("id") if isinstance(payload, dict) else None
    return request_id if _is_valid_id(request_id) else None


def _is_valid_id(request_id: Any) -> bool:
    return isinstance(request_id, str | int) and not isinstance(request_id, bool)  # a bool is an int to Python


def _version_of(method: str, params: dict[str, Any], headers: dict[str, str]) -> str:
    """The revision a message follows, after the checks that revision asks of it."""
    meta = params.get("_meta")
    header_version = headers.get(VERSION_HEADER.lower())
    carries_envelope = isinstance(meta, dict) and PROTOCOL_VERSION_META in meta
    if carries_envelope or method == "server/discover" or header_version in MODERN_VERSIONS:
        return _modern_version(method, params, headers)
    if header_version is None or method == "initialize":
        return DEFAULT_HANDSHAKE_VERSION
    if header_version not in HANDSHAKE_VERSIONS:
        raise RpcError(
            INVALID_REQUEST,
            f"Unsupported {VERSION_HEADER}: {header_version}",
            {"supported": [*HANDSHAKE_VERSIONS, *MODERN_VERSIONS], "requested": header_version},
        )
    return header_version


def _modern_version(method: str, params: dict[str, Any], headers: dict[str, str]) -> str:
    """The 2026-07-28 request ladder: the envelope, then the headers that mirror it, then the version."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or PROTOCOL_VERSION_META not in meta or CLIENT_CAPABILITIES_META not in meta:
        raise RpcError(
            INVALID_PARAMS,
            f"params._meta must carry {PROTOCOL_VERSION_META!r} and {CLIENT_CAPABILITIES_META!r}.",
        )
    version = meta[PROTOCOL_VERSION_META]
    if headers.get(VERSION_HEADER.lower()) != version:
        raise RpcError(HEADER_MISMATCH, f"The {VERSION_HEADER} header does not match params._meta's version.")
    if headers.get(METHOD_HEADER.lower()) != method:
        raise RpcError(HEADER_MISMATCH, f"The {METHOD_HEADER} header does not match the method.")
    if method == "tools/call" and params.get("name") is not None and headers.get(NAME_HEADER.lower()) != params["name"]:
        raise RpcError(HEADER_MISMATCH, f"The {NAME_HEADER} header does not match the tool name.")
    if not isinstance(version, str):
        raise RpcError(INVALID_PARAMS, "The protocol version must be a string.")
    if version not in MODERN_VERSIONS:
        raise RpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": list(MODERN_VERSIONS), "requested": version},
        )
    return version


def negotiated_version(requested: Any) -> str:
    """initialize: the client's version when this server speaks it, else the newest it does."""
    return requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION


def answer(incoming: Incoming | None, result: dict[str, Any], server_info: dict[str, str]) -> RpcSuccess:
    """A success answer; the current revision stamps every result with its type and the server."""
    if incoming is not None and incoming.modern:
        meta = {**result.get("_meta", {}), SERVER_INFO_META: server_info}
        result = {**result, "resultType": "complete", "_meta": meta}
    return {"jsonrpc": "2.0", "id": incoming.id if incoming else None, "result": result}


def error_answer(request_id: RequestId, error: RpcError) -> RpcFailure:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.as_error()}


def error_status(error: RpcError, *, modern: bool) -> int:
    if modern:
        return _MODERN_STATUS.get(error.code, 200)
    return 400 if error.code in (PARSE_ERROR, INVALID_REQUEST) else 200
