"""What a managed context keeps of a long agent session, and what reading it costs.

    .venv/bin/python bench/retention_bench.py [--quick] [--seeds 5] [--messages 800] [--ratios 2,5,10,20]
        [--sizes 1000,10000,100000] [--llm-base-url URL --llm-model M --llm-api-key K]

All in this process, through the real URLconf: Django's test Client with a real API key (no
server), the compaction task body called as a worker calls it, right after each append that
queued a run. SQLite in MEMSITE_VAR_DIR (default /tmp/var-bench) unless DATABASE_URL names a
PostgreSQL server: then a dedicated database on it (`memsite_retention_bench`), dropped at the end.

1. Retention. `bench/retention_sessions.py` generates seeded agent sessions (tool calls, tool
   outputs, decisions; one planted item per 12 messages, each referred back to later). For each
   seed and compression ratio r, a managed session with threshold_tokens = the session's tokens / r
   gets every message appended through the API (POST /messages/, one at a time); each append that
   queues a compaction has it run before the next append. Beside it, in the same run and on the
   same messages: the plain last-N window (a conversation_history session fed in lock-step by batch
   appends, read with GET /context/?last=N, N the most newest messages within the tokens the
   managed context served at that point) and marsys 0.2.1's own pipeline (tool truncation +
   backward packing, threshold = its own token estimate / r, `compact_if_needed()` after every
   message; bench/retention_marsys.py in the marsys venv). Every arm's context is read after each
   tenth of the session. Printed per ratio and arm: the share of planted items whose exact text is
   in the context at the end (median over seeds) and on average over the ten reads (among the
   items planted so far), tokens served, LLM tokens spent: what the backend reported, and what
   the summarisation requests and answers count with the product's tokenizer (the offline
   backend reports 0; "counted" is what a model would have been sent and have answered).
   Goal, offline backend, 10x: >= 95 % retained where the last-N window keeps < 30 %.
2. Reads. Managed sessions of --sizes messages (the generator's light profile, bulk-loaded with
   the product's `message_append` service in batches) with summarization disabled
   (memory_config active_context.summarization.enabled=false, threshold --read-threshold): GET
   /context/ p50, beside GET /messages/?last=N of the same session (N = the messages the context
   served) and a bench endpoint serving exactly the same rows by primary key
   (bench/retention_server.py), interleaved in rounds; medians of the per-round figures. Goals:
   context p50 at the largest size <= 3x the primary-key read; p50 at 100k <= 1.2x p50 at 10k.
   Compaction runs the bulk load queued (none expected) are counted, not executed.

See bench/README.md for the method and the latest results.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import ROOT, json_option, machine_description, settle_database, wait_for_quiet, write_figures
from bench.retention_sessions import CARRIERS, KINDS, GeneratedSession, generate, present

DB_NAME = "memsite_retention_bench"
MARSYS_PYTHON = ROOT / "var" / "marsys-venv" / "bin" / "python"
SUMMARY_MARKS = ("[Compacted Context Summary]", "[User Requests Summary]")
ARMS = ("memsite", "last-N", "marsys")
CHECKPOINTS = 10  # contexts read per session: after every tenth of its messages


# --- command line ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 seeds of 300 messages, 3 read rounds of 30 (~75 s)")
    parser.add_argument("--seeds", type=int, help="sessions per ratio (medians reported); default 5, quick 2")
    parser.add_argument("--messages", type=int, help="messages per generated session; default 800, quick 300")
    parser.add_argument("--ratios", default="2,5,10,20", help="compression ratios (history tokens / threshold)")
    parser.add_argument("--sizes", default="1000,10000,100000", help="messages of the read sessions")
    parser.add_argument("--rounds", type=int, help="read rounds (medians of per-round p50s); default 5, quick 3")
    parser.add_argument("--reads", type=int, help="timed reads per endpoint and size in a round; default 100, quick 30")
    parser.add_argument("--read-threshold", type=int, default=8000, help="threshold_tokens of the read sessions")
    parser.add_argument("--skip-retention", action="store_true")
    parser.add_argument("--skip-reads", action="store_true")
    parser.add_argument("--llm-base-url", help="an OpenAI-compatible server instead of the offline backend")
    parser.add_argument("--llm-model", default=os.environ.get("LLM_MODEL", "gpt-4o-mini"))
    parser.add_argument("--llm-api-key", default=os.environ.get("LLM_API_KEY", "sk-bench"))
    parser.add_argument("--llm-timeout", type=float, default=300.0)
    parser.add_argument("--marsys-python", default=str(MARSYS_PYTHON), help="the marsys venv's python")
    parser.add_argument("--quiet", type=float, default=0.15, help="max busy share of the machine before a read round")
    parser.add_argument("--max-wait", type=float, help="seconds to wait for a quiet machine; default 20, quick 5")
    parser.add_argument("--keep-db", action="store_true", help="leave the database for inspection")
    json_option(parser, "retention_bench")
    args = parser.parse_args(argv)
    quick = args.quick
    args.seeds = args.seeds or (2 if quick else 5)
    args.messages = args.messages or (300 if quick else 800)
    args.sizes = [int(x) for x in args.sizes.split(",")]
    args.rounds = args.rounds or (3 if quick else 5)
    args.reads = args.reads or (30 if quick else 100)
    args.ratios = [float(x) for x in args.ratios.split(",")]
    args.max_wait = args.max_wait if args.max_wait is not None else (5.0 if quick else 20.0)
    return args


# --- database and Django -----------------------------------------------------------------------


def server_url(database_url: str, name: str) -> str:
    parts = urlsplit(database_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def prepare_environment(args: argparse.Namespace) -> dict[str, Any]:
    """Environment of the in-process Django; returns how the database is made and removed."""
    from memory_app.llm import EXTRACTIVE_BACKEND, OPENAI_BACKEND  # no Django settings read at import

    var_dir = Path(os.environ.setdefault("MEMSITE_VAR_DIR", "/tmp/var-bench"))
    (var_dir / "staticfiles").mkdir(parents=True, exist_ok=True)  # whitenoise warns without it
    database_url = os.environ.get("DATABASE_URL", "")
    db: dict[str, Any] = {"vendor": "sqlite"}
    if database_url:
        if not database_url.startswith(("postgres://", "postgresql://")):
            sys.exit("DATABASE_URL: only PostgreSQL is supported besides the default SQLite")
        db = {"vendor": "postgresql", "admin": server_url(database_url, "postgres"), "name": DB_NAME}
        os.environ["DATABASE_URL"] = server_url(database_url, DB_NAME)
    else:
        sqlite = var_dir / "retention-bench.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{sqlite}{suffix}").unlink(missing_ok=True)
        os.environ["SQLITE_PATH"] = str(sqlite)
        db["path"] = sqlite
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "memsite.settings",
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
            # Sends are recorded, and the bench runs each queued compaction itself, in-process.
            "MEMSITE_JOB_DISPATCHER": "memory_app.jobs.dispatchers.RecordingDispatcher",
            # A bench session takes seconds, a real one hours: the 60 s back-off after a failed run
            # would hold the rest of the session back (failed runs are counted and printed).
            "MEMSITE_COMPACTION_MIN_INTERVAL": "0",
            "LLM_BACKEND": "bench.retention_server.MeteredBackend",
            "RETENTION_INNER_LLM_BACKEND": OPENAI_BACKEND if args.llm_base_url else EXTRACTIVE_BACKEND,
        }
    )
    if args.llm_base_url:
        os.environ.update(
            {
                "LLM_BASE_URL": args.llm_base_url,
                "LLM_MODEL": args.llm_model,
                "LLM_API_KEY": args.llm_api_key,
                "LLM_TIMEOUT": str(args.llm_timeout),
            }
        )
    else:
        os.environ.pop("LLM_BASE_URL", None)
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)  # nothing is sent to a broker; the cache stays in MEMSITE_VAR_DIR
    if db["vendor"] == "postgresql":
        import psycopg
        from psycopg import sql

        with psycopg.connect(db["admin"], autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB_NAME)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DB_NAME)))
    return db


def remove_database(db: dict[str, Any]) -> None:
    if "django" in sys.modules:
        from django.db import connections

        connections.close_all()
    if db["vendor"] == "postgresql":
        import psycopg
        from psycopg import sql

        with psycopg.connect(db["admin"], autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DB_NAME)))
    else:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db['path']}{suffix}").unlink(missing_ok=True)


def database_version() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SHOW server_version")
            return f"PostgreSQL {cursor.fetchone()[0]}"
        cursor.execute("SELECT sqlite_version()")
        return f"SQLite {cursor.fetchone()[0]} ({connection.settings_dict['NAME']})"


class Api:
    """The product's API through Django's test Client (the real URLconf, middleware and key auth)."""

    def __init__(self, key: str) -> None:
        from django.test import Client

        self.client = Client(headers={"Authorization": f"Bearer {key}"})

    def get(self, path: str) -> Any:
        response = self.client.get(path)
        if response.status_code != 200:
            raise RuntimeError(f"GET {path}: HTTP {response.status_code} {response.content[:500]!r}")
        return response.json()

    def post(self, path: str, body: Any) -> Any:
        response = self.client.post(path, data=json.dumps(body), content_type="application/json")
        if response.status_code not in (200, 201):
            raise RuntimeError(f"POST {path}: HTTP {response.status_code} {response.content[:500]!r}")
        return response.json()

    def create_session(self, *, name: str, system_prompt: str, memory_type: str, config: dict | None = None) -> str:
        body: dict[str, Any] = {"external_id": name, "system_prompt": system_prompt, "memory_type": memory_type}
        if config is not None:
            body["memory_config"] = config
        return self.post("/api/v1/sessions/", body)["id"]


def run_queued_compactions() -> list[str]:
    """Run every compaction the recording dispatcher holds, as a worker would (the task body),
    until none is left (a run may queue another); their status strings."""
    from memory_app.compaction.services import JOB
    from memory_app.jobs import dispatchers
    from memory_app.tasks import compact_session

    statuses = []
    while dispatchers.outbox:
        sent = dispatchers.outbox.pop(0)
        if sent.task != JOB.task:
            continue
        if sent.countdown:
            time.sleep(min(sent.countdown, 60))  # a retry's back-off, as the broker would hold it
        statuses.append(compact_session(sent.job_id))
    return statuses


# --- 1. retention ------------------------------------------------------------------------------


@dataclass
class ArmResult:
    retained: list[bool]  # per planted item, at the end of the session
    served_tokens: int  # at the end of the session
    trace: list[tuple[float, int]] = field(default_factory=list)  # (share so far, tokens) per checkpoint
    llm_reported: int = 0
    llm_counted: int = 0
    compactions: int = 0
    other_runs: dict[str, int] = field(default_factory=dict)  # memsite: runs that ended otherwise, by status: error
    window: int | None = None  # last-N: N
    in_summary: list[bool] = field(default_factory=list)  # memsite: found in the summary messages
    covered: list[bool] = field(default_factory=list)  # memsite: every mention is in the summarised range
    summary_tokens: int = 0

    @property
    def share(self) -> float:
        return sum(self.retained) / max(len(self.retained), 1)

    @property
    def mean_share(self) -> float:
        return statistics.mean(share for share, _ in self.trace)

    @property
    def mean_tokens(self) -> float:
        return statistics.mean(tokens for _, tokens in self.trace)


def message_tokens(messages: list[dict[str, Any]]) -> list[int]:
    from memory_app.conversations import counting

    return [counting.message_tokens(m) for m in messages]


def request_tokens(system_prompt: str, messages: list[dict[str, Any]]) -> int:
    """A request's tokens as the context endpoint counts them (system prompt, messages, priming)."""
    from memory_app.conversations import tokens

    system = message_tokens([{"role": "system", "content": system_prompt}])
    return tokens.count_request([*system, *message_tokens(messages)])


