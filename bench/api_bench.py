"""Append and context endpoints against their limit floors and DRF floors, one gunicorn, one run.

    .venv/bin/python bench/api_bench.py [--runs 3] [--duration 10] [--loadgen auto|wrk|python]

Creates a dedicated PostgreSQL database, migrates it, makes an API key with
`manage.py create_api_key`, starts gunicorn (2 sync workers, persistent connections,
DEBUG off) serving `bench/wsgi.py`: the limit floors (`bench/limit_floor.py`, a plain WSGI
callable: digest check + one SQL statement with psycopg, no Django) and the product with the DRF
floor endpoints mounted (MEMSITE_BENCH_FLOORS=1), seeds a 1k- and a
100k-message session with bulk inserts, and drives every endpoint from a load generator on
loopback (wrk when installed). Each endpoint gets a warm-up, then `--runs` measurements of
`--duration` seconds, interleaved round by round; the medians are reported, and each ratio
against its target is the median of its per-round ratios. Gunicorn and the database are removed at the end.
See bench/README.md for the method and the latest results.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import (
    APPEND_BODY,
    CLK_TCK,
    HOST,
    ROOT,
    SYSTEM_PROMPT,
    auth,
    bench_env,
    children_of,
    close_django_connections,
    create_database,
    drop_database,
    free_port,
    json_option,
    machine_description,
    machine_ticks,
    manage,
    pg_version,
    process_ticks,
    seed_floor,
    seed_messages,
    setup_django,
    start_gunicorn,
    stop_gunicorn,
    wait_for_quiet,
    wait_ready,
    write_figures,
)

WRK_SCRIPT = ROOT / "bench" / "wrk_bench.lua"


# --- command line ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="measurements per endpoint (median reported)")
    parser.add_argument("--duration", type=int, default=10, help="seconds per measurement")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of warm-up per endpoint")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (2 cores: keep the generator small)")
    parser.add_argument("--loadgen", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument("--small", type=int, default=1_000, help="messages in the small session")
    parser.add_argument("--large", type=int, default=100_000, help="messages in the large session")
    parser.add_argument("--floor-rows", type=int, default=1_000, help="rows behind the read floor")
    parser.add_argument(
        "--append-sessions", type=int, default=8, help="sessions the append load cycles through (1 = one hot row)"
    )
    parser.add_argument(
        "--quiet", type=float, default=0.10, help="max share of the machine's CPU other processes may use in a sample"
    )
    parser.add_argument("--retries", type=int, default=1, help="re-takes of a sample disturbed by other processes")
    parser.add_argument("--max-wait", type=float, default=15.0, help="seconds to wait for a quiet machine per sample")
    parser.add_argument("--pg-url", default=os.environ.get("BENCH_PG_URL", f"postgres://postgres@{HOST}:5432"))
    parser.add_argument("--db-name", default="memsite_bench")
    parser.add_argument("--keep-db", action="store_true", help="leave the database for inspection")
    json_option(parser, "api_bench")
    return parser.parse_args(argv)


# --- database and Django --------------------------------------------------------------------


def vacuum_analyze() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def check_append_sessions(session_ids: list[str]) -> list[str]:
    """After the load: every append session's seqs are 1..last_seq with no gap."""
    from django.db.models import Count, Max

    from memory_app.conversations.models import Session

    problems = []
    for session in Session.objects.filter(pk__in=session_ids).annotate(n=Count("messages"), top=Max("messages__seq")):
        if not (session.n == session.last_seq == (session.top or 0)):
            problems.append(
                f"session {session.pk}: {session.n} messages, last_seq {session.last_seq}, max seq {session.top}"
            )
    return problems


# --- CPU accounting: this machine is shared, so every sample says who else was busy ----------


def tree_ticks(pids: list[int]) -> int:
    """utime + stime of these processes, in ticks (a process that is gone counts 0)."""
    return sum(process_ticks(pid) for pid in pids)


