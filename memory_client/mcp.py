"""memsite's MCP tools for local MCP hosts, over stdio: `python -m memory_client.mcp`.

Hosts such as Claude Desktop, Cursor or Codex start an MCP server as a command and talk
JSON-RPC over its stdin/stdout, one message per line. This command forwards each message to a
memsite server's `/mcp/` endpoint (Streamable HTTP) and writes the answer back, so the tools,
their validation and their errors are exactly the server's; nothing is duplicated here.

    MEMSITE_URL=https://memsite.example.com MEMSITE_API_KEY=msk_... python -m memory_client.mcp

Over HTTP, the current MCP revision repeats the protocol version, method and tool name in
headers; a stdio client cannot send headers, so this proxy sets them from each message, as
the HTTP client it is. For the initialize handshake it remembers the negotiated version and
sends it with every later request, as Streamable HTTP asks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import IO, Any

import httpx

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
# JSON-RPC error codes this proxy answers with when the server gives no JSON-RPC answer.
UNREACHABLE = -32000
UNAUTHORIZED = -32001
PARSE_ERROR = -32700
DEFAULT_TIMEOUT = 60.0


class Proxy:
    """Forwards one JSON-RPC message at a time to `<url>/mcp/` with the API key."""

    def __init__(
        self, url: str, api_key: str, *, timeout: float = DEFAULT_TIMEOUT, http: httpx.Client | None = None
    ) -> None:
        self.endpoint = url.rstrip("/") + "/mcp/"
        self.http = http or httpx.Client(timeout=timeout)
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        self.negotiated_version: str | None = None  # set by a successful initialize

    def forward(self, line: str) -> dict[str, Any] | None:
        """The answer to write back for one input line, or None (a notification, a blank line)."""
        if not line.strip():
            return None
        try:
            message = json.loads(line)
        except ValueError:
            return _error(None, PARSE_ERROR, "The line is not valid JSON.")
        request_id = message.get("id") if isinstance(message, dict) else None
        try:
            response = self.http.post(self.endpoint, content=line.encode(), headers=self._headers_for(message))
        except httpx.HTTPError as error:
            return _error(request_id, UNREACHABLE, f"memsite at {self.endpoint} is unreachable: {error}")
        if response.status_code == 202 or not isinstance(message, dict) or "id" not in message:
            return None
        answer = _json_rpc(response)
        if answer is None:
            code = UNAUTHORIZED if response.status_code in (401, 403) else UNREACHABLE
            return _error(request_id, code, f"memsite answered HTTP {response.status_code}: {response.text[:200]}")
        if message.get("method") == "initialize" and isinstance(answer.get("result"), dict):
            self.negotiated_version = answer["result"].get("protocolVersion")
        return answer

    def _headers_for(self, message: Any) -> dict[str, str]:
        headers = dict(self.headers)
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return headers
        params: dict[str, Any] = message["params"] if isinstance(message.get("params"), dict) else {}
        meta: dict[str, Any] = params["_meta"] if isinstance(params.get("_meta"), dict) else {}
        version = meta.get(PROTOCOL_VERSION_META)
        if isinstance(version, str):  # the current revision: every request names its version
            headers["MCP-Protocol-Version"] = version
            headers["Mcp-Method"] = message["method"]
            if message["method"] == "tools/call" and isinstance(params.get("name"), str):
                headers["Mcp-Name"] = _header_value(params["name"])
        elif self.negotiated_version and message["method"] != "initialize":
            headers["MCP-Protocol-Version"] = self.negotiated_version
        return headers

    def close(self) -> None:
        self.http.close()


def _header_value(value: str) -> str:
    """Tool names are ASCII tokens; anything else would not survive as a header (the server refuses it)."""
    return value if value.isascii() and value.isprintable() else ""


def _json_rpc(response: httpx.Response) -> dict[str, Any] | None:
    if "text/event-stream" in response.headers.get("content-type", ""):
        return _last_event(response.text)
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) and body.get("jsonrpc") == "2.0" else None


def _last_event(text: str) -> dict[str, Any] | None:
    """The JSON-RPC answer in an SSE body (the last `data:` event that is one)."""
    found = None
    for line in text.splitlines():
        if line.startswith("data:"):
            try:
                event = json.loads(line[5:].strip())
            except ValueError:
                continue
            if isinstance(event, dict) and ("result" in event or "error" in event):
                found = event
    return found


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def serve(proxy: Proxy, stdin: IO[str], stdout: IO[str]) -> None:
    """Answer every line of `stdin` in order until it closes."""
    for line in stdin:
        answer = proxy.forward(line)
        if answer is not None:
            stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")
            stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memory_client.mcp", description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("MEMSITE_URL"), help="memsite's base URL (MEMSITE_URL)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per call (60)")
    args = parser.parse_args(argv)
    api_key = os.environ.get("MEMSITE_API_KEY")  # never an argument: process lists are readable by others
    if not args.url or not api_key:
        print("Set MEMSITE_URL and MEMSITE_API_KEY (memsite's base URL and an API key).", file=sys.stderr)
        return 2
    proxy = Proxy(args.url, api_key, timeout=args.timeout)
    for stream in (sys.stdin, sys.stdout):  # MCP's stdio transport is UTF-8 whatever the locale
        stream.reconfigure(encoding="utf-8")  # type: ignore[union-attr]
    try:
        serve(proxy, sys.stdin, sys.stdout)
    except KeyboardInterrupt:
        pass
    finally:
        proxy.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
