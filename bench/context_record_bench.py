"""What keeping a replay record of every served context costs: bytes, and time on the context
read, the batch write and the replay read.

    .venv/bin/python bench/context_record_bench.py [--rounds 5] [--reads 200]

Creates a dedicated PostgreSQL database (`memsite_record_bench`, migrated, dropped at the end)
and drives the product in-process through Django's test client (the middleware, API-key
authentication and DRF views of a real request, no network): sessions of conversation text from
the recall evaluation set (bench/data/recall_dev.json) with a tool call and its JSON output every
fifth turn, read at three window sizes. Each round reads every window with records on
(MEMSITE_CONTEXT_RECORD_DAYS=30) and off (0, the floor: the ledger row alone), interleaved; the
medians of the per-round medians are reported, and each ratio is the median of its per-round
ratios. See bench/README.md ("Served-context records") for the method and the latest results.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import (
    ROOT,
    SYSTEM_PROMPT,
    bench_env,
    close_django_connections,
    create_database,
    drop_database,
    json_option,
    machine_description,
    migrate,
    setup_django,
    write_figures,
)

DB_NAME = "memsite_record_bench"
# (label, messages stored, `last` of the read): a short agent turn, the default window, a long one.
WINDOWS: tuple[tuple[str, int, int], ...] = (
    ("10 messages", 40, 10),
    ("20 messages", 200, 20),
    ("100 messages", 400, 100),
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds (medians of rounds reported)")
    parser.add_argument("--reads", type=int, default=200, help="reads per window and mode in a round")
    parser.add_argument("--pg", default=os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432"))
    json_option(parser, "context_record_bench")
    return parser.parse_args(argv)


def conversation_messages(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """`count` chat messages of real conversation text; every fifth turn a tool call and its output."""
    data = json.loads((ROOT / "bench" / "data" / "recall_dev.json").read_text())
    turns = [turn["text"] for conv in data["conversations"] for s in conv["sessions"] for turn in s["turns"]]
    messages: list[dict[str, Any]] = []
    while len(messages) < count:
        start = rng.randrange(len(turns) - 8)
        messages.append({"role": "user", "content": turns[start]})
        if len(messages) % 10 == 1:
            call_id = f"call_{len(messages)}"
            arguments = json.dumps({"query": turns[start][:60], "limit": 5})
            call = {"id": call_id, "type": "function", "function": {"name": "search_notes", "arguments": arguments}}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            found = [{"id": rng.randrange(10**6), "text": turns[start + k], "score": rng.random()} for k in range(1, 5)]
            messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps({"results": found})})
        messages.append({"role": "assistant", "content": " ".join(turns[start + 1 : start + rng.randint(3, 7)])})
    return messages[:count]


def timed(call: Callable[[], Any], times: int) -> list[float]:
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        call()
        spent.append(time.perf_counter() - started)
    return spent


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def run(args: argparse.Namespace) -> dict[str, Any]:
    from django.conf import settings
    from django.db import connection
    from django.test import Client

    from memory_app.conversations import services
    from memory_app.models import ContextRecord, ContextServe
    from memory_app.tenancy import services as tenancy
    from memory_app.usage import context_ledger
    from memory_app.usage.models import compress_json

    rng = random.Random(7)
    team = tenancy.team_get_or_create(name="bench")
    _, key = tenancy.api_key_create(team=team, name="bench")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    sessions = {}
    for label, stored, _ in WINDOWS:
        session = services.session_create(team=team, system_prompt=SYSTEM_PROMPT)
        services.message_append(session=session, messages=conversation_messages(stored, rng))
        sessions[label] = session

    def read(label: str, last: int) -> dict[str, Any]:
        response = client.get(f"/api/v1/sessions/{sessions[label].pk}/context/", {"last": last})
        assert response.status_code == 200, response.content
        return response.json()

    settings.CONTEXT_LEDGER_FLUSH_SECONDS = 1.0  # the default: the request only holds the row
    rounds: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in WINDOWS}
    for round_index in range(args.rounds):
        order = WINDOWS if round_index % 2 == 0 else WINDOWS[::-1]
        for label, _, last in order:
            figures: dict[str, float] = {}
            for mode in ("off", "on") if round_index % 2 == 0 else ("on", "off"):
                settings.CONTEXT_RECORD_DAYS = 30 if mode == "on" else 0
                read(label, last)  # warm
                figures[f"read_{mode}"] = median_ms(timed(lambda: read(label, last), args.reads))  # noqa: B023
            context_ledger.flush()
            latest = ContextRecord.objects.filter(session=sessions[label]).order_by("-created_at").first()
            assert latest is not None
            replay_path = f"/api/v1/contexts/{latest.pk}/"
            figures["replay"] = median_ms(timed(lambda: client.get(replay_path), args.reads))  # noqa: B023
            rounds[label].append(figures)

    # The batch write (the flusher thread's work), per row: 200 held rows with and without records.
    flush_ms: dict[str, float] = {}
    for mode in ("off", "on"):
        settings.CONTEXT_RECORD_DAYS = 30 if mode == "on" else 0
        settings.CONTEXT_LEDGER_FLUSH_SECONDS = 3600.0  # nothing written until flushed here
        samples = []
        for _ in range(args.rounds):
            for _ in range(context_ledger.BATCH_ROWS - 1):
                read("20 messages", 20)
            started = time.perf_counter()
            context_ledger.flush()
            samples.append((time.perf_counter() - started) / (context_ledger.BATCH_ROWS - 1))
        flush_ms[mode] = statistics.median(samples) * 1000
    context_ledger.flush()

    sizes: dict[str, dict[str, float]] = {}
    for label, _, last in WINDOWS:
        body = ContextRecord.objects.filter(session=sessions[label]).order_by("-created_at").first()
        assert body is not None
        answer_bytes = len(json.dumps(read(label, last)["messages"], ensure_ascii=False, separators=(",", ":")))
        level_bytes, level_ms = {}, {}
        for level in (1, 6, 9):
            level_bytes[level] = len(compress_json(body.body, level=level))
            level_ms[level] = median_ms(timed(lambda: compress_json(body.body, level=level), 50))  # noqa: B023
        raw = len(json.dumps(body.body, ensure_ascii=False, separators=(",", ":")).encode())
        sizes[label] = {
            "messages_json_bytes": answer_bytes,
            "record_json_bytes": raw,
            **{f"stored_bytes_level_{level}": value for level, value in level_bytes.items()},
            **{f"compress_ms_level_{level}": value for level, value in level_ms.items()},
            "decompress_ms": median_ms(timed(lambda: json.loads(zlib.decompress(compress_json(body.body))), 50)),  # noqa: B023
        }
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
        cursor.execute(
            "SELECT pg_total_relation_size('memory_app_contextrecord'), "
            "pg_total_relation_size('memory_app_contextserve')"
        )
        record_table, serve_table = cursor.fetchone()
    records, serves = ContextRecord.objects.count(), ContextServe.objects.count()
    return {
        "rounds": rounds,
        "flush_ms_per_row": flush_ms,
        "sizes": sizes,
        "on_disk": {
            "records": records,
            "record_table_bytes_per_record": record_table / max(records, 1),
            "serve_table_bytes_per_row": serve_table / max(serves, 1),
        },
    }


def report(figures: dict[str, Any]) -> None:
    print("Context read and replay read, in-process (ms, medians of per-round medians)")
    print(f"{'window':<14}{'read, no record':>17}{'read, record':>14}{'ratio':>8}{'replay':>9}{'replay/read':>13}")
    for label, rounds in figures["rounds"].items():
        off = statistics.median(r["read_off"] for r in rounds)
        on = statistics.median(r["read_on"] for r in rounds)
        ratio = statistics.median(r["read_on"] / r["read_off"] for r in rounds)
        replay = statistics.median(r["replay"] for r in rounds)
        replay_ratio = statistics.median(r["replay"] / r["read_on"] for r in rounds)
        print(f"{label:<14}{off:>17.2f}{on:>14.2f}{ratio:>7.2f}x{replay:>9.2f}{replay_ratio:>12.2f}x")
    flush = figures["flush_ms_per_row"]
    print(
        f"\nBatch write per served context (flusher thread): {flush['off']:.3f} ms without a record, "
        f"{flush['on']:.3f} ms with ({flush['on'] / flush['off']:.2f}x)"
    )
    print("\nBytes per served context (the record's body: messages, parts, params, recall)")
    print(
        f"{'window':<14}{'answer JSON':>12}{'record JSON':>12}{'zlib 1':>8}{'zlib 6':>8}{'zlib 9':>8}"
        f"{'ms 1/6/9':>18}{'read ms':>9}"
    )
    for label, size in figures["sizes"].items():
        ms = f"{size['compress_ms_level_1']:.2f}/{size['compress_ms_level_6']:.2f}/{size['compress_ms_level_9']:.2f}"
        print(
            f"{label:<14}{size['messages_json_bytes']:>12,}{size['record_json_bytes']:>12,}"
            f"{size['stored_bytes_level_1']:>8,}{size['stored_bytes_level_6']:>8,}{size['stored_bytes_level_9']:>8,}"
            f"{ms:>18}{size['decompress_ms']:>9.2f}"
        )
    disk = figures["on_disk"]
    print(
        f"\nOn disk (PostgreSQL, after VACUUM): {disk['record_table_bytes_per_record']:,.0f} bytes per record "
        f"({disk['records']:,} records, mixed windows, indexes and TOAST included); the ledger row: "
        f"{disk['serve_table_bytes_per_row']:,.0f} bytes"
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    base = args.pg.rstrip("/")
    create_database(args.pg, DB_NAME)
    env = {**os.environ, **bench_env(f"{base}/{DB_NAME}"), "MEMSITE_VAR_DIR": "/tmp/context-record-bench"}
    try:
        migrate(env)
        setup_django(env)
        figures = run(args)
        report(figures)
        print(f"\n{machine_description()}")
        write_figures(args.json, "context_record_bench", figures)
    finally:
        close_django_connections()
        drop_database(args.pg, DB_NAME)


if __name__ == "__main__":
    main()
