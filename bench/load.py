"""Load: 50 simulated agents against gunicorn + a Celery worker on PostgreSQL and Redis.

    .venv/bin/python bench/load.py [--agents 50] [--duration 60] [--runs 3]
        [--database-url postgres://postgres@127.0.0.1:5432/memsite_load] [--redis-url redis://127.0.0.1:6379/7]

Creates (drops first) and migrates the database, FLUSHes the Redis database (the broker), starts
the scripted OpenAI-compatible LLM server of the tests in a child process (it answers at once:
summaries for compactions, the triples a conversation states for fact extraction, 3 of the
candidates for an experience selection), gunicorn as `make run` starts it (2 sync workers) and a
Celery worker as the Procfile starts it (prefork, concurrency 2, queues celery, compaction and
facts). Seeds one team with --experiences approved experiences (the harness's generator,
as bench/selection_bench.py) and one API key per agent.

Each run gives every agent a fresh session of its kind (2 in 5 managed sessions with a low
compaction threshold, so the worker compacts during the run; 1 in 5 "kg" sessions, whose appends
state facts, so extraction runs; the rest plain histories) and lets the agents loop for --duration
seconds: a short think time, then one weighted operation (see MIX). The asyncio client (httpx)
records each request's latency and status. Printed per run and as medians over the runs: per
endpoint count, req/s, p50/p95/p99 and errors; overall req/s and error rate; RSS of the web
(gunicorn master + workers) and worker (Celery master + pool) process trees at start and end;
compactions and extraction runs completed during the run and the queue depth at its end; the
load average and who used the CPU. Between runs the worker's backlog drains (bounded by --drain).
Everything is removed at the end (--keep-db keeps the database).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import (
    EXPERIENCE_ROLES,
    HOST,
    OTHERS,
    SUMMARY,
    CpuMeter,
    LLMServer,
    Worker,
    auth,
    close_django_connections,
    create_database,
    drop_database,
    free_port,
    json_option,
    machine_description,
    make_query,
    migrate,
    process_tree,
    rss_bytes,
    seed_experiences,
    serve_scripted_llm,
    server_versions,
    settle_database,
    setup_django,
    start_gunicorn,
    stop_gunicorn,
    wait_for_quiet,
    wait_ready,
    write_figures,
)

# The operation mix: (name, weight). Appends dominate as in an agent loop (every turn is written),
# context is read before most LLM calls, facts and experiences are looked up less often.
MIX = (
    ("append", 35),
    ("append_batch", 10),
    ("context", 25),
    ("facts", 12),
    ("select", 15),
    ("sessions", 3),
)
ENDPOINTS = (
    ("append", "POST /sessions/{id}/messages/ (one)"),
    ("append_batch", "POST /sessions/{id}/messages/ (3)"),
    ("context", "GET /sessions/{id}/context/"),
    ("facts", "GET /facts/?subject= or ?session="),
    ("select", "POST /experiences/select/"),
    ("sessions", "GET /sessions/?limit=20"),
)
BATCH = 3
QUEUES = ("celery", "compaction", "facts")
SYSTEM_PROMPT = "You are one agent of a team; you remember what the team decided."
# A turn of a plain or managed session (~45-60 tokens).
TURNS = {
    "user": (
        "Please summarise the deployment plan we agreed on yesterday: the database migration runs "
        "first, then the workers restart one at a time, and the API is switched over last. "
        "Note any step that still needs an owner."
    ),
    "assistant": (
        "The plan: migrate the database first, restart the workers one by one, then switch the API. "
        "The worker restart still needs an owner; I suggest the on-call engineer takes it."
    ),
}
TURN_TOKENS = 55  # about what one of TURNS counts with its message overhead
# A kg session's turns state one fact each, which the scripted extractor finds again.
PEOPLE = "Ada Alan Amara Bea Boris Chen Cleo Dara Eli Emre Femi Gia Hana Ivan Jae Kofi Lea Lin Mara Nia".split()
PLACES = "Lisbon Oslo Lagos Quito Hanoi Perth Tunis Lima Accra Riga".split()
COMPANIES = "Acme Globex Initech Umbrella Hooli Vandelay Stark Wayne Wonka Tyrell".split()
TOOLS = "postgres redis celery django kubernetes terraform vim docker grafana kafka".split()
STATED = ("works at", "lives in", "uses", "knows")
STATEMENT = re.compile(rf"^\[[^\]]+\] (.+?) ({'|'.join(STATED)}) (.+?)\.$", re.M)
CANDIDATE = re.compile(r"^- id: (\S+)$", re.M)
FACT_SYSTEM_PROMPT_START = "You extract knowledge-graph facts"
SELECTED_PER_ANSWER = 3
# CpuMeter's residual: the machine's busy time no listed or live foreign process accounts for
# (PostgreSQL's background processes and other databases' idle backends, Redis, the kernel, and
# processes that started and exited during the run, such as other people's short test runs).
UNATTRIBUTED = "PostgreSQL, Redis, kernel"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load per run")
    parser.add_argument("--runs", type=int, default=3, help="runs (medians reported)")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("LOAD_DATABASE_URL", f"postgres://postgres@{HOST}:5432/memsite_load"),
        help="PostgreSQL database of the bench: DROPPED, created and migrated",
    )
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("LOAD_REDIS_URL", f"redis://{HOST}:6379/7"),
        help="the broker's Redis database: FLUSHED at start and end",
    )
    parser.add_argument("--experiences", type=int, default=200, help="approved experiences seeded in the team")
    parser.add_argument("--threshold", type=int, default=2000, help="compaction threshold (tokens) of managed sessions")
    parser.add_argument("--think-ms", default="20,100", help="think time between an agent's requests: min,max ms")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn sync workers (make run: 2)")
    parser.add_argument("--worker-concurrency", type=int, default=2, help="Celery prefork pool (Procfile: 2)")
    parser.add_argument("--drain", type=float, default=180.0, help="max seconds to wait for the backlog between runs")
    parser.add_argument(
        "--quiet", type=float, default=0.25, help="before each run, wait until the machine is at most this busy"
    )
    parser.add_argument("--max-wait", type=float, default=120.0, help="seconds to wait for that before each run")
    parser.add_argument("--timeout", type=float, default=30.0, help="client timeout per request (s)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep-db", action="store_true", help="leave the database for inspection")
    parser.add_argument("--serve-llm", action="store_true", help=argparse.SUPPRESS)
    json_option(parser, "load")
    return parser.parse_args(argv)


# --- the scripted LLM, in a child process ------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def answer(body: dict[str, Any]) -> str:
    """One responder for the three kinds of request the product sends, told apart by the prompt."""
    messages = body.get("messages") or [{}]
    first, last = _text(messages[0].get("content")), _text(messages[-1].get("content"))
    if first.startswith(FACT_SYSTEM_PROMPT_START):
        facts = [
            {"subject": s, "predicate": p, "object": o, "confidence": 0.9, "replaces": p in ("works at", "lives in")}
            for s, p, o in STATEMENT.findall(last)
        ]
        return json.dumps({"facts": facts})
    ids = CANDIDATE.findall(last)
    if ids:  # an experience selection: the JSON object form, the same 3 for the same prompt
        chosen = set(random.Random(zlib.crc32(last.encode())).sample(ids, min(SELECTED_PER_ANSWER, len(ids))))
        return json.dumps({exp_id: exp_id in chosen for exp_id in ids})
    return SUMMARY


def serve_llm() -> None:
    serve_scripted_llm(answer)


# --- agents ------------------------------------------------------------------------------------


@dataclasses.dataclass
class Agent:
    number: int
    key: str
    kind: str  # managed_conversation | kg | conversation_history
    role: str  # the experience role it selects for
    rng: random.Random
    session_id: str = ""
    turns: int = 0

    def message(self) -> dict[str, Any]:
        role = ("user", "assistant")[self.turns % 2]
        self.turns += 1
        if self.kind == "kg":
            person = self.rng.choice(PEOPLE)
            predicate = self.rng.choice(STATED)
            value = {
                "works at": COMPANIES,
                "lives in": PLACES,
                "uses": TOOLS,
                "knows": PEOPLE,
            }[predicate]
            return {"role": role, "content": f"{person} {predicate} {self.rng.choice(value)}."}
        return {"role": role, "content": TURNS[role]}


def agent_kind(number: int) -> str:
    return ("managed_conversation", "managed_conversation", "kg", "conversation_history", "conversation_history")[
        number % 5
    ]


@dataclasses.dataclass
class Call:
    endpoint: str
    started: float
    seconds: float
    status: int  # 0: no answer (transport error or timeout)


def expected_status(endpoint: str) -> int:
    return 201 if endpoint.startswith("append") else 200


async def one_operation(client: httpx.AsyncClient, agent: Agent, endpoint: str) -> httpx.Response:
    headers = auth(agent.key)
    session = f"/api/v1/sessions/{agent.session_id}"
    if endpoint == "append":
        return await client.post(f"{session}/messages/", json=agent.message(), headers=headers)
    if endpoint == "append_batch":
        body = {"messages": [agent.message() for _ in range(BATCH)]}
        return await client.post(f"{session}/messages/", json=body, headers=headers)
    if endpoint == "context":
        return await client.get(f"{session}/context/", headers=headers)
    if endpoint == "facts":
        params = (
            {"session": agent.session_id, "limit": "20"}
            if agent.kind == "kg" and agent.rng.random() < 0.5
            else {"subject": agent.rng.choice(PEOPLE), "limit": "20"}
        )
        return await client.get("/api/v1/facts/", params=params, headers=headers)
    if endpoint == "select":
        body: dict[str, Any] = {"role": agent.role, "query": make_query(agent.rng)}
        if agent.rng.random() < 0.5:
            body["session_id"] = agent.session_id
        return await client.post("/api/v1/experiences/select/", json=body, headers=headers)
    if endpoint == "sessions":
        return await client.get("/api/v1/sessions/", params={"limit": "20"}, headers=headers)
    raise ValueError(endpoint)


async def agent_loop(
    client: httpx.AsyncClient, agent: Agent, deadline: float, think: tuple[float, float], calls: list[Call]
) -> None:
    names = [name for name, _ in MIX]
    weights = [weight for _, weight in MIX]
    # Agents start spread over the first think interval, not in lockstep.
    await asyncio.sleep(agent.rng.uniform(0, think[1]))
    while time.perf_counter() < deadline:
        endpoint = agent.rng.choices(names, weights)[0]
        started = time.perf_counter()
        try:
            response = await one_operation(client, agent, endpoint)
            status = response.status_code
        except httpx.HTTPError:
            status = 0
        calls.append(Call(endpoint, started, time.perf_counter() - started, status))
        await asyncio.sleep(agent.rng.uniform(*think))


async def create_sessions(client: httpx.AsyncClient, agents: list[Agent], run: int, threshold: int) -> None:
    async def create(agent: Agent) -> None:
        body: dict[str, Any] = {
            "system_prompt": SYSTEM_PROMPT,
            "external_id": f"load-{run}-{agent.number}",
            "memory_type": agent.kind,
        }
        if agent.kind == "managed_conversation":
            body["memory_config"] = {"threshold_tokens": threshold}
        response = await client.post("/api/v1/sessions/", json=body, headers=auth(agent.key))
        if response.status_code != 201:
            raise RuntimeError(f"session create: HTTP {response.status_code} {response.text[:300]}")
        agent.session_id = response.json()["id"]
        agent.turns = 0
        if agent.kind == "managed_conversation":
            # A history just under the threshold (not timed), so that every managed session is
            # compacted early in the run however slowly the machine serves it, and again later.
            history = {"messages": [agent.message() for _ in range(max(1, threshold * 95 // 100 // TURN_TOKENS))]}
            response = await client.post(
                f"/api/v1/sessions/{agent.session_id}/messages/", json=history, headers=auth(agent.key)
            )
            if response.status_code != 201:
                raise RuntimeError(f"history: HTTP {response.status_code} {response.text[:300]}")

    await asyncio.gather(*(create(agent) for agent in agents))


async def drive(base_url: str, agents: list[Agent], run: int, args: argparse.Namespace) -> tuple[list[Call], float]:
    think = tuple(float(x) / 1000 for x in args.think_ms.split(","))
    assert len(think) == 2
    limits = httpx.Limits(max_connections=len(agents), max_keepalive_connections=len(agents))
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=args.timeout) as client:
        await create_sessions(client, agents, run, args.threshold)
        calls: list[Call] = []
        started = time.perf_counter()
        deadline = started + args.duration
        await asyncio.gather(*(agent_loop(client, agent, deadline, think, calls) for agent in agents))  # type: ignore[arg-type]
        return calls, time.perf_counter() - started


def smoke_check(base_url: str, agent: Agent, threshold: int) -> None:
    """One request of each kind before any load: right status, and a selection that selects."""

    async def check() -> None:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            await create_sessions(client, [agent], 0, threshold)
            for endpoint, _ in ENDPOINTS:
                response = await one_operation(client, agent, endpoint)
                if response.status_code != expected_status(endpoint):
                    raise RuntimeError(f"{endpoint}: HTTP {response.status_code} {response.text[:500]}")
                if endpoint == "select":
                    data = response.json()
                    if data.get("skipped") or len(data["selected"]) != SELECTED_PER_ANSWER:
                        raise RuntimeError(f"select chose nothing: {json.dumps(data)[:500]}")

    asyncio.run(check())


# --- what the server side did ------------------------------------------------------------------


def job_counts(since: dt.datetime) -> dict[str, int]:
    """Compaction and extraction runs finished since `since`, by status, and the active ones."""
    from django.db.models import Q

    from memory_app.compaction.models import CompactionRun
    from memory_app.facts.models import FactExtractionRun

    counts: dict[str, int] = {}
    for label, model in (("compaction", CompactionRun), ("extraction", FactExtractionRun)):
        done, failed = model.Status.DONE, model.Status.FAILED
        finished = model.objects.filter(finished_at__gte=since)
        counts[f"{label}_done"] = finished.filter(status=done).count()
        counts[f"{label}_failed"] = finished.filter(status=failed).count()
        counts[f"{label}_active"] = model.objects.filter(Q(status="pending") | Q(status="running")).count()
    return counts


def database_backends(database_url: str) -> list[int]:
    """PostgreSQL backends serving the bench database (persistent connections: they stay)."""
    pg_url, _, name = database_url.rpartition("/")
    with psycopg.connect(f"{pg_url}/postgres", autocommit=True) as conn:
        rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [name]).fetchall()
    return [row[0] for row in rows]


def broker_depth(redis_url: str) -> int:
    """Messages waiting in the worker's queues (kombu keeps one list per queue and priority)."""
    client = redis.Redis.from_url(redis_url)
    total = 0
    for queue in QUEUES:
        for key in client.scan_iter(match=f"{queue}*"):
            if client.type(key) == b"list":
                total += client.llen(key)
    return total