class ServerProcesses:
    """The processes serving the bench: gunicorn's master and workers, and the PostgreSQL
    backends of the bench database plus PostgreSQL's own background processes."""

    def __init__(self, pg_url: str, db_name: str, gunicorn_pid: int) -> None:
        self.pg_url, self.db_name, self.gunicorn_pid = pg_url, db_name, gunicorn_pid

    def settle(self) -> None:
        """Between samples: VACUUM, as autovacuum would (this server runs with it off, and
        without it the sessions' counter rows bloat by thousands of dead versions a sample),
        then CHECKPOINT, so that no sample pays for writing out what another one wrote."""
        with psycopg.connect(f"{self.pg_url}/{self.db_name}", autocommit=True) as conn:
            conn.execute("VACUUM")
            conn.execute("CHECKPOINT")

    def pids(self) -> tuple[list[int], list[int]]:
        with psycopg.connect(f"{self.pg_url}/postgres", autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE (datname = %s OR datname IS NULL) AND pid <> pg_backend_pid()",
                [self.db_name],
            ).fetchall()
        return [self.gunicorn_pid, *children_of(self.gunicorn_pid)], [row[0] for row in rows]


# --- load generation ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    paths: list[str]
    body: dict[str, Any] | None = None


@dataclasses.dataclass(frozen=True)
class Sample:
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int
    web_cpu_ms: float = 0.0  # gunicorn CPU per request
    db_cpu_ms: float = 0.0  # PostgreSQL CPU per request
    foreign: float = 0.0  # share of the machine's CPU used by processes not in the bench


@dataclasses.dataclass
class Result:
    endpoint: Endpoint
    samples: list[Sample] = dataclasses.field(default_factory=list)

    @property
    def rps(self) -> float:
        return statistics.median(s.rps for s in self.samples)

    @property
    def p50(self) -> float:
        return statistics.median(s.p50_ms for s in self.samples)

    @property
    def p99(self) -> float:
        return statistics.median(s.p99_ms for s in self.samples)

    @property
    def web_cpu_ms(self) -> float:
        return statistics.median(s.web_cpu_ms for s in self.samples)

    @property
    def db_cpu_ms(self) -> float:
        return statistics.median(s.db_cpu_ms for s in self.samples)


def run_wrk(base_url: str, key: str, endpoint: Endpoint, seconds: int, args: argparse.Namespace) -> Sample:
    body = json.dumps(endpoint.body) if endpoint.body is not None else "-"
    command = [
        "wrk",
        f"-t{args.threads}",
        f"-c{args.connections}",
        f"-d{seconds}s",
        "--timeout",
        "5s",
        "-s",
        str(WRK_SCRIPT),
        base_url,
        "--",
        endpoint.method,
        key,
        body,
        *endpoint.paths,
    ]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    line = next((x for x in output.splitlines() if x.startswith("BENCH_JSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary:\n{output}")
    stats = json.loads(line.removeprefix("BENCH_JSON "))
    errors = sum(stats[k] for k in ("connect_errors", "read_errors", "write_errors", "status_errors", "timeouts"))
    return Sample(
        rps=stats["requests"] / (stats["duration_us"] / 1e6),
        p50_ms=stats["p50_us"] / 1000,
        p99_ms=stats["p99_us"] / 1000,
        requests=stats["requests"],
        errors=errors,
    )


async def _python_load(base_url: str, key: str, endpoint: Endpoint, seconds: int, connections: int) -> Sample:
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=base_url, headers=auth(key), limits=limits, timeout=5) as client:
        deadline = time.perf_counter() + seconds

        async def worker(offset: int) -> None:
            nonlocal errors
            index = offset
            while time.perf_counter() < deadline:
                path = endpoint.paths[index % len(endpoint.paths)]
                index += connections
                started = time.perf_counter()
                try:
                    response = await client.request(endpoint.method, path, json=endpoint.body)
                    ok = response.status_code < 400
                except httpx.HTTPError:
                    ok = False
                latencies.append(time.perf_counter() - started)
                errors += not ok

        started = time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(connections)))
        elapsed = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100)
    return Sample(
        rps=len(latencies) / elapsed,
        p50_ms=cuts[49] * 1000,
        p99_ms=cuts[98] * 1000,
        requests=len(latencies),
        errors=errors,
    )


def generate_load(base_url: str, key: str, endpoint: Endpoint, seconds: int, args: argparse.Namespace) -> Sample:
    if args.loadgen == "wrk":
        return run_wrk(base_url, key, endpoint, seconds, args)
    return asyncio.run(_python_load(base_url, key, endpoint, seconds, args.connections))


