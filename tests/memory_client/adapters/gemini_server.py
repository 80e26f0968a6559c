"""A scripted Gemini API server on 127.0.0.1 for the Google ADK example (real HTTP, ADK's own model class).

`google-genai` sends `POST /v1beta/models/{model}:generateContent` to GOOGLE_GEMINI_BASE_URL; each
request takes the next scripted reply (a text, or function calls) and is recorded as sent.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class GeminiReply:
    """One model turn: its text, or the functions it calls ({"name", "args"} each)."""

    text: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)

    def payload(self, model: str) -> dict[str, Any]:
        parts: list[dict[str, Any]] = [{"functionCall": call} for call in self.calls]
        if self.text is not None:
            parts.insert(0, {"text": self.text})
        return {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18},
            "modelVersion": model,
        }


class ScriptedGeminiServer:
    def __init__(self) -> None:
        self.replies: deque[GeminiReply] = deque()
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                model = self.path.split("/models/", 1)[-1].split(":", 1)[0]
                with server._lock:
                    server.requests.append(body)
                    reply = server.replies.popleft() if server.replies else GeminiReply("(nothing scripted)")
                answer = json.dumps(reply.payload(model)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> ScriptedGeminiServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def script(self, *replies: GeminiReply) -> None:
        with self._lock:
            self.replies.extend(replies)
