"""A webhook receiver on 127.0.0.1: a real HTTP server that answers a scripted list of statuses
and records every request (headers and raw body) so tests can verify signatures."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class WebhookReceiver:
    def __init__(self, statuses: list[int] | None = None, *, default: int = 200) -> None:
        self.statuses = list(statuses or [])
        self.default = default
        self.requests: list[Received] = []
        self.extra_headers: dict[str, str] = {}
        self.body: bytes | None = None  # what every answer carries (default: {"received": <status>})
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    receiver.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    status = receiver.statuses.pop(0) if receiver.statuses else receiver.default
                payload = receiver.body if receiver.body is not None else f'{{"received": {status}}}'.encode()
                self.send_response(status)
                for name, value in receiver.extra_headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> WebhookReceiver:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