def loadgen_cpu_seconds() -> float:
    """CPU of the load generator so far: wrk is a waited-for child, the Python one is us."""
    total = 0.0
    for who in (resource.RUSAGE_CHILDREN, resource.RUSAGE_SELF):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def measure(
    base_url: str, key: str, endpoint: Endpoint, seconds: int, args: argparse.Namespace, server: ServerProcesses
) -> Sample:
    """One sample with CPU accounting; re-taken (up to --retries times) when other processes
    on the machine used more than --quiet of its CPU meanwhile. The least disturbed is kept."""
    best: Sample | None = None
    for _ in range(args.retries + 1):
        server.settle()
        wait_for_quiet(args.quiet, args.max_wait)
        web, database = server.pids()
        web_before, database_before = tree_ticks(web), tree_ticks(database)
        loadgen_before = loadgen_cpu_seconds()
        busy_before, total_before = machine_ticks()
        sample = generate_load(base_url, key, endpoint, seconds, args)
        busy_after, total_after = machine_ticks()
        web_ticks, database_ticks = tree_ticks(web) - web_before, tree_ticks(database) - database_before
        server_ticks = web_ticks + database_ticks
        loadgen_ticks = (loadgen_cpu_seconds() - loadgen_before) * CLK_TCK
        foreign = max(busy_after - busy_before - server_ticks - loadgen_ticks, 0) / max(total_after - total_before, 1)
        sample = dataclasses.replace(
            sample,
            web_cpu_ms=web_ticks / CLK_TCK * 1000 / max(sample.requests, 1),
            db_cpu_ms=database_ticks / CLK_TCK * 1000 / max(sample.requests, 1),
            foreign=foreign,
        )
        if best is None or sample.foreign < best.foreign:
            best = sample
        if foreign <= args.quiet:
            break
    assert best is not None
    return best


# --- checks and report ----------------------------------------------------------------------


def smoke_check(base_url: str, key: str, endpoints: list[Endpoint]) -> None:
    """One request per endpoint before any load: right status, right shape."""
    with httpx.Client(base_url=base_url, headers=auth(key), timeout=10) as client:
        for endpoint in endpoints:
            response = client.request(endpoint.method, endpoint.paths[0], json=endpoint.body)
            expected = 201 if endpoint.method == "POST" else 200
            if response.status_code != expected:
                raise RuntimeError(f"{endpoint.name}: HTTP {response.status_code} {response.text[:300]}")
            data = response.json()
            if endpoint.name.startswith("context"):
                assert len(data["messages"]) == 21 and data["messages"][0]["role"] == "system", data
            if endpoint.name in ("read_floor", "read_limit"):
                assert len(data["messages"]) == 20, data


@dataclasses.dataclass(frozen=True)
class Target:
    label: str
    value: float
    bound: float
    at_least: bool

    @property
    def passed(self) -> bool:
        return self.value >= self.bound if self.at_least else self.value <= self.bound


def round_ratio(top: Result, bottom: Result, figure: str) -> float:
    """Median over rounds of top/bottom for one figure of the two endpoints' samples.

    The endpoints of a round run back to back, so a ratio within a round compares them
    under the same machine conditions; this 2-vCPU VM's speed drifts by up to ~40 % between
    rounds (the floors' own CPU per request varies that much), which a ratio of medians taken
    across rounds would count as the product's cost.
    """
    pairs = zip(top.samples, bottom.samples, strict=True)
    return statistics.median(getattr(a, figure) / getattr(b, figure) for a, b in pairs)


def targets(results: dict[str, Result]) -> list[Target]:
    """The pass/fail figures: the product's web CPU per request against the limit floor's, and a
    context read's latency flat in the history."""
    append, small, large = results["append"], results["context_1k"], results["context_100k"]
    insert_limit, read_limit = results["insert_limit"], results["read_limit"]
    cpu = "web_cpu_ms"
    return [
        Target("append web CPU / insert limit web CPU", round_ratio(append, insert_limit, cpu), 4.0, at_least=False),
        Target("context (1k) web CPU / read limit web CPU", round_ratio(small, read_limit, cpu), 4.0, at_least=False),
        Target("context (100k) web CPU / read limit web CPU", round_ratio(large, read_limit, cpu), 4.0, at_least=False),
        Target("context p50 at 100k / p50 at 1k", round_ratio(large, small, "p50_ms"), 1.2, at_least=False),
    ]


