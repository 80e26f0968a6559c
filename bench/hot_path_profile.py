"""CPU per request of the agent hot path, in one process, through the WSGI handlers (no network).

    .venv/bin/python bench/hot_path_profile.py [--rounds 5] [--requests 300] [--profile append]

Creates a PostgreSQL database, migrates it, makes a key and a 1k-message session, then calls
each endpoint's WSGI application directly (`bench/wsgi.py`: the limit floor, the DRF floors and
the product) and reports this process's CPU per request, the median of `--rounds` rounds of
`--requests` requests, and each figure as a multiple of its limit floor. PostgreSQL's own CPU is
not counted (bench/api_bench.py reports it). `--profile NAME` prints a cProfile of one round of
that endpoint instead: where a request's time goes. See bench/README.md.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import (
    APPEND_BODY,
    HOST,
    SYSTEM_PROMPT,
    bench_env,
    close_django_connections,
    create_database,
    drop_database,
    json_option,
    manage,
    seed_floor,
    seed_messages,
    setup_django,
    write_figures,
)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Any]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--profile", help="print a cProfile of this endpoint instead (e.g. append, context_1k)")
    parser.add_argument("--top", type=int, default=30, help="functions shown by --profile")
    parser.add_argument("--pg-url", default=os.environ.get("BENCH_PG_URL", f"postgres://postgres@{HOST}:5432"))
    parser.add_argument("--db-name", default="memsite_profile")
    json_option(parser, "hot_path_profile")  # the rounds' figures; a --profile run writes none
    return parser.parse_args(argv)


def call(app: WsgiApp, method: str, path: str, key: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    """One request through a WSGI application, as gunicorn would make it."""
    payload = json.dumps(body).encode() if body is not None else b""
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": HOST,
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": HOST,
        "HTTP_AUTHORIZATION": f"Bearer {key}",
        "HTTP_ACCEPT": "application/json",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(payload)),
        "REMOTE_ADDR": HOST,
        "wsgi.input": io.BytesIO(payload),
        "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.multithread": False,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    status: list[str] = []
    result = app(environ, lambda s, headers, exc_info=None: status.append(s))
    try:
        content = b"".join(result)
    finally:
        if hasattr(result, "close"):
            result.close()  # Django's request_finished: connection bookkeeping, as in gunicorn
    return int(status[0].split()[0]), content


def cpu_ms_per_request(app: WsgiApp, endpoint: tuple[str, str, dict[str, Any] | None], key: str, n: int) -> float:
    method, path, body = endpoint
    started = time.process_time()
    for _ in range(n):
        call(app, method, path, key, body)
    return (time.process_time() - started) * 1000 / n


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env = bench_env(f"{args.pg_url}/{args.db_name}")
    create_database(args.pg_url, args.db_name)
    try:
        manage(env, "migrate", "--no-input")
        key = manage(env, "create_api_key", "--team", "bench", "--name", "bench").strip().splitlines()[-1]
        setup_django(env)
        seed_floor(1_000)
        from bench.wsgi import application

        status, content = call(application, "POST", "/api/v1/sessions/", key, {"system_prompt": SYSTEM_PROMPT})
        assert status == 201, content
        session_id = json.loads(content)["id"]
        seed_messages(session_id, 1_000)
        close_django_connections()
        endpoints: dict[str, tuple[str, str, dict[str, Any] | None]] = {
            "limit_insert": ("POST", "/bench/limit/insert/", APPEND_BODY),
            "insert_floor": ("POST", "/bench/floor/insert/", APPEND_BODY),
            "append": ("POST", f"/api/v1/sessions/{session_id}/messages/", APPEND_BODY),
            "limit_read": ("GET", "/bench/limit/read/", None),
            "read_floor": ("GET", "/bench/floor/read/", None),
            "context_1k": ("GET", f"/api/v1/sessions/{session_id}/context/", None),
        }
        for name, (method, path, body) in endpoints.items():
            status, content = call(application, method, path, key, body)
            assert status in (200, 201), f"{name}: {status} {content[:300]!r}"
            cpu_ms_per_request(application, endpoints[name], key, 50)  # warm-up
        if args.profile:
            profiler = cProfile.Profile(time.process_time)  # CPU, not time spent waiting on the database
            profiler.enable()
            cpu = cpu_ms_per_request(application, endpoints[args.profile], key, args.requests)
            profiler.disable()
            print(f"{args.profile}: {cpu:.3f} CPU ms/request under the profiler, {args.requests} requests")
            for order in ("tottime", "cumulative"):
                stats = pstats.Stats(profiler).strip_dirs().sort_stats(order)
                stats.print_stats(args.top)
            return 0
        rounds: dict[str, list[float]] = {name: [] for name in endpoints}
        for _ in range(args.rounds):
            for name, endpoint in endpoints.items():
                rounds[name].append(cpu_ms_per_request(application, endpoint, key, args.requests))
        limits = {"limit_insert": "limit_insert", "insert_floor": "limit_insert", "append": "limit_insert"}
        print(f"CPU ms per request in one process, median of {args.rounds} rounds of {args.requests} requests")
        print("| path | CPU ms/request | x limit (median of per-round ratios) |")
        print("|---|---:|---:|")
        table = []
        for name, values in rounds.items():
            limit = rounds[limits.get(name, "limit_read")]
            ratio = statistics.median(v / lim for v, lim in zip(values, limit, strict=True))
            print(f"| {name} | {statistics.median(values):.3f} | {ratio:.1f}x |")
            table.append(
                {"path": name, "cpu_ms": statistics.median(values), "over_limit": ratio, "cpu_ms_per_round": values}
            )
        write_figures(
            args.json,
            "hot_path_profile",
            {"rounds": args.rounds, "requests_per_round": args.requests, "table": table},
        )
        return 0
    finally:
        close_django_connections()
        drop_database(args.pg_url, args.db_name)


if __name__ == "__main__":
    sys.exit(main())