def checkpoints_of(session: GeneratedSession) -> list[int]:
    """Message counts at which every arm's context is read: every tenth of the session."""
    n = len(session.messages)
    return sorted({max(1, round(n * k / CHECKPOINTS)) for k in range(1, CHECKPOINTS + 1)})


def share_so_far(session: GeneratedSession, messages: list[dict[str, Any]], count: int) -> float:
    """Retention among the items planted in the first `count` messages."""
    planted = [p for p in session.planted if p.planted_at < count]
    return sum(present(planted, messages)) / max(len(planted), 1)


def window_size(counts: list[int], fixed: int, budget: int) -> int:
    """The most newest messages (of `counts`) whose request, with `fixed`, fits `budget` tokens."""
    used, n = fixed, 0
    for count in reversed(counts):
        if used + count > budget:
            break
        used += count
        n += 1
    return max(n, 1)


def replay(api: Api, session: GeneratedSession, ratio: float, threshold: int) -> tuple[ArmResult, ArmResult]:
    """The session through a managed session (threshold `threshold`), one append at a time, each
    queued compaction run before the next append; in lock-step, the same messages in a plain
    conversation_history session (batch appends). At each checkpoint both contexts are read: the
    plain one as the last-N window with as many tokens as the managed context served."""
    from django.conf import settings

    from bench.retention_server import MeteredBackend
    from memory_app.compaction.models import CompactionRun

    managed_id = api.create_session(
        name=f"managed-{session.seed}-{ratio:g}",
        system_prompt=session.system_prompt,
        memory_type="managed_conversation",
        config={"threshold_tokens": threshold},
    )
    plain_id = api.create_session(
        name=f"plain-{session.seed}-{ratio:g}", system_prompt=session.system_prompt, memory_type="conversation_history"
    )
    counts = message_tokens(session.messages)
    fixed = request_tokens(session.system_prompt, [])
    checkpoints = set(checkpoints_of(session))
    managed_trace: list[tuple[float, int]] = []
    window_trace: list[tuple[float, int]] = []
    calls_before = len(MeteredBackend.calls)
    in_plain = 0
    served: dict[str, Any] = {}
    window: dict[str, Any] = {}
    n = 1
    for index, message in enumerate(session.messages):
        api.post(f"/api/v1/sessions/{managed_id}/messages/", message)
        run_queued_compactions()
        count = index + 1
        if count not in checkpoints:
            continue
        served = api.get(f"/api/v1/sessions/{managed_id}/context/")
        managed_trace.append((share_so_far(session, served["messages"], count), served["token_count"]))
        for start in range(in_plain, count, settings.MAX_MESSAGES_PER_REQUEST):
            batch = session.messages[start : min(start + settings.MAX_MESSAGES_PER_REQUEST, count)]
            api.post(f"/api/v1/sessions/{plain_id}/messages/", {"messages": batch})
        in_plain = count
        n = window_size(counts[:count], fixed, served["token_count"])
        window = api.get(f"/api/v1/sessions/{plain_id}/context/?last={n}")
        window_trace.append((share_so_far(session, window["messages"], count), window["token_count"]))
    calls = MeteredBackend.calls[calls_before:]
    runs = list(CompactionRun.objects.filter(session_id=managed_id))
    done = [r for r in runs if r.status == CompactionRun.Status.DONE]
    covered_to = max((r.covered_to_seq or 0 for r in done), default=0)
    summary = [m for m in served["messages"] if str(m.get("content") or "").startswith(SUMMARY_MARKS)]
    managed = ArmResult(
        retained=present(session.planted, served["messages"]),
        served_tokens=served["token_count"],
        trace=managed_trace,
        llm_reported=sum(c.reported_prompt + c.reported_completion for c in calls),
        llm_counted=sum(c.counted_prompt + c.counted_completion for c in calls),
        compactions=len(done),
        other_runs=dict(Counter(f"{r.status}: {r.error[:80]}" for r in runs if r.status != CompactionRun.Status.DONE)),
        in_summary=present(session.planted, summary),
        # seq = position + 1: the session's messages were appended in order, one per seq.
        covered=[max(p.planted_at, *p.referenced_at) + 1 <= covered_to for p in session.planted],
        summary_tokens=sum(message_tokens(summary)),
    )
    last_n = ArmResult(
        retained=present(session.planted, window["messages"]),
        served_tokens=window["token_count"],
        trace=window_trace,
        window=n,
    )
    return managed, last_n