def floor_ratios(results: dict[str, Result]) -> list[tuple[str, float]]:
    """The product against the DRF floors, for information: the floors now share the lean API
    path (key cache, no browser middleware), so these show what the product's own work costs."""
    insert, append, read = results["insert_floor"], results["append"], results["read_floor"]
    small, large = results["context_1k"], results["context_100k"]
    return [
        ("append req/s / insert floor req/s", round_ratio(append, insert, "rps")),
        ("append p99 / insert floor p99", round_ratio(append, insert, "p99_ms")),
        ("context (1k) req/s / read floor req/s", round_ratio(small, read, "rps")),
        ("context (100k) req/s / read floor req/s", round_ratio(large, read, "rps")),
    ]


def limit_ratios(results: dict[str, Result]) -> list[dict[str, Any]]:
    """Each endpoint against its limit floor (the insert limit for a POST, the read limit for a GET)."""
    rows = []
    for result in results.values():
        limit = results["insert_limit" if result.endpoint.method == "POST" else "read_limit"]
        rows.append(
            {
                "endpoint": result.endpoint.name,
                "limit": limit.endpoint.name,
                **{figure: round_ratio(result, limit, figure) for figure in ("rps", "p99_ms", "web_cpu_ms")},
            }
        )
    return rows


def print_report(results: dict[str, Result], header: list[str]) -> bool:
    print()
    for line in header:
        print(line)
    print()
    print("| endpoint | req/s | p50 ms | p99 ms | CPU ms/req: web | db | req/s of each run | other load | errors |")
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for result in results.values():
        runs = ", ".join(f"{s.rps:.0f}" for s in result.samples)
        foreign = max(s.foreign for s in result.samples)
        errors = sum(s.errors for s in result.samples)
        print(
            f"| {result.endpoint.name} | {result.rps:.0f} | {result.p50:.2f} | {result.p99:.2f} "
            f"| {result.web_cpu_ms:.2f} | {result.db_cpu_ms:.2f} | {runs} | {foreign:.0%} | {errors} |"
        )
    print()
    print("| endpoint vs its limit floor (median of per-round ratios) | req/s | p99 | web CPU/req |")
    print("|---|---:|---:|---:|")
    for row in limit_ratios(results):
        print(
            f"| {row['endpoint']} / {row['limit']} | {row['rps']:.2f} | {row['p99_ms']:.2f} | {row['web_cpu_ms']:.2f} |"
        )
    print()
    print("| against the DRF floors, for information (median of the per-round ratios) | value |")
    print("|---|---:|")
    for label, value in floor_ratios(results):
        print(f"| {label} | {value:.2f} |")
    print()
    print("| ratio (median of the per-round ratios) | value | target | result |")
    print("|---|---:|---:|---|")
    checks = targets(results)
    for check in checks:
        sign = ">=" if check.at_least else "<="
        verdict = "PASS" if check.passed else "FAIL"
        print(f"| {check.label} | {check.value:.2f} | {sign} {check.bound:.2f} | {verdict} |")
    passed = all(c.passed for c in checks)
    print()
    print("ALL TARGETS PASS" if passed else f"{sum(not c.passed for c in checks)} TARGET(S) FAIL")
    return passed


# --- the run --------------------------------------------------------------------------------


