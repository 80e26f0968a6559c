"""A scripted Anthropic Messages API on 127.0.0.1 for tests (real HTTP, the real `anthropic` SDK).

Each `POST /v1/messages` takes the next scripted reply: a `ToolUse` (the model asks for a tool) or
a `Text` (the model is done). Every request body is kept, so a test reads what the model was sent
back for each tool call (the tool_result blocks of the last user message).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ToolUse:
    name: str
    input: dict[str, Any]


@dataclass
class Text:
    text: str


Step = ToolUse | Text


class ScriptedMessagesServer:
    def __init__(self) -> None:
        self.steps: deque[Step] = deque()
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.requests.append(body)
                    step = server.steps.popleft() if server.steps else Text("(no more steps)")
                    number = len(server.requests)
                payload = json.dumps(_message(step, number=number, model=body.get("model", "claude"))).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ScriptedMessagesServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def script(self, *steps: Step) -> None:
        self.steps.extend(steps)

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks the SDK sent back, in order, one per scripted tool use."""
        results = []
        for body in self.requests[1:]:
            last = body["messages"][-1]
            results += [block for block in last["content"] if block.get("type") == "tool_result"]
        return results


def _message(step: Step, *, number: int, model: str) -> dict[str, Any]:
    if isinstance(step, ToolUse):
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"toolu_{number:03d}", "name": step.name, "input": step.input}
        ]
        stop_reason = "tool_use"
    else:
        content, stop_reason = [{"type": "text", "text": step.text}], "end_turn"
    return {
        "id": f"msg_{number:03d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 6},
    }