def run_marsys(python: str, sessions: list[GeneratedSession], ratios: list[float]) -> tuple[str, dict[str, Any]]:
    request = {
        "sessions": {str(s.seed): s.messages for s in sessions},
        "checkpoints": {str(s.seed): checkpoints_of(s) for s in sessions},
        "ratios": ratios,
    }
    result = subprocess.run(
        [python, str(ROOT / "bench" / "retention_marsys.py")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    if result.returncode != 0:
        raise RuntimeError(f"marsys driver failed:\n{result.stderr[-3000:]}")
    answer = json.loads(result.stdout)
    return answer["marsys_version"], answer["results"]


def marsys_arm(session: GeneratedSession, theirs: dict[str, Any]) -> ArmResult:
    snapshots = theirs["snapshots"]
    final = snapshots[-1]["messages"]
    return ArmResult(
        retained=present(session.planted, final),
        served_tokens=request_tokens(session.system_prompt, final),
        trace=[
            (share_so_far(session, s["messages"], s["count"]), request_tokens(session.system_prompt, s["messages"]))
            for s in snapshots
        ],
        compactions=theirs["compactions"],
    )


@dataclass
class Retention:
    sessions: list[GeneratedSession]
    history_tokens: dict[int, int]  # seed -> tokens of the whole session as one request
    results: dict[tuple[float, str], list[ArmResult]]  # (ratio, arm) -> one per seed
    marsys_version: str
    seconds: float


def bench_retention(api: Api, args: argparse.Namespace) -> Retention:
    started = time.monotonic()
    sessions = [generate(seed, args.messages) for seed in range(1, args.seeds + 1)]
    print("marsys: replaying the sessions ...", flush=True)
    marsys_version, marsys = run_marsys(args.marsys_python, sessions, args.ratios)
    results: dict[tuple[float, str], list[ArmResult]] = defaultdict(list)
    history: dict[int, int] = {}
    for session in sessions:
        total = request_tokens(session.system_prompt, session.messages)
        history[session.seed] = total
        for ratio in args.ratios:
            began = time.monotonic()
            managed, window = replay(api, session, ratio, max(int(total / ratio), 1))
            reference = marsys_arm(session, marsys[f"{session.seed}:{ratio}"])
            results[(ratio, "memsite")].append(managed)
            results[(ratio, "last-N")].append(window)
            results[(ratio, "marsys")].append(reference)
            print(
                f"  seed {session.seed} ({len(session.messages)} messages, {total:,} tokens, "
                f"{len(session.planted)} items) {ratio:g}x: memsite {managed.share:.0%} in "
                f"{managed.served_tokens:,} tokens ({managed.compactions} compactions, "
                f"{sum(managed.other_runs.values())} runs without a summary), "
                f"last-{window.window} {window.share:.0%}, marsys {reference.share:.0%} in "
                f"{reference.served_tokens:,} tokens; {time.monotonic() - began:.1f} s",
                flush=True,
            )
    return Retention(sessions, history, results, marsys_version, time.monotonic() - started)


# --- 2. reads ----------------------------------------------------------------------------------


@dataclass
class ReadSession:
    size: int
    session_id: str
    served: int  # messages of the context after the system prompt
    served_tokens: int
    queued_runs: int
    load_seconds: float
    p50: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # endpoint -> per round


def bulk_load(api: Api, size: int, threshold: int) -> ReadSession:
    """A managed session (summarization disabled) of `size` messages, appended by the product's
    `message_append` service in batches: the bulk path an import takes."""
    from bench.retention_server import FLOOR_ROWS
    from memory_app.conversations import services
    from memory_app.conversations.models import Message, Session
    from memory_app.jobs import dispatchers
    from memory_client.vocabulary.messages import to_openai_message

    generated = generate(10_000 + size, size, items=0, profile="light")
    started = time.monotonic()
    session_id = api.create_session(
        name=f"read-{size}",
        system_prompt=generated.system_prompt,
        memory_type="managed_conversation",
        config={"threshold_tokens": threshold, "active_context": {"summarization": {"enabled": False}}},
    )
    session = Session.objects.get(pk=session_id)
    dispatchers.outbox.clear()
    for start in range(0, size, 2000):  # PostgreSQL takes at most 65535 parameters a statement
        services.message_append(session=session, messages=generated.messages[start : start + 2000])
    queued = len(dispatchers.outbox)
    dispatchers.outbox.clear()  # not run: the reads measure the context without a summary
    load_seconds = time.monotonic() - started
    context = api.get(f"/api/v1/sessions/{session_id}/context/")
    body = context["messages"][1:]  # after the system prompt
    # The rows the context serves, newest first, paired with the served messages.
    rows = list(
        Message.objects.filter(session_id=session_id)
        .order_by("-seq")
        .values("id", "seq", "role", "content", "name", "tool_calls", "tool_call_id", "images")[: len(body) + 20]
    )
    ids, position = [], 0
    for message in reversed(body):
        while position < len(rows) and to_openai_message(rows[position]) != message:
            position += 1
        if position == len(rows):
            raise RuntimeError(f"read-{size}: a served message is not among the newest rows")
        ids.append(rows[position]["id"])
        position += 1
    FLOOR_ROWS[session_id] = ids[::-1]
    floor = api.get(f"/bench/retention/pk/{session_id}/")
    if floor["messages"] != body:
        raise RuntimeError(f"read-{size}: the primary-key floor does not serve the context's rows")
    window = api.get(f"/api/v1/sessions/{session_id}/messages/?last={len(body)}")
    if len(window["results"]) != len(body):
        raise RuntimeError(f"read-{size}: the plain window has {len(window['results'])} messages")
    return ReadSession(size, session_id, len(body), context["token_count"], queued, load_seconds)


def time_calls(call: Any, count: int) -> float:
    """p50 in seconds of `count` calls (after 5 untimed)."""
    for _ in range(5):
        call()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def readers(api: Api, read: ReadSession) -> dict[str, Any]:
    """The timed reads of one session: three endpoints, and the two selectors for information."""
    from bench.retention_server import FLOOR_ROWS
    from memory_app.conversations.models import Message, Session
    from memory_app.conversations.selectors import CONTEXT_FIELDS

    try:  # the managed-context rewrite moves it (2026-11-24)
        from memory_app.conversations.context import context_build
    except ImportError:
        from memory_app.conversations.selectors import context_build  # type: ignore[attr-defined,no-redef]

    client = api.client
    session = Session.objects.get(pk=read.session_id)
    ids = FLOOR_ROWS[read.session_id]

    def get(path: str) -> Any:
        def call() -> None:
            if client.get(path).status_code != 200:
                raise RuntimeError(f"GET {path} failed")

        return call

    return {
        "context": get(f"/api/v1/sessions/{read.session_id}/context/"),
        "plain window": get(f"/api/v1/sessions/{read.session_id}/messages/?last={read.served}"),
        "primary key": get(f"/bench/retention/pk/{read.session_id}/"),
        "context_build()": lambda: context_build(session=session),
        "rows by pk (ORM)": lambda: list(Message.objects.filter(pk__in=ids).order_by("seq").values(*CONTEXT_FIELDS)),
    }


def bench_reads(api: Api, args: argparse.Namespace) -> tuple[list[ReadSession], list[float], float]:
    started = time.monotonic()
    sessions = []
    for size in args.sizes:
        read = bulk_load(api, size, args.read_threshold)
        print(
            f"  read session of {size:,} messages loaded in {read.load_seconds:.1f} s; its context serves "
            f"{read.served} messages ({read.served_tokens:,} tokens); {read.queued_runs} compaction run(s) queued",
            flush=True,
        )
        sessions.append(read)
    from django.db import connection

    if connection.vendor == "postgresql":
        settle_database()  # fresh statistics after the bulk load, as autovacuum would leave them
    calls = {read.size: readers(api, read) for read in sessions}
    gc.collect()
    gc.freeze()  # the load's garbage is not a read's to collect
    quiet = []
    for number in range(args.rounds):
        quiet.append(wait_for_quiet(args.quiet, args.max_wait))
        forward = number % 2 == 0  # every other round backwards: drift hits every size and endpoint alike
        for read in sessions if forward else sessions[::-1]:
            names = list(calls[read.size])
            for name in names if forward else names[::-1]:
                read.p50[name].append(time_calls(calls[read.size][name], args.reads))
        print(
            f"  round {number + 1}/{args.rounds} (machine {quiet[-1]:.0%} busy before): "
            + "; ".join(
                f"{r.size:,}: context {r.p50['context'][-1] * 1000:.2f} ms, pk {r.p50['primary key'][-1] * 1000:.2f} ms"
                for r in sessions
            ),
            flush=True,
        )
    gc.unfreeze()
    return sessions, quiet, time.monotonic() - started


def round_ratio(top: list[float], bottom: list[float]) -> float:
    """Median over rounds of top/bottom (a ratio within a round compares under the same conditions)."""
    return statistics.median(a / b for a, b in zip(top, bottom, strict=True))


def report_reads(
    reads: tuple[list[ReadSession], list[float], float], args: argparse.Namespace
) -> list[tuple[str, bool]]:
    sessions, quiet, seconds = reads
    print()
    print(
        f"2. reads: managed sessions with summarization disabled (threshold_tokens {args.read_threshold:,}), "
        f"{args.rounds} rounds x {args.reads} reads per endpoint, interleaved; p50 medians over rounds; "
        f"machine busy before rounds {', '.join(pct(q) for q in quiet)}; {seconds:.0f} s"
    )
    print()
    print(
        "| messages | context serves | context p50 | plain window p50 | primary key p50 | context / pk | "
        "context_build() p50 | rows by pk (ORM) p50 | load | runs queued |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def p50(read: ReadSession, name: str) -> str:
        return f"{statistics.median(read.p50[name]) * 1000:.2f} ms"

    for read in sessions:
        ratio = round_ratio(read.p50["context"], read.p50["primary key"])
        print(
            f"| {read.size:,} | {read.served} msgs, {read.served_tokens:,} tokens | {p50(read, 'context')} | "
            f"{p50(read, 'plain window')} | {p50(read, 'primary key')} | {ratio:.2f}x | "
            f"{p50(read, 'context_build()')} | {p50(read, 'rows by pk (ORM)')} | {read.load_seconds:.1f} s | "
            f"{read.queued_runs} |"
        )
    checks = []
    largest = sessions[-1]
    ratio = round_ratio(largest.p50["context"], largest.p50["primary key"])
    checks.append(
        (f"context p50 at {largest.size:,} / primary-key read of the same rows = {ratio:.2f} (<= 3)", ratio <= 3)
    )
    by_size = {read.size: read for read in sessions}
    if 10_000 in by_size and 100_000 in by_size:
        flat = round_ratio(by_size[100_000].p50["context"], by_size[10_000].p50["context"])
        checks.append((f"context p50 at 100,000 / at 10,000 = {flat:.2f} (<= 1.2)", flat <= 1.2))
    return checks


# --- report ------------------------------------------------------------------------------------


def ended(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "none"


def pct(value: float) -> str:
    return f"{value:.0%}"


def spread(values: list[float]) -> str:
    return pct(statistics.median(values)) + (f" ({pct(min(values))}-{pct(max(values))})" if len(values) > 1 else "")


def report_retention(retention: Retention, args: argparse.Namespace, backend: str) -> list[tuple[str, bool]]:
    sessions = retention.sessions
    items = [len(s.planted) for s in sessions]
    tokens = [retention.history_tokens[s.seed] for s in sessions]
    print()
    print(
        f"1. retention: {len(sessions)} seeded sessions of {args.messages} messages "
        f"({statistics.median(tokens):,.0f} tokens, {statistics.median(items):.0f} planted items each, median); "
        f"LLM: {backend}; marsys {retention.marsys_version}; {retention.seconds:.0f} s"
    )
    print()
    print(
        "| ratio | arm | items retained at the end, median (min-max) | retained, mean over the session | "
        "tokens served at the end | tokens served, mean over the session | history / served at the end | "
        "LLM tokens reported | LLM tokens counted | compactions, median (runs without a summary, all seeds) |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    history = statistics.median(tokens)
    for ratio in args.ratios:
        for arm in ARMS:
            runs = retention.results[(ratio, arm)]
            served = statistics.median(r.served_tokens for r in runs)
            extra = ""
            if arm == "last-N":
                extra = f" (N {statistics.median(r.window or 0 for r in runs):.0f} at the end)"
            compactions = f"{statistics.median(r.compactions for r in runs):.0f}"
            if arm == "memsite":
                compactions += f" ({sum(sum(r.other_runs.values()) for r in runs)})"
            llm = "0" if arm != "memsite" else f"{statistics.median(r.llm_reported for r in runs):,.0f}"
            counted = "0" if arm != "memsite" else f"{statistics.median(r.llm_counted for r in runs):,.0f}"
            print(
                f"| {ratio:g}x | {arm}{extra} | {spread([r.share for r in runs])} | "
                f"{pct(statistics.median(r.mean_share for r in runs))} | {served:,.0f} | "
                f"{statistics.median(r.mean_tokens for r in runs):,.0f} | {history / served:.1f}x | {llm} | "
                f"{counted} | {compactions} |"
            )
    reasons = sum(
        (Counter(r.other_runs) for ratio in args.ratios for r in retention.results[(ratio, "memsite")]), Counter()
    )
    if reasons:
        print()
        print("memsite runs that ended without a summary (all ratios and seeds): " + ended(reasons))
    print()
    print("memsite by kind of item (all seeds pooled): retained in the served context / kept by the summary of")
    print("the items whose every mention was summarised away")
    print()
    print("| ratio | " + " | ".join(KINDS) + " | summary tokens, median |")
    print("|---:|" + "---:|" * (len(KINDS) + 1))
    for ratio in args.ratios:
        runs = retention.results[(ratio, "memsite")]
        cells = []
        for kind in KINDS:
            kept = covered = retained = total = 0
            for session, run in zip(sessions, runs, strict=True):
                for planted, is_retained, in_summary, is_covered in zip(
                    session.planted, run.retained, run.in_summary, run.covered, strict=True
                ):
                    if planted.kind != kind:
                        continue
                    total += 1
                    retained += is_retained
                    covered += is_covered
                    kept += is_covered and in_summary
            cells.append(f"{retained / max(total, 1):.0%} / {kept}/{covered}")
        summary = statistics.median(r.summary_tokens for r in runs)
        print(f"| {ratio:g}x | " + " | ".join(cells) + f" | {summary:,.0f} |")
    print()
    print("retained by where the item was planted (all seeds pooled): memsite / last-N / marsys")
    print()
    print("| ratio | " + " | ".join(CARRIERS) + " |")
    print("|---:|" + "---:|" * len(CARRIERS))
    for ratio in args.ratios:
        cells = []
        for carrier in CARRIERS:
            shares = []
            for arm in ARMS:
                hits = [
                    kept
                    for session, run in zip(sessions, retention.results[(ratio, arm)], strict=True)
                    for planted, kept in zip(session.planted, run.retained, strict=True)
                    if planted.carrier == carrier
                ]
                shares.append(pct(sum(hits) / max(len(hits), 1)))
            cells.append(" / ".join(shares))
        print(f"| {ratio:g}x | " + " | ".join(cells) + " |")
    checks = []
    if 10.0 in args.ratios:
        ours = statistics.median(r.share for r in retention.results[(10.0, "memsite")])
        window = statistics.median(r.share for r in retention.results[(10.0, "last-N")])
        checks.append((f"10x: memsite retains {pct(ours)} (>= 95%)", ours >= 0.95))
        checks.append((f"10x: last-N window retains {pct(window)} (< 30%)", window < 0.30))
    return checks


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    db = prepare_environment(args)
    started = time.monotonic()
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.test.utils import override_settings

        from memory_app.tenancy import services as tenancy

        call_command("migrate", verbosity=0)
        team = tenancy.team_get_or_create(name="retention-bench")
        _, key = tenancy.api_key_create(team=team, name="retention-bench")
        backend = f"{os.environ['RETENTION_INNER_LLM_BACKEND'].rsplit('.', 1)[-1]}" + (
            f" ({args.llm_model} at {args.llm_base_url})" if args.llm_base_url else " (offline)"
        )
        with override_settings(ROOT_URLCONF="bench.retention_server"):
            api = Api(key)
            header = [
                f"memsite retention bench, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
                f"machine: {machine_description()}; Python {platform.python_version()}; {database_version()}",
                "in-process: Django test Client on the real URLconf with an API key; each queued compaction run "
                "by the task body right after the append that queued it",
            ]
            checks: list[tuple[str, bool]] = []
            retention = None if args.skip_retention else bench_retention(api, args)
            reads = None if args.skip_reads else bench_reads(api, args)
            print()
            for line in header:
                print(line)
            if retention is not None:
                checks += report_retention(retention, args, backend)
            if reads is not None:
                checks += report_reads(reads, args)
        print()
        print("| goal | result |")
        print("|---|---|")
        for label, passed in checks:
            print(f"| {label} | {'PASS' if passed else 'FAIL'} |")
        print()
        failed = sum(not passed for _, passed in checks)
        print(
            f"total {time.monotonic() - started:.0f} s; "
            + ("ALL GOALS MET" if not failed else f"{failed} GOAL(S) MISSED")
        )
        figures: dict[str, Any] = {
            "header": header,
            "llm": backend,
            "goals": [{"goal": label, "passed": passed} for label, passed in checks],
        }
        if retention is not None:
            figures["retention"] = {  # per "ratio arm": one result per seed
                "history_tokens": retention.history_tokens,
                "marsys_version": retention.marsys_version,
                "seconds": retention.seconds,
                "results": retention.results,
            }
        if reads is not None:
            sessions, quiet, seconds = reads
            figures["reads"] = {"sessions": sessions, "machine_busy_before": quiet, "seconds": seconds}
        write_figures(args.json, "retention_bench", figures)
        return 0 if not failed else 1
    finally:
        if "django" in sys.modules:
            from memory_app.usage import context_ledger

            context_ledger.flush()  # the contexts served in the last second, before the database goes
        if not args.keep_db:
            remove_database(db)


if __name__ == "__main__":
    sys.exit(main())
