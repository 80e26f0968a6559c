"""What a tool call through /mcp/ costs beside the REST call it runs, per request.

Both go through Django's WSGI handler in this process (no network): the REST request alone,
and the MCP POST that parses JSON-RPC, checks the arguments and runs the same endpoint
in-process. Prints the median of several runs of per-call milliseconds and the ratio
MCP / REST for a context read, a one-message append, and `tools/list`.
Run: `.venv/bin/python bench/mcp_bench.py` (add DATABASE_URL=... for PostgreSQL).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memsite.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("MEMSITE_CONTEXT_LEDGER_FLUSH_SECONDS", "5")

import django

django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from memory_app.tenancy import services as tenancy  # noqa: E402

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


def mcp_call(client: Client, method: str, params: dict) -> Callable[[], object]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": ENVELOPE}})
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method, "Mcp-Name": params.get("name", "")}

    def call() -> object:
        response = client.post("/mcp/", body, content_type="application/json", headers=headers)
        assert response.status_code == 200 and not response.json()["result"].get("isError"), response.content
        return response

    return call


def main() -> None:
    from django.core.management import call_command

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
    for name, rest, mcp in rows:
        rest_ms, mcp_ms = per_call_ms(rest), per_call_ms(mcp)
        print(f"{name:<10} {rest_ms:9.2f} {mcp_ms:9.2f} {mcp_ms / rest_ms:9.2f}")
    print(f"tools/list {per_call_ms(mcp_call(client, 'tools/list', {})):9.2f} ms")


if __name__ == "__main__":
    main()
