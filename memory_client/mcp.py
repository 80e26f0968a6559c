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

A host loses every tool when this process dies, so nothing one answer holds may end it: each
request gets exactly one answer line, with its own id. The server's answer is read up to a size
cap (MEMSITE_MCP_MAX_ANSWER_BYTES, --max-answer-bytes), parsed strictly (no NaN or Infinity, no
nesting past MAX_ANSWER_DEPTH), and passed on only when it is the answer to that request: a
server notification or an answer carrying another id is not; anything else is answered with a
JSON-RPC error saying why.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Iterator
from typing import IO, Any

import httpx

from memory_client.vocabulary.strict_json import loads_strict
from memory_client.vocabulary.wire import RequestId, RpcAnswer, RpcFailure

PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
# JSON-RPC error codes this proxy answers with when the server gives no usable JSON-RPC answer.
UNREACHABLE = -32000
UNAUTHORIZED = -32001
UNUSABLE_ANSWER = -32603  # JSON-RPC's internal error: memsite answered, but nothing a host can be given
PARSE_ERROR = -32700
DEFAULT_TIMEOUT = 60.0
# memsite's answers are a tool's REST answer: a context within its token budget, a page of
# results. A few MiB is far above them and far below what would make this process a burden.
DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024
MAX_ANSWER_BYTES_ENV = "MEMSITE_MCP_MAX_ANSWER_BYTES"
# Levels of objects and arrays an answer may nest: memsite keeps bodies within 100 levels and
# wraps them in a few more; well below where Python's JSON decoder and encoder run out of stack.
MAX_ANSWER_DEPTH = 256


class UnusableAnswer(Exception):
    """Why memsite's answer to one request cannot be passed on to the host."""