def drain(redis_url: str, seconds: float) -> float:
    """Wait until no job is pending or running and the broker is empty; seconds waited."""
    from django.db import close_old_connections

    started = time.monotonic()
    while time.monotonic() - started < seconds:
        close_old_connections()
        counts = job_counts(dt.datetime.now(dt.UTC))
        if not counts["compaction_active"] and not counts["extraction_active"] and not broker_depth(redis_url):
            break
        time.sleep(1.0)
    return time.monotonic() - started


# --- figures -----------------------------------------------------------------------------------


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


@dataclasses.dataclass
class EndpointFigures:
    count: int
    rps: float
    p50: float
    p95: float
    p99: float
    errors: int
    statuses: Counter[int]


@dataclasses.dataclass
class RunFigures:
    number: int
    seconds: float
    endpoints: dict[str, EndpointFigures]
    requests: int
    errors: int
    rss: dict[str, tuple[int, int]]  # web/worker: (start, end) bytes
    jobs: dict[str, int]
    broker_depth: int
    load: tuple[float, float]  # 1-min load average at start and end
    cores: dict[str, float]
    busy_before: float  # the machine's busy share just before the run, the bench idle
    drained: float = 0.0

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    @property
    def error_rate(self) -> float:
        return self.errors / max(self.requests, 1)