def create_sessions(base_url: str, key: str, names: list[str]) -> dict[str, str]:
    ids = {}
    with httpx.Client(base_url=base_url, headers=auth(key), timeout=10) as client:
        for name in names:
            response = client.post(
                "/api/v1/sessions/", json={"system_prompt": SYSTEM_PROMPT, "external_id": f"bench-{name}"}
            )
            response.raise_for_status()
            ids[name] = response.json()["id"]
    return ids


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.loadgen == "auto":
        args.loadgen = "wrk" if shutil.which("wrk") else "python"
    if args.loadgen == "wrk" and not shutil.which("wrk"):
        sys.exit("wrk is not installed (apt-get install -y wrk), or use --loadgen python")
    env = {**os.environ, **bench_env(f"{args.pg_url}/{args.db_name}")}
    workdir = Path(tempfile.mkdtemp(prefix="memsite-bench-"))
    server: subprocess.Popen[bytes] | None = None
    started = time.monotonic()
    print(f"database {args.db_name}: create, migrate, key, seed ...", flush=True)
    create_database(args.pg_url, args.db_name)
    try:
        manage(env, "migrate", "--no-input")
        key = manage(env, "create_api_key", "--team", "bench", "--name", "bench").strip().splitlines()[-1]
        setup_django(env)
        seed_floor(args.floor_rows)
        close_django_connections()

        port = free_port()
        base_url = f"http://{HOST}:{port}"
        server = start_gunicorn(env, port, workdir / "gunicorn.log", app="bench.wsgi")
        wait_ready(f"{base_url}/bench/floor/read/", auth(key), server)
        processes = ServerProcesses(args.pg_url, args.db_name, server.pid)
        append_names = [f"append-{i}" for i in range(args.append_sessions)]
        ids = create_sessions(base_url, key, ["1k", "100k", *append_names])
        seeding = time.monotonic()
        seed_messages(ids["1k"], args.small)
        seed_messages(ids["100k"], args.large)
        vacuum_analyze()
        close_django_connections()
        print(f"seeded {args.small} + {args.large} messages in {time.monotonic() - seeding:.1f} s", flush=True)

        endpoints = [
            Endpoint("insert_limit", "POST", ["/bench/limit/insert/"], APPEND_BODY),
            Endpoint("insert_floor", "POST", ["/bench/floor/insert/"], APPEND_BODY),
            Endpoint("append", "POST", [f"/api/v1/sessions/{ids[n]}/messages/" for n in append_names], APPEND_BODY),
            Endpoint("read_limit", "GET", ["/bench/limit/read/"]),
            Endpoint("read_floor", "GET", ["/bench/floor/read/"]),
            Endpoint("context_1k", "GET", [f"/api/v1/sessions/{ids['1k']}/context/"]),
            Endpoint("context_100k", "GET", [f"/api/v1/sessions/{ids['100k']}/context/"]),
        ]
        smoke_check(base_url, key, endpoints)
        results = {e.name: Result(e) for e in endpoints}
        for endpoint in endpoints:
            print(f"warm-up {endpoint.name} ({args.warmup} s)", flush=True)
            generate_load(base_url, key, endpoint, args.warmup, args)
        for round_number in range(1, args.runs + 1):
            # Every other round runs backwards, so that no endpoint always follows the same one.
            for endpoint in endpoints if round_number % 2 else endpoints[::-1]:
                sample = measure(base_url, key, endpoint, args.duration, args, processes)
                results[endpoint.name].samples.append(sample)
                print(
                    f"run {round_number}/{args.runs} {endpoint.name:<13} {sample.rps:7.0f} req/s  "
                    f"p50 {sample.p50_ms:6.2f} ms  p99 {sample.p99_ms:6.2f} ms  "
                    f"CPU/req web {sample.web_cpu_ms:4.2f} db {sample.db_cpu_ms:4.2f} ms  "
                    f"other load {sample.foreign:4.0%}  "
                    f"errors {sample.errors}",
                    flush=True,
                )
        stop_gunicorn(server)
        problems = check_append_sessions([ids[n] for n in append_names])
        close_django_connections()

        header = [
            f"memsite API bench, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {time.monotonic() - started:.0f} s",
            f"machine: {machine_description()}; Python {platform.python_version()}; {pg_version(args.pg_url)}",
            f"server: gunicorn, 2 sync workers, DB_CONN_MAX_AGE=600, DEBUG=0, {HOST}:{port}",
            f"load: {args.loadgen}, {args.connections} connections"
            + (f", {args.threads} thread(s)" if args.loadgen == "wrk" else "")
            + f"; {args.warmup} s warm-up, then {args.runs} x {args.duration} s per endpoint, interleaved; medians",
            f"data: context_1k = {args.small} messages, context_100k = {args.large} messages, window 20 + system "
            f"prompt; read floor = last 20 of {args.floor_rows} rows; append cycles through {args.append_sessions} "
            "session(s)",
        ]
        passed = print_report(results, header)
        errors = sum(s.errors for r in results.values() for s in r.samples)
        write_figures(
            args.json,
            "api_bench",
            {
                "header": header,
                "endpoints": results,
                "against_limit_floors": limit_ratios(results),
                "against_drf_floors": dict(floor_ratios(results)),
                "targets": targets(results),
                "passed": passed,
                "failed_requests": errors,
                "problems": problems,
            },
        )
        if errors or problems:
            print(f"INVALID RUN: {errors} failed requests; {'; '.join(problems)}")
            print((workdir / "gunicorn.log").read_text()[-3000:])
            return 2
        return 0 if passed else 1
    finally:
        if server is not None:
            stop_gunicorn(server)
        if not args.keep_db:
            if "django" in sys.modules:
                close_django_connections()
            drop_database(args.pg_url, args.db_name)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
