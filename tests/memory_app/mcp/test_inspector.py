"""`/mcp` and `/mcp/`: one endpoint, no redirect, and the MCP Inspector finding its transport.

The Inspector (@modelcontextprotocol/inspector) guesses the transport from the URL's path: one
ending in `/mcp` is Streamable HTTP, `/sse` the old SSE transport, anything else it refuses to
guess. So `/mcp` is the URL documented for it; `/mcp/` stays, for the hosts configured with it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from typing import Any

import httpx
import pytest

from tests.conftest import make_tenant
from tests.memory_app.mcp.node_tools import INSPECTOR, NODE_MODULES, installed, node22
from tests.memory_app.mcp.test_http import TOOL_NAMES
from tests.worker_process import ROOT

pytestmark = pytest.mark.django_db(transaction=True)
MCP_DOC = ROOT / "docs" / "mcp.md"
PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}


def test_mcp_and_mcp_slash_are_one_endpoint_answered_without_a_redirect(live_server: Any):
    tenant = make_tenant("paths")
    headers = {"Authorization": f"Bearer {tenant.key}", "Accept": "application/json, text/event-stream"}

    with httpx.Client(base_url=live_server.url, headers=headers, follow_redirects=False, timeout=30) as http:
        for path in ("/mcp", "/mcp/"):
            answered = http.post(path, json=PING)
            assert answered.status_code == 200, (path, answered.status_code, answered.headers)
            assert answered.json() == {"jsonrpc": "2.0", "id": 7, "result": {}}
            refused = http.get(path, headers={"Accept": "text/event-stream"})
            assert (refused.status_code, refused.headers["Allow"]) == (405, "POST"), path  # no stream, no 301
            unauthenticated = http.post(path, json=PING, headers={"Authorization": ""})
            assert unauthenticated.status_code == 401, path


def documented_inspector_command() -> list[str]:
    """The Inspector command of docs/mcp.md (`<!-- inspector -->`), as words."""
    section = MCP_DOC.read_text().split("<!-- inspector -->\n", 1)[1]
    found = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert found is not None
    return shlex.split(found.group(1).replace("\\\n", " "))


def inspector(arguments: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # node_modules/.bin first on PATH: the launcher and anything it starts run on Node 22.
    path = f"{NODE_MODULES / '.bin'}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        [node22(), installed(INSPECTOR), *arguments],
        env={**os.environ, **env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_the_documented_inspector_command_finds_the_transport_of_mcp_and_lists_the_tools(live_server: Any):
    tenant = make_tenant("inspector")
    command = documented_inspector_command()
    assert command[:3] == ["npx", "@modelcontextprotocol/inspector", "--cli"] and "--transport" not in command
    url = command[3]
    assert url == "http://127.0.0.1:8000/mcp"  # no transport given: the Inspector infers it from the path
    arguments = [live_server.url + "/mcp" if word == url else word for word in command[2:]]  # from --cli on
    arguments = [word.replace("$MEMSITE_API_KEY", tenant.key) for word in arguments]

    listed = inspector(arguments, {})

    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert TOOL_NAMES <= {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
    # `/mcp/`, the same endpoint, leaves the Inspector guessing: that is why the docs give it `/mcp`.
    slash = [live_server.url + "/mcp/" if word.startswith(live_server.url) else word for word in arguments]
    guessed = inspector(slash, {})
    assert guessed.returncode != 0 and "could not be determined from URL" in guessed.stdout + guessed.stderr
