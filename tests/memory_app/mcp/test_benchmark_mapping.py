"""The ingest/query pair memory-benchmark harnesses drive, as docs/mcp.md maps it onto the tools.

No alias tools: `memory_append` (a conversation, by the harness's own id) and `memory_search` are
the pair already. The documented calls are run as written through the official MCP client.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.conftest import make_tenant
from tests.memory_app.mcp.conftest import connect, run
from tests.memory_app.mcp.test_http import index_now
from tests.worker_process import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


def documented_calls() -> dict[str, dict[str, Any]]:
    """The JSON block of docs/mcp.md under `<!-- benchmark-harness -->`: {operation: {tool, arguments}}."""
    section = (ROOT / "docs" / "mcp.md").read_text().split("<!-- benchmark-harness -->\n", 1)[1]
    found = re.search(r"```json\n(.*?)```", section, re.DOTALL)
    assert found is not None
    return json.loads(found.group(1))


def test_a_harness_ingests_a_conversation_and_queries_it_with_the_documented_calls(live_server: Any):
    tenant = make_tenant("benchmark")
    calls = documented_calls()
    assert set(calls) == {"ingest", "query"}

    async def ingest() -> Any:
        async with connect(f"{live_server.url}/mcp", tenant.key) as client:
            schemas = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
            for call in calls.values():
                Draft202012Validator(schemas[call["tool"]]).validate(call["arguments"])
            return await client.call_tool(calls["ingest"]["tool"], calls["ingest"]["arguments"])

    async def query() -> Any:
        async with connect(f"{live_server.url}/mcp", tenant.key) as client:
            return await client.call_tool(calls["query"]["tool"], calls["query"]["arguments"])

    ingested = run(ingest)
    assert ingested.is_error is False, ingested.content
    index_now(tenant.team)  # what the search worker does in the background
    found = run(query)

    assert found.is_error is False, found.content
    results = found.structured_content["results"]
    assert "Biscuit" in json.dumps(results[0])
