"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for tests (real HTTP, real SDK).

Tests queue steps (a reply, an HTTP error with headers, a slow or held reply, garbage);
when the queue is empty a default responder answers. Every request body is recorded.

`POST /v1/embeddings` has a queue and a record of its own (`script_embeddings`,
`embedding_requests`), so embedding traffic never consumes a step meant for a chat call:
its steps are `Vectors`, `Fail` and `Garbage`, and by default every input gets a deterministic,
unnormalised vector of `embedding_dimension` numbers derived from its text.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    text: str
    prompt_tokens: int = 11
    completion_tokens: int = 7
    delay: float = 0.0
    hold: threading.Event | None = None  # the reply waits until the test sets it


@dataclass
class Fail:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: str = '{"error": {"message": "scripted failure", "type": "server_error"}}'


@dataclass
class Garbage:
    body: str = "this is not json {"


@dataclass
class Vectors:
    """An embeddings reply: `rows` as given (None: the default vector of each input)."""

    rows: list[list[float]] | None = None
    delay: float = 0.0
    hold: threading.Event | None = None


@dataclass
class ToolCall:
    """One function call the model makes: `arguments` is the JSON string OpenAI sends."""

    name: str
    arguments: str = "{}"
    id: str = "call_1"


@dataclass
class ToolCallsReply:
    """An assistant reply that calls tools (finish_reason "tool_calls"), with optional text."""

    calls: list[ToolCall]
    text: str | None = None
    prompt_tokens: int = 11
    completion_tokens: int = 7


Step = Reply | Fail | Garbage | ToolCallsReply
EmbeddingStep = Vectors | Fail | Garbage


def text_vector(text: str, dimension: int) -> list[float]:
    """Numbers in [-1, 1) from the text's digest: the same text always gets the same vector."""
    digest = b""
    counter = 0
    while len(digest) < dimension * 2:
        digest += hashlib.blake2b(f"{counter}:{text}".encode()).digest()
        counter += 1
    return [value / 32768 for value in struct.unpack(f"<{dimension}h", digest[: dimension * 2])]


def completion(text: str, *, model: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop", "logprobs": None}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def tool_calls_completion(step: ToolCallsReply, *, model: str) -> dict[str, Any]:
    payload = completion(
        step.text or "", model=model, prompt_tokens=step.prompt_tokens, completion_tokens=step.completion_tokens
    )
    choice = payload["choices"][0]
    choice["finish_reason"] = "tool_calls"
    choice["message"]["content"] = step.text
    choice["message"]["tool_calls"] = [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
        for call in step.calls
    ]
    return payload


class ScriptedLLMServer:
    def __init__(self, default: Callable[[dict[str, Any]], str] | None = None, *, embedding_dimension: int = 8) -> None:
        self.steps: deque[Step] = deque()
        self.requests: list[dict[str, Any]] = []
        self.default = default or (lambda body: "scripted summary")
        self.embedding_steps: deque[EmbeddingStep] = deque()
        self.embedding_requests: list[dict[str, Any]] = []
        self.embedding_dimension = embedding_dimension
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/").endswith("/embeddings"):
                    with server._lock:
                        server.embedding_requests.append(body)
                        embedding_step = server.embedding_steps.popleft() if server.embedding_steps else None
                    server._answer_embeddings(self, body, embedding_step)
                    return
                with server._lock:
                    server.requests.append(body)
                    step = server.steps.popleft() if server.steps else None
                server._answer(self, body, step)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedLLMServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def script(self, *steps: Step) -> None:
        with self._lock:
            self.steps.extend(steps)

    def script_embeddings(self, *steps: EmbeddingStep) -> None:
        with self._lock:
            self.embedding_steps.extend(steps)

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], step: Step | None) -> None:
        if step is None:
            step = Reply(self.default(body))
        if isinstance(step, Fail):
            self._send(handler, step.status, step.body.encode(), step.headers)
            return
        if isinstance(step, Garbage):
            self._send(handler, 200, step.body.encode(), {})
            return
        if isinstance(step, ToolCallsReply):
            self._send(
                handler, 200, json.dumps(tool_calls_completion(step, model=body.get("model", "scripted"))).encode(), {}
            )
            return
        if step.hold is not None:
            step.hold.wait(timeout=60)
        if step.delay:
            time.sleep(step.delay)
        payload = completion(
            step.text,
            model=body.get("model", "scripted"),
            prompt_tokens=step.prompt_tokens,
            completion_tokens=step.completion_tokens,
        )
        self._send(handler, 200, json.dumps(payload).encode(), {})

    def _answer_embeddings(
        self, handler: BaseHTTPRequestHandler, body: dict[str, Any], step: EmbeddingStep | None
    ) -> None:
        if isinstance(step, Fail):
            self._send(handler, step.status, step.body.encode(), step.headers)
            return
        if isinstance(step, Garbage):
            self._send(handler, 200, step.body.encode(), {})
            return
        step = step or Vectors()
        if step.hold is not None:
            step.hold.wait(timeout=60)
        if step.delay:
            time.sleep(step.delay)
        inputs = body.get("input", [])
        inputs = [inputs] if isinstance(inputs, str) else inputs
        rows = step.rows if step.rows is not None else [text_vector(str(t), self.embedding_dimension) for t in inputs]
        as_base64 = body.get("encoding_format") == "base64"  # the SDK's default when not told
        data = [
            {
                "object": "embedding",
                "index": index,
                "embedding": base64.b64encode(struct.pack(f"<{len(row)}f", *row)).decode() if as_base64 else row,
            }
            for index, row in enumerate(rows)
        ]
        tokens = sum(len(str(t).split()) for t in inputs)
        payload = {
            "object": "list",
            "data": data,
            "model": body.get("model", "scripted"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        self._send(handler, 200, json.dumps(payload).encode(), {})

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str]) -> None:
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
            return