class Proxy:
    """Forwards one JSON-RPC message at a time to `<url>/mcp/` with the API key."""

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        http: httpx.Client | None = None,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.endpoint = url.rstrip("/") + "/mcp/"
        self.http = http or httpx.Client(timeout=timeout)
        self.headers = {
            "Authorization": f"Bearer {api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        self.max_answer_bytes = max_answer_bytes
        self.negotiated_version: str | None = None  # set by a successful initialize

    def forward(self, line: str) -> RpcAnswer | None:
        """The answer to write back for one input line, or None (a notification, a blank line)."""
        if not line.strip():
            return None
        try:
            body = line.encode("utf-8")  # stdin keeps bytes that are not UTF-8 as lone surrogates
            message = strict_json(body)
        except ValueError as error:
            return _error(None, PARSE_ERROR, f"The line is not valid JSON: {error}")
        request_id = _request_id(message)
        expects_answer = isinstance(message, dict) and "id" in message
        try:
            with self.http.stream("POST", self.endpoint, content=body, headers=self._headers_for(message)) as response:
                if response.status_code == 202 or not expects_answer:
                    return None
                raw = _read_capped(response, self.max_answer_bytes)
        except httpx.HTTPError as error:
            return _error(request_id, UNREACHABLE, f"memsite at {self.endpoint} is unreachable: {error}")
        except UnusableAnswer as unusable:
            return _error(request_id, UNUSABLE_ANSWER, str(unusable))
        try:
            answer = _answer_in(raw, response.headers.get("content-type", ""), request_id)
        except UnusableAnswer as unusable:
            return _error(request_id, UNUSABLE_ANSWER, str(unusable))
        if answer is None:
            if response.is_success:
                return _error(request_id, UNUSABLE_ANSWER, "memsite's answer holds no answer to this request.")
            code = UNAUTHORIZED if response.status_code in (401, 403) else UNREACHABLE
            text = raw[:200].decode("utf-8", errors="replace")
            return _error(request_id, code, f"memsite answered HTTP {response.status_code}: {text}")
        answered_initialize = isinstance(message, dict) and message.get("method") == "initialize"
        result = answer.get("result")
        if answered_initialize and isinstance(result, dict):
            self.negotiated_version = result.get("protocolVersion")
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


def strict_json(text: str | bytes) -> Any:
    """JSON text as values, or ValueError: refuses NaN and Infinity (which Python's json reads by
    default and no JSON parser does) and nesting past MAX_ANSWER_DEPTH (which could not be
    written back)."""
    try:
        value = loads_strict(text)
    except RecursionError as error:  # the decoder's own stack, past ~1000 levels
        raise ValueError(f"nested more than {MAX_ANSWER_DEPTH} levels deep") from error
    if _nests_deeper_than(value, MAX_ANSWER_DEPTH):
        raise ValueError(f"nested more than {MAX_ANSWER_DEPTH} levels deep")
    return value


def _nests_deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` has objects or arrays more than `limit` levels deep; iterative, so any depth is safe."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def _request_id(message: Any) -> str | int | None:
    """The host's request id, when it is one JSON-RPC allows (else errors answer with null)."""
    request_id = message.get("id") if isinstance(message, dict) else None
    valid = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    return request_id if valid else None


def _read_capped(response: httpx.Response, limit: int) -> bytes:
    """The answer's bytes, or UnusableAnswer as soon as they pass `limit` (decompressed, as read)."""
    too_large = UnusableAnswer(
        f"memsite's answer is larger than {limit} bytes, this proxy's limit "
        f"({MAX_ANSWER_BYTES_ENV} or --max-answer-bytes)."
    )
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _answer_in(raw: bytes, content_type: str, request_id: RequestId) -> RpcAnswer | None:
    """The JSON-RPC answer to `request_id` in memsite's response body, None when it holds no
    JSON-RPC answer at all, UnusableAnswer when it cannot be read or answers another request."""
    try:
        messages = list(_events(raw)) if "text/event-stream" in content_type else [strict_json(raw)]
    except ValueError as error:
        raise UnusableAnswer(f"memsite's answer could not be read: {error}") from error
    answers: list[RpcAnswer] = [message for message in messages if _is_answer(message)]
    for answer in answers:
        if _same_id(answer["id"], request_id):
            return answer
    for answer in answers:
        if answer["id"] is None and "error" in answer:
            # JSON-RPC answers null when it could not read the request's id (memsite's 401 reads
            # no body): it is this request's error, which the host can only match by its id.
            return {**answer, "id": request_id}
    if answers:
        raise UnusableAnswer("memsite's answer answers another request (its id is not this request's).")
    return None


def _events(raw: bytes) -> Iterator[Any]:
    """The JSON messages of a text/event-stream body, one per event (its `data:` lines joined)."""
    data: list[str] = []
    for line in [*raw.decode("utf-8").splitlines(), ""]:
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            text = "\n".join(data)
            data = []
            if text.strip():  # an empty event primes a resumable stream; it carries no message
                yield strict_json(text)


def _is_answer(message: Any) -> bool:
    """An answer, not a server request or notification (those carry a `method`)."""
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and "method" not in message
        and "id" in message
        and ("result" in message) != ("error" in message)
    )


def _same_id(answer_id: Any, request_id: str | int | None) -> bool:
    return type(answer_id) is type(request_id) and answer_id == request_id  # 1 is not "1", nor True


def _error(request_id: RequestId, code: int, message: str) -> RpcFailure:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def serve(proxy: Proxy, stdin: IO[str], stdout: IO[str]) -> None:
    """Answer every line of `stdin` in order until it closes."""
    for line in stdin:
        try:
            answer = proxy.forward(line)
        except Exception as error:  # the backstop: one line must not cost the host every tool
            traceback.print_exc(file=sys.stderr)
            answer = _error(_request_id(_quiet_json(line)), UNUSABLE_ANSWER, f"memsite-mcp failed: {error!r}")
        if answer is not None:
            stdout.write(answer_line(answer))
            stdout.flush()


def _quiet_json(line: str) -> Any:
    try:
        return strict_json(line)
    except ValueError:
        return None


def answer_line(answer: RpcAnswer) -> str:
    """One line of JSON for the host; a lone surrogate in a string can only be written as its escape."""
    line = json.dumps(answer, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(answer)
    return line + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memory_client.mcp", description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("MEMSITE_URL"), help="memsite's base URL (MEMSITE_URL)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per call (60)")
    parser.add_argument(
        "--max-answer-bytes",
        type=_positive_int,
        # argparse converts a string default with `type`, so a bad environment value is refused alike
        default=os.environ.get(MAX_ANSWER_BYTES_ENV, str(DEFAULT_MAX_ANSWER_BYTES)),
        help=f"largest answer read from memsite, in bytes ({MAX_ANSWER_BYTES_ENV}, {DEFAULT_MAX_ANSWER_BYTES})",
    )
    args = parser.parse_args(argv)
    api_key = os.environ.get("MEMSITE_API_KEY")  # never an argument: process lists are readable by others
    if not args.url or not api_key:
        print("Set MEMSITE_URL and MEMSITE_API_KEY (memsite's base URL and an API key).", file=sys.stderr)
        return 2
    proxy = Proxy(args.url, api_key, timeout=args.timeout, max_answer_bytes=args.max_answer_bytes)
    # MCP's stdio transport is UTF-8 whatever the locale. Bytes that are not UTF-8 reach forward()
    # as lone surrogates, which answers that line with a parse error instead of ending the process.
    sys.stdin.reconfigure(encoding="utf-8", errors="surrogateescape")  # type: ignore[union-attr]
    sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[union-attr]
    try:
        serve(proxy, sys.stdin, sys.stdout)
    except KeyboardInterrupt:
        pass
    finally:
        proxy.close()
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number of bytes")
    return value


if __name__ == "__main__":
    sys.exit(main())
