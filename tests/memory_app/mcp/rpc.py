"""JSON-RPC to /mcp/ in-process, as an MCP client of the current revision sends it (envelope and headers)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from django.test import Client

VERSION = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "1"},
}
_ids = itertools.count(1)


def mcp_client(raw_key: str | None) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw_key}") if raw_key else Client()


def post(client: Client, message: Any, **headers: str) -> Any:
    """POST one raw message; the Django test response."""
    return client.post("/mcp/", json.dumps(message), content_type="application/json", headers=headers)


def request(client: Client, method: str, params: dict[str, Any] | None = None) -> Any:
    """A current-revision request; the response (its .json() is the JSON-RPC answer)."""
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": {**(params or {}), "_meta": ENVELOPE}}
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method}
    if method == "tools/call":
        headers["Mcp-Name"] = (params or {}).get("name", "")
    return post(client, body, **headers)


def call_tool(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The tools/call result: {content, structuredContent, isError, ...}."""
    response = request(client, "tools/call", {"name": name, "arguments": arguments})
    assert response.status_code == 200, response.content
    answer = response.json()
    assert "result" in answer, answer
    return answer["result"]