def endpoint_figures(calls: list[Call], seconds: float) -> dict[str, EndpointFigures]:
    figures = {}
    for endpoint, _ in ENDPOINTS:
        mine = [c for c in calls if c.endpoint == endpoint]
        times = [c.seconds * 1000 for c in mine]
        statuses = Counter(c.status for c in mine)
        figures[endpoint] = EndpointFigures(
            count=len(mine),
            rps=len(mine) / seconds,
            p50=pct(times, 50),
            p95=pct(times, 95),
            p99=pct(times, 99),
            errors=sum(1 for c in mine if c.status != expected_status(endpoint)),
            statuses=statuses,
        )
    return figures


def mib(value: float) -> str:
    return f"{value / 2**20:.0f}"


def cores_by_group(cores: dict[str, float]) -> dict[str, float]:
    """CpuMeter's per-process cores summed per process tree (web:123 + web:124 -> web)."""
    groups: dict[str, float] = {}
    for name, value in cores.items():
        group = name.split(":", 1)[0]
        groups[group] = groups.get(group, 0.0) + value
    return groups


def print_run(run: RunFigures) -> None:
    print(
        f"run {run.number}: {run.rps:.0f} req/s over {run.seconds:.1f} s, {run.requests} requests, "
        f"{run.errors} errors ({run.error_rate:.2%}); compactions {run.jobs['compaction_done']} "
        f"(+{run.jobs['compaction_failed']} failed), extraction runs {run.jobs['extraction_done']} "
        f"(+{run.jobs['extraction_failed']} failed); at the end {run.broker_depth} queued in Redis, "
        f"{run.jobs['compaction_active']} compactions and {run.jobs['extraction_active']} extractions "
        f"pending/running; machine {run.busy_before:.0%} busy before; load avg {run.load[0]:.2f} -> {run.load[1]:.2f}; "
        f"cores {', '.join(f'{k} {v:.2f}' for k, v in run.cores.items())}",
        flush=True,
    )
    for endpoint, figures in run.endpoints.items():
        bad = {s: n for s, n in figures.statuses.items() if s != expected_status(endpoint)}
        print(
            f"  {endpoint:<13} {figures.count:6d} {figures.rps:6.1f} req/s  p50 {figures.p50:7.1f}  "
            f"p95 {figures.p95:7.1f}  p99 {figures.p99:7.1f} ms  errors {figures.errors}"
            + (f" {dict(bad)}" if bad else ""),
            flush=True,
        )


