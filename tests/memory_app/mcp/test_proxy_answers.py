"""The stdio proxy (`python -m memory_client.mcp`) against answers no memsite should give.

Whatever comes back for one line (nesting past any parser's stack, NaN, a server notification, an
answer to another request, more bytes than the cap), the host gets one JSON-RPC answer for that
request, with its id, and the next line is served. The server is an httpx mock here, and a real
HTTP server for the command itself; no Django is involved (the proxy ships without it).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from memory_client.mcp import DEFAULT_MAX_ANSWER_BYTES, Proxy, serve
from tests.worker_process import ROOT

KEY = "msk_test"
SSE = "text/event-stream"
Reply = Callable[[dict[str, Any]], httpx.Response]


def strict_json(line: str) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(line, parse_constant=refuse)


def ping(request_id: int) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}) + "\n"


def result_for(request_id: Any, result: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {} if result is None else result}


def json_reply(body: str | bytes, status: int = 200, content_type: str = "application/json") -> httpx.Response:
    content = body.encode() if isinstance(body, str) else body
    return httpx.Response(status, content=content, headers={"content-type": content_type})


def events(*messages: Any) -> str:
    return "".join(f"event: message\ndata: {json.dumps(message)}\n\n" for message in messages)


def deep_json(depth: int) -> str:
    return '{"jsonrpc":"2.0","id":1,"result":' + '{"a":' * depth + "1" + "}" * depth + "}"


def proxy_with(first: Reply, *, max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> Proxy:
    """A proxy whose server answers the first request with `first` and every later one with its result."""
    seen: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        message = json.loads(request.content)
        seen.append(message)
        if len(seen) == 1:
            return first(message)
        return json_reply(json.dumps(result_for(message["id"], {"served": message["id"]})))

    http = httpx.Client(transport=httpx.MockTransport(handle))
    return Proxy("http://memsite.test", KEY, http=http, max_answer_bytes=max_answer_bytes)


def answers(proxy: Proxy, *lines: str) -> list[Any]:
    """Every line the proxy writes for `lines`, parsed strictly (NaN or Infinity fail the test)."""
    out = io.StringIO()
    serve(proxy, io.StringIO("".join(lines)), out)
    return [strict_json(line) for line in out.getvalue().splitlines()]


def assert_refused_then_served(written: list[Any], *, code: int, words: str) -> None:
    assert len(written) == 2, written
    refused, served = written
    assert refused["id"] == 1 and "result" not in refused, refused
    assert refused["error"]["code"] == code, refused
    assert words in refused["error"]["message"], refused
    assert served == result_for(2, {"served": 2})


# --- what the proxy must not pass on, and must not die of -----------------------------------


@pytest.mark.parametrize("depth", [5_000, 100_000])
def test_it_answers_a_deeply_nested_answer_with_an_error_and_serves_the_next_line(depth: int):
    proxy = proxy_with(lambda message: json_reply(deep_json(depth)))
    assert_refused_then_served(answers(proxy, ping(1), ping(2)), code=-32603, words="nested more than")


def test_it_refuses_nesting_it_could_read_but_not_write_back_safely():
    proxy = proxy_with(lambda message: json_reply(deep_json(300)))
    assert_refused_then_served(answers(proxy, ping(1), ping(2)), code=-32603, words="nested more than 256 levels")


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_it_never_writes_a_number_json_cannot_carry(constant: str):
    proxy = proxy_with(lambda message: json_reply('{"jsonrpc":"2.0","id":1,"result":{"score":' + constant + "}}"))
    assert_refused_then_served(answers(proxy, ping(1), ping(2)), code=-32603, words="not JSON")


def test_it_does_not_take_a_server_notification_for_the_answer():
    notification = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
    proxy = proxy_with(lambda message: json_reply(json.dumps(notification)))
    assert_refused_then_served(answers(proxy, ping(1), ping(2)), code=-32603, words="no answer to this request")


def test_it_picks_the_answer_out_of_a_stream_of_notifications():
    notification = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1, "total": 2}}
    stream = events(notification, result_for(1, {"the": "answer"}), notification)
    proxy = proxy_with(lambda message: json_reply(stream, content_type=SSE))
    written = answers(proxy, ping(1), ping(2))
    assert written == [result_for(1, {"the": "answer"}), result_for(2, {"served": 2})]


def test_a_stream_holding_only_a_notification_is_no_answer():
    stream = events({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    proxy = proxy_with(lambda message: json_reply(stream, content_type=SSE))
    assert_refused_then_served(answers(proxy, ping(1), ping(2)), code=-32603, words="no answer to this request")


@pytest.mark.parametrize("content_type", ["application/json", SSE])
def test_it_refuses_an_answer_to_another_request(content_type: str):
    other = result_for(99, {"secret": "of another request"})
    body = json.dumps(other) if content_type != SSE else events(other)
    proxy = proxy_with(lambda message: json_reply(body, content_type=content_type))
    written = answers(proxy, ping(1), ping(2))
    assert_refused_then_served(written, code=-32603, words="answers another request")
    assert "of another request" not in json.dumps(written[0])


def test_an_error_the_server_could_not_attach_to_an_id_reaches_the_host_with_the_requests():
    # JSON-RPC answers `id: null` when it could not read the request's id (memsite's 401 reads no body).
    refused = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Invalid or revoked API key."}}
    proxy = proxy_with(lambda message: json_reply(json.dumps(refused), status=401))
    written = answers(proxy, ping(1), ping(2))
    assert written[0] == {**refused, "id": 1}
    assert written[1] == result_for(2, {"served": 2})


def test_the_answer_with_the_requests_id_wins_over_an_error_without_one():
    unattached = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "some other message"}}
    stream = events(unattached, result_for(1, {"the": "answer"}))
    proxy = proxy_with(lambda message: json_reply(stream, content_type=SSE))
    assert answers(proxy, ping(1), ping(2))[0] == result_for(1, {"the": "answer"})


@pytest.mark.parametrize("declares_its_length", [True, False], ids=["content-length", "streamed"])
def test_it_caps_the_size_of_an_answer_naming_the_limit(declares_its_length: bool):
    big = json.dumps(result_for(1, {"text": "x" * 5_000})).encode()

    def reply(message: dict[str, Any]) -> httpx.Response:
        if declares_its_length:
            return json_reply(big)
        streamed = iter([big[:2_000], big[2_000:]])  # no Content-Length: the cap must count as it reads
        return httpx.Response(200, content=streamed, headers={"content-type": "application/json"})

    proxy = proxy_with(reply, max_answer_bytes=4_096)
    assert_refused_then_served(answers(proxy, ping(1), ping(2)), code=-32603, words="larger than 4096 bytes")


def test_an_answer_within_the_cap_is_passed_on_as_it_came():
    answer = result_for(1, {"text": "crème brûlée"})
    proxy = proxy_with(lambda message: json_reply(json.dumps(answer)), max_answer_bytes=4_096)
    assert answers(proxy, ping(1), ping(2))[0] == answer


def test_a_host_line_with_nan_is_a_parse_error_never_sent_on():
    sent: list[bytes] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return json_reply(json.dumps(result_for(2)))

    proxy = Proxy("http://memsite.test", KEY, http=httpx.Client(transport=httpx.MockTransport(handle)))
    written = answers(proxy, '{"jsonrpc":"2.0","id":NaN,"method":"ping"}\n', ping(2))
    assert written[0]["id"] is None and written[0]["error"]["code"] == -32700
    assert written[1] == result_for(2)
    assert len(sent) == 1


# --- the command itself ---------------------------------------------------------------------


class CannedAnswers(BaseHTTPRequestHandler):
    """Answers each POST with the body the request's id names in `server.canned`."""

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body: bytes = self.server.canned[message["id"]]  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def canned_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), CannedAnswers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_the_command_answers_every_line_and_exits_cleanly_whatever_the_server_sends(canned_server):
    canned_server.canned = {  # type: ignore[attr-defined]
        1: deep_json(100_000).encode(),
        2: b'{"jsonrpc":"2.0","id":2,"result":{"n":NaN}}',
        3: json.dumps(result_for(3, {"text": "y" * 3_000})).encode(),
        4: json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {}}).encode(),
        5: json.dumps(result_for(5, {"fine": True})).encode(),
    }
    env = {
        **os.environ,
        "MEMSITE_URL": f"http://127.0.0.1:{canned_server.server_address[1]}",
        "MEMSITE_API_KEY": KEY,
        "MEMSITE_MCP_MAX_ANSWER_BYTES": "2048",
    }
    done = subprocess.run(
        [sys.executable, "-m", "memory_client.mcp"],
        input="".join(ping(n) for n in range(1, 6)),
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    written = [strict_json(line) for line in done.stdout.splitlines()]
    assert [answer["id"] for answer in written] == [1, 2, 3, 4, 5]
    assert [answer.get("error", {}).get("code") for answer in written] == [-32603, -32603, -32603, -32603, None]
    assert "larger than 2048 bytes" in written[2]["error"]["message"]
    assert written[4]["result"] == {"fine": True}


def test_the_command_refuses_a_cap_that_is_not_a_positive_number():
    env = {**os.environ, "MEMSITE_URL": "http://127.0.0.1:9", "MEMSITE_API_KEY": KEY}
    done = subprocess.run(
        [sys.executable, "-m", "memory_client.mcp", "--max-answer-bytes", "0"],
        input="",
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--max-answer-bytes" in done.stderr
