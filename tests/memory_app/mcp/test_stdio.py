"""`python -m memory_client.mcp`, the stdio server local MCP hosts start, driven by the official
MCP SDK client the way a host drives it (it launches the command), against gunicorn."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey
from tests.conftest import make_tenant
from tests.memory_app.mcp.conftest import Server, leaf_error, run
from tests.memory_app.mcp.test_http import TOOL_NAMES, WEATHER_TURN
from tests.worker_process import ROOT, free_port

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
MCP_DOC = ROOT / "docs" / "mcp.md"  # the host configurations and the HTTP example, run as written


def documented_json(integration: str) -> dict[str, Any]:
    """The first json block of the docs/mcp.md section under `<!-- integration: NAME -->`."""
    section = MCP_DOC.read_text().split(f"<!-- integration: {integration} -->\n###", 1)[1]
    found = re.search(r"```json\n(.*?)```", section, re.DOTALL)
    assert found is not None
    return json.loads(found.group(1))


def host_config(url: str, key: str) -> StdioServerParameters:
    """The documented host configuration, as a host would launch it (with this venv's python)."""
    server = documented_json("mcp-stdio")["mcpServers"]["memsite"]
    assert server["command"] == "python" and set(server["env"]) == {"MEMSITE_URL", "MEMSITE_API_KEY"}
    env = {**server["env"], "MEMSITE_URL": url, "MEMSITE_API_KEY": key}
    return StdioServerParameters(command=sys.executable, args=server["args"], env=env, cwd=ROOT)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_host_lists_and_calls_the_tools_through_the_stdio_server(gunicorn: Server, mode: str):
    tenant = make_tenant("alpha")

    async def session() -> tuple[Any, ...]:
        async with Client(host_config(gunicorn.url, tenant.key), mode=mode) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            stored = await client.call_tool(
                "memory_append", {"external_id": "desk-1", "create": True, "messages": WEATHER_TURN}
            )
            sid = stored.structured_content["session_id"]
            context = await client.call_tool("memory_context", {"session_id": sid})
            refused = await client.call_tool("memory_context", {"session_id": sid, "max_tokens": 0})
            with_accent = await client.call_tool(
                "fact_add", {"subject": "café", "predicate": "serves", "object": "crème brûlée", "role": "user"}
            )
            return client.protocol_version, tools, context, refused, with_accent

    version, tools, context, refused, with_accent = run(session)
    assert version == {"auto": "2026-07-28", "legacy": "2025-11-25"}[mode]
    assert tools == TOOL_NAMES
    assert context.is_error is False
    assert [m["role"] for m in context.structured_content["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert refused.is_error is True and list(refused.structured_content["fields"]) == ["max_tokens"]
    assert with_accent.structured_content["object"] == "crème brûlée"


def test_an_unknown_tool_is_the_servers_protocol_error(gunicorn: Server):
    tenant = make_tenant("alpha")

    async def call() -> Any:
        async with Client(host_config(gunicorn.url, tenant.key)) as client:
            return await client.call_tool("forget_everything", {})

    with pytest.raises((MCPError, ExceptionGroup)) as raised:
        run(call)
    error = leaf_error(raised.value)
    assert isinstance(error, MCPError) and error.error.code == -32602


def test_a_revoked_key_and_an_unreachable_server_are_told_to_the_host(gunicorn: Server):
    tenant = make_tenant("alpha")
    reader = tenancy.api_key_create(team=tenant.team, name="gone", role=ApiKey.Role.READ)
    tenancy.api_key_revoke(api_key=reader[0])
    for url, key, code, words in (
        (gunicorn.url, reader[1], -32001, "Invalid or revoked API key."),
        (f"http://127.0.0.1:{free_port()}", tenant.key, -32000, "unreachable"),
    ):

        async def connect(url: str = url, key: str = key) -> Any:
            async with Client(host_config(url, key)) as client:
                return await client.list_tools()

        with pytest.raises((MCPError, ExceptionGroup)) as raised:
            run(connect)
        error = leaf_error(raised.value)
        assert isinstance(error, MCPError) and error.error.code == code, repr(error)
        assert words in error.error.message


def test_it_refuses_to_start_without_a_url_and_key():
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMSITE_")}
    done = subprocess.run(
        [sys.executable, "-m", "memory_client.mcp"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2
    assert "MEMSITE_URL and MEMSITE_API_KEY" in done.stderr


def test_the_documented_http_example_and_host_config_work(gunicorn: Server):
    tenant = make_tenant("alpha")
    section = MCP_DOC.read_text().split("<!-- integration: mcp-http -->\n###", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None
    env = {**os.environ, "MEMSITE_URL": gunicorn.url, "MEMSITE_API_KEY": tenant.key}
    done = subprocess.run(
        [sys.executable, "-c", code.group(1)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "memory_append" in done.stdout and "My printer is out of toner." in done.stdout
    server = documented_json("mcp-http")["mcpServers"]["memsite"]
    assert server["url"].endswith("/mcp") and server["headers"]["Authorization"].startswith("Bearer ")