def report(header: list[str], runs: list[RunFigures]) -> None:
    print()
    for line in header:
        print(line)
    print()
    print(
        "| run | req/s | requests | errors | error rate | web RSS MiB start -> end | worker RSS MiB start -> end "
        "| compactions done | extraction runs done | queued at end (Redis / DB active) | busy before "
        "| load avg start -> end "
        "| cores: web, worker, client, LLM, bench db backends, unattributed, other processes |"
    )
    print("|---:|---:|---:|---:|---:|---|---|---:|---:|---|---:|---|---|")
    for run in runs:
        web, worker = run.rss["web"], run.rss["worker"]
        c = run.cores
        print(
            f"| {run.number} | {run.rps:.0f} | {run.requests} | {run.errors} | {run.error_rate:.2%} "
            f"| {mib(web[0])} -> {mib(web[1])} | {mib(worker[0])} -> {mib(worker[1])} "
            f"| {run.jobs['compaction_done']} | {run.jobs['extraction_done']} "
            f"| {run.broker_depth} / {run.jobs['compaction_active'] + run.jobs['extraction_active']} "
            f"| {run.busy_before:.0%} | {run.load[0]:.2f} -> {run.load[1]:.2f} "
            f"| {c['web']:.2f}, {c['worker']:.2f}, {c['client']:.2f}, {c['LLM']:.2f}, "
            f"{c['db']:.2f}, {c[UNATTRIBUTED]:.2f}, {c[OTHERS]:.2f} |"
        )
    median = statistics.median
    print(
        f"| median | {median(r.rps for r in runs):.0f} | {median(r.requests for r in runs):.0f} "
        f"| {median(r.errors for r in runs):.0f} | {median(r.error_rate for r in runs):.2%} "
        f"| {mib(median(r.rss['web'][0] for r in runs))} -> {mib(median(r.rss['web'][1] for r in runs))} "
        f"| {mib(median(r.rss['worker'][0] for r in runs))} -> {mib(median(r.rss['worker'][1] for r in runs))} "
        f"| {median(r.jobs['compaction_done'] for r in runs):.0f} "
        f"| {median(r.jobs['extraction_done'] for r in runs):.0f} "
        f"| {median(r.broker_depth for r in runs):.0f} / "
        f"{median(r.jobs['compaction_active'] + r.jobs['extraction_active'] for r in runs):.0f} "
        f"| {median(r.busy_before for r in runs):.0%} "
        f"| {median(r.load[0] for r in runs):.2f} -> {median(r.load[1] for r in runs):.2f} | |"
    )
    print()
    print("| endpoint | requests (median) | req/s | p50 ms | p95 ms | p99 ms | errors (all runs) | req/s of each run |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for endpoint, label in ENDPOINTS:
        figures = [r.endpoints[endpoint] for r in runs]
        print(
            f"| {endpoint}: {label} | {median(f.count for f in figures):.0f} | {median(f.rps for f in figures):.1f} "
            f"| {median(f.p50 for f in figures):.1f} | {median(f.p95 for f in figures):.1f} "
            f"| {median(f.p99 for f in figures):.1f} | {sum(f.errors for f in figures)} "
            f"| {', '.join(f'{f.rps:.1f}' for f in figures)} |"
        )
    drained = ", ".join(f"{r.drained:.0f} s" for r in runs)
    print()
    print(f"backlog drained after each run in: {drained}")


# --- the run -----------------------------------------------------------------------------------


def seed(args: argparse.Namespace) -> list[Agent]:
    from memory_app.tenancy import services as tenancy  # after setup_django: it loads models

    rng = random.Random(args.seed)
    team = tenancy.team_get_or_create(name="load")
    other = tenancy.team_get_or_create(name="load-other")
    seeded = seed_experiences(team, other, args.experiences, rng)
    print(
        f"seeded {seeded.experiences} approved experiences (+{seeded.others} drafts, disabled and another "
        f"team's) in {seeded.seconds:.1f} s",
        flush=True,
    )
    agents = []
    for number in range(args.agents + 1):  # the extra one is the smoke check's
        _, key = tenancy.api_key_create(team=team, name=f"agent-{number}")
        agents.append(
            Agent(
                number=number,
                key=key,
                kind=agent_kind(number),
                role=EXPERIENCE_ROLES[number % len(EXPERIENCE_ROLES)],
                rng=random.Random(args.seed * 1000 + number),
            )
        )
    settle_database()
    close_django_connections()
    return agents


def one_run(
    number: int, base_url: str, agents: list[Agent], args: argparse.Namespace, trees: dict[str, int]
) -> RunFigures:
    busy_before = wait_for_quiet(args.quiet, args.max_wait)
    rss_start = {name: rss_bytes(process_tree(pid)) for name, pid in trees.items()}
    pids = {f"{name}:{pid}": pid for name, root in trees.items() for pid in process_tree(root)}
    pids.update({f"db:{pid}": pid for pid in database_backends(args.database_url)})
    meter = CpuMeter({**pids, "client": os.getpid()}, args.database_url.rsplit("/", 1)[1])
    since = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()[0]
    meter.start()
    calls, seconds = asyncio.run(drive(base_url, agents, number, args))
    cores = cores_by_group(meter.stop())
    load_end = os.getloadavg()[0]
    rss_end = {name: rss_bytes(process_tree(pid)) for name, pid in trees.items()}
    close_django_connections()
    jobs = job_counts(since)
    depth = broker_depth(args.redis_url)
    endpoints = endpoint_figures(calls, seconds)
    return RunFigures(
        number=number,
        seconds=seconds,
        endpoints=endpoints,
        requests=len(calls),
        errors=sum(f.errors for f in endpoints.values()),
        rss={name: (rss_start[name], rss_end[name]) for name in trees},
        jobs=jobs,
        broker_depth=depth,
        load=(load_start, load_end),
        cores=cores,
        busy_before=busy_before,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_llm:
        serve_llm()
        return 0
    # SIGTERM (also what a background job gets instead of Ctrl-C) still runs the clean-up below.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    started = time.monotonic()
    pg_url, _, db_name = args.database_url.rpartition("/")
    workdir = Path(tempfile.mkdtemp(prefix="memsite-load-"))
    redis.Redis.from_url(args.redis_url).flushdb()
    create_database(pg_url, db_name)
    llm: LLMServer | None = None
    worker: Worker | None = None
    server = None
    try:
        llm = LLMServer(Path(__file__))
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "memsite.settings",
            "DATABASE_URL": args.database_url,
            "DB_CONN_MAX_AGE": "600",
            "REDIS_URL": args.redis_url,
            "CELERY_BROKER_URL": args.redis_url,
            "LLM_BACKEND": "",
            "LLM_BASE_URL": llm.base_url,
            "LLM_API_KEY": "sk-bench",
            "LLM_MODEL": "scripted-model",
            "LLM_TIMEOUT": "60",
            "DEBUG": "0",
            "MEMSITE_VAR_DIR": str(workdir),
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "WARNING",
        }
        (workdir / "staticfiles").mkdir()
        print(f"database {db_name}: create, migrate; LLM at {llm.base_url} ...", flush=True)
        migrate(env)
        setup_django(env)
        from django.conf import settings

        if settings.DEBUG or not settings.CELERY_BROKER_URL.startswith("redis://"):
            raise RuntimeError("expected DEBUG off and the Redis broker")
        agents = seed(args)
        worker = Worker({**env, "LOG_LEVEL": "INFO"}, ",".join(QUEUES), concurrency=args.worker_concurrency)
        port = free_port()
        base_url = f"http://{HOST}:{port}"
        server = start_gunicorn(env, port, workdir / "gunicorn.log", workers=args.web_workers)
        wait_ready(f"{base_url}/healthz", {}, server)
        smoke_check(base_url, agents[-1], args.threshold)
        agents = agents[:-1]
        trees = {"web": server.pid, "worker": worker.process.pid, "LLM": llm.process.pid}
        runs: list[RunFigures] = []
        for number in range(1, args.runs + 1):
            if runs:
                runs[-1].drained = drain(args.redis_url, args.drain)
            else:
                drain(args.redis_url, args.drain)
            print(f"run {number}/{args.runs}: {len(agents)} agents for {args.duration:.0f} s", flush=True)
            run = one_run(number, base_url, agents, args, trees)
            runs.append(run)
            print_run(run)
        runs[-1].drained = drain(args.redis_url, args.drain)

        think = args.think_ms.replace(",", "-")
        header = [
            f"memsite load bench, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {time.monotonic() - started:.0f} s",
            f"machine: {machine_description()}; Python {platform.python_version()}; "
            f"{server_versions(pg_url, args.redis_url)}",
            f"server: gunicorn {args.web_workers} sync workers + Celery prefork worker (concurrency "
            f"{args.worker_concurrency}, queues {','.join(QUEUES)}), DEBUG=0, DB_CONN_MAX_AGE=600; no beat "
            "(sweepers off); LLM: the scripted OpenAI-compatible server (instant answers) for compaction, "
            "extraction and selection",
            f"load: {len(agents)} agents (asyncio + httpx, one API key and one session each: "
            f"{sum(a.kind == 'managed_conversation' for a in agents)} managed with threshold_tokens "
            f"{args.threshold}, {sum(a.kind == 'kg' for a in agents)} kg, "
            f"{sum(a.kind == 'conversation_history' for a in agents)} plain), think time {think} ms, "
            f"mix {', '.join(f'{n} {w}%' for n, w in MIX)}; {args.runs} x {args.duration:.0f} s",
            f"data: {args.experiences} approved experiences over {len(EXPERIENCE_ROLES)} roles; "
            "every run starts new sessions",
        ]
        report(header, runs)
        errors = sum(r.errors for r in runs)
        write_figures(args.json, "load", {"header": header, "runs": runs, "errors": errors})
        if errors:
            print(f"{errors} failed requests; gunicorn log tail:")
            print((workdir / "gunicorn.log").read_text()[-3000:])
        return 0
    finally:
        if server is not None:
            stop_gunicorn(server)
        if worker is not None:
            worker.stop()
        if llm is not None:
            llm.stop()
        if "django" in sys.modules:
            close_django_connections()
        if not args.keep_db:
            drop_database(pg_url, db_name)
        redis.Redis.from_url(args.redis_url).flushdb()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
