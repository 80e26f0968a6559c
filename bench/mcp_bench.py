"""What a tool call through /mcp/ costs beside the REST call it runs, per request.

Both go through Django's WSGI handler in this process (no network): the REST request alone,
and the MCP POST that parses JSON-RPC, checks the arguments and runs the same endpoint
in-process. Prints the median of several runs of per-call milliseconds and the ratio
MCP / REST for a context read, a one-message append, and `tools/list`.
Run: `.venv/bin/python bench/mcp_bench.py` (add DATABASE_URL=... for PostgreSQL).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import json_option, write_figures

RUNS = 5
CALLS = 200
VERSION = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def per_call_ms(call: Callable[[], object]) -> float:
    samples = []
    for _ in range(RUNS):
        start = time.perf_counter()
        for _ in range(CALLS):
            call()
        samples.append((time.perf_counter() - start) / CALLS * 1000)
    return statistics.median(samples)


def mcp_call(client: Any, method: str, params: dict) -> Callable[[], object]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": ENVELOPE}})
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method, "Mcp-Name": params.get("name", "")}

    def call() -> object:
        response = client.post("/mcp/", body, content_type="application/json", headers=headers)
        assert response.status_code == 200 and not response.json()["result"].get("isError"), response.content
        return response

    return call


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    json_option(parser, "mcp_bench")
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memsite.settings")
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("MEMSITE_CONTEXT_LEDGER_FLUSH_SECONDS", "5")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from memory_app.tenancy import services as tenancy

    call_command("migrate", verbosity=0)
    team = tenancy.team_get_or_create(name="mcp-bench")
    _, raw = tenancy.api_key_create(team=team, name="mcp-bench")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    sid = client.post("/api/v1/sessions/", {"system_prompt": "bench"}, content_type="application/json").json()["id"]
    turn = [{"role": "user", "content": "How warm is it in Oslo today?"}, {"role": "assistant", "content": "4 °C."}]
    for _ in range(50):
        client.post(f"/api/v1/sessions/{sid}/messages/", {"messages": turn}, content_type="application/json")

    def rest_context() -> object:
        return client.get(f"/api/v1/sessions/{sid}/context/", {"max_tokens": 2000})

    def rest_append() -> object:
        return client.post(f"/api/v1/sessions/{sid}/messages/", turn[0], content_type="application/json")

    rows = [
        (
            "context",
            rest_context,
            mcp_call(
                client, "tools/call", {"name": "memory_context", "arguments": {"session_id": sid, "max_tokens": 2000}}
            ),
        ),
        (
            "append",
            rest_append,
            mcp_call(
                client, "tools/call", {"name": "memory_append", "arguments": {"session_id": sid, "messages": [turn[0]]}}
            ),
        ),
    ]
    print(f"database: {connection.vendor}; median of {RUNS} runs x {CALLS} calls, in-process WSGI (no network)")
    print(f"{'operation':<10} {'REST ms':>9} {'MCP ms':>9} {'MCP/REST':>9}")
    table = []
    for name, rest, mcp in rows:
        rest_ms, mcp_ms = per_call_ms(rest), per_call_ms(mcp)
        print(f"{name:<10} {rest_ms:9.2f} {mcp_ms:9.2f} {mcp_ms / rest_ms:9.2f}")
        table.append({"operation": name, "rest_ms": rest_ms, "mcp_ms": mcp_ms, "mcp_over_rest": mcp_ms / rest_ms})
    tools_list = per_call_ms(mcp_call(client, "tools/list", {}))
    print(f"tools/list {tools_list:9.2f} ms")
    write_figures(
        args.json,
        "mcp_bench",
        {"database": connection.vendor, "runs": RUNS, "calls": CALLS, "table": table, "tools_list_ms": tools_list},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
