"""Experience selection on PostgreSQL: what `experience_select` costs besides the LLM.

    .venv/bin/python bench/selection_bench.py [--experiences 1000] [--rounds 5] [--calls 100]

One run creates a dedicated PostgreSQL database and migrates it, seeds a team with 1,000
approved experiences (plus drafts and disabled ones, and a second team of the same size) over
20 roles of very different popularity, some for every role, and a multi-agent session of
1,000 messages, then calls the services and selectors from this process. The LLM is
`InstantBackend` below, selected by `LLM_BACKEND=bench.selection_bench.InstantBackend`: it
answers at once, in-process, in the JSON object form selection asks for (every candidate id ->
true/false, three of them true), and times itself, so each call's time in it is subtracted. Measured, for
the busiest role and a typical one, p50/p99 over several rounds of interleaved calls:

- `experience_select(team, role, query)` with the instant LLM: the overhead;
- floor (a): the bare indexed query of the role's approved candidates (the same rows);
- (b) the same call with the offline extractive backend (BM25 over the `when` texts), for
  information: there the "LLM" runs in-process and is part of the figure;
- the same call with `session_id` (looked up as the API does; the context is built from the
  session's 1,000 messages), beside the bare read of the session's 20 newest messages.

Then a breakdown of one call (timers around each step of `experience_select`), the query
plans of its reads, and a cProfile. The machine has 2 cores shared with other engineers:
before each round the bench waits until the machine is idle, measures the CPU used by
processes not its own, and re-takes a round they disturbed.
See bench/README.md for the method and the latest results. Everything is removed at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import gc
import json
import os
import platform
import pstats
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import (
    ALL_ROLES_SHARE,
    EXPERIENCE_ROLES,
    HOST,
    INSTRUCTIONS,
    OTHERS,
    CpuMeter,
    admin_execute,
    cores_text,
    drop_database,
    json_option,
    machine_description,
    make_query,
    make_when,
    migrate,
    ms,
    pct,
    seed_experiences,
    settle_database,
    setup_django,
    wait_for_quiet,
    write_figures,
)

INSTANT_BACKEND = "bench.selection_bench.InstantBackend"
SELECTED_PER_ANSWER = 3
SESSION_WINDOW = 20  # settings.EXPERIENCE_CONTEXT_MESSAGES' default: the messages a session context reads


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiences", type=int, default=1000, help="approved experiences of the team")
    parser.add_argument("--messages", type=int, default=1000, help="messages of the session")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (median of the per-round figures)")
    parser.add_argument("--calls", type=int, default=100, help="timed calls per figure per round")
    parser.add_argument("--breakdown-calls", type=int, default=100, help="calls timed step by step")
    parser.add_argument("--pg-url", default=os.environ.get("BENCH_PG_URL", f"postgres://postgres@{HOST}:5432"))
    parser.add_argument("--db-name", default="memsite_sbench")
    parser.add_argument("--seed", type=int, default=5, help="random seed of the generated experiences")
    parser.add_argument("--keep-db", action="store_true", help="leave the database for inspection")
    parser.add_argument("--quiet", type=float, default=0.15, help="max busy share of the machine before a round")
    parser.add_argument("--max-wait", type=float, default=120.0, help="seconds to wait for a quiet machine")
    parser.add_argument("--retries", type=int, default=2, help="re-takes of a round disturbed by others")
    parser.add_argument(
        "--max-other", type=float, default=0.15, help="cores other processes may use before a round is re-taken"
    )
    json_option(parser, "selection_bench")
    return parser.parse_args(argv)


# --- the instant LLM ---------------------------------------------------------------------------


class InstantBackend:
    """memory_app.llm.base.LLMBackend answering at once, in-process: the JSON object selection asks
    for, every candidate id, SELECTED_PER_ANSWER of them true (the same ones for the same question).

    `get_backend()` makes one per call, so what it measures lives on the class: `elapsed` is the
    time the last call spent in `complete()`, subtracted from the selection's time.
    """

    name = "bench-instant"
    model = "instant"
    supports_json_object = True
    elapsed = 0.0
    json_object_requests = 0
    _answers: dict[tuple[str, int, str, str], str] = {}  # the class is the state

    def complete(self, request: Any) -> Any:
        from memory_app.llm.base import LLMResult

        started = time.perf_counter()
        candidates = request.metadata["candidates"]
        query = request.metadata["query"]
        key = (query, len(candidates), candidates[0]["exp_id"], candidates[-1]["exp_id"])
        text = self._answers.get(key)
        if text is None:
            ids = [c["exp_id"] for c in candidates]
            chosen = set(random.Random(query).sample(ids, min(SELECTED_PER_ANSWER, len(ids))))
            text = json.dumps({exp_id: exp_id in chosen for exp_id in ids})
            self._answers[key] = text
        InstantBackend.json_object_requests += bool(request.json_object)
        result = LLMResult(text=text, backend=self.name, model=self.model)
        InstantBackend.elapsed = time.perf_counter() - started
        return result


# --- the generated session (the experiences are the harness's) ------------------------------------


def seed_session(team: Any, messages: int, rng: random.Random) -> Any:
    """A multi-agent conversation (TaskWeaver's addressing: send_from/send_to), bulk-inserted.
    The Planner talks to everyone; the other agents answer it; the User opens each task."""
    from django.db import transaction

    from memory_app.conversations import counting, services
    from memory_app.conversations.models import Message, Session

    session = services.session_create(team=team, system_prompt="You are a team of agents.", external_id="sbench")
    agents = EXPERIENCE_ROLES[1:8]
    rows = []
    for seq in range(1, messages + 1):
        step = (seq - 1) % 6
        if step == 0:
            sender, receiver, role = "User", "Planner", "user"
            text = make_query(rng)
        elif step % 2 == 1:
            sender, receiver, role = "Planner", rng.choice(agents), "assistant"
            text = f"Step {seq}: {make_when(rng)} {rng.choice(INSTRUCTIONS)} Report back when done."
        else:
            sender, receiver, role = rng.choice(agents), "Planner", "assistant"
            text = f"Done: {' '.join(rng.sample(INSTRUCTIONS, 3))} Result rows: {rng.randint(0, 10**6)}."
        message = {"role": role, "content": text}
        rows.append(
            Message(
                session=session,
                seq=seq,
                role=role,
                content=text,
                send_from=sender,
                send_to=receiver,
                token_count=counting.message_tokens(message),
            )
        )
    with transaction.atomic():
        Message.objects.bulk_create(rows, batch_size=1000)
        Session.objects.filter(pk=session.pk).update(last_seq=messages)
    session.refresh_from_db()
    return session


# --- the figures -------------------------------------------------------------------------------


@dataclass
class Figure:
    key: str
    name: str
    role: str
    call: Callable[[str], float]  # query -> seconds spent in the backend (subtracted: the "LLM")
    floor: str | None = None  # the key of the floor it is compared with; None for a floor
    subtract_backend: bool = True
    p50: list[float] = field(default_factory=list)  # per round
    p99: list[float] = field(default_factory=list)
    backend_p50: list[float] = field(default_factory=list)


@dataclass
class Round:
    samples: dict[str, list[float]]
    backend: dict[str, list[float]]
    cores: dict[str, float]

    @property
    def disturbance(self) -> float:
        return self.cores[OTHERS]


def candidate_floor(team: Any, role: str) -> Callable[[str], float]:
    """Floor (a): the bare indexed query of the role's approved candidates, the rows the service reads."""
    from django.db.models import Q

    from experiences_app.models import Experience
    from experiences_app.selectors import role_key

    def call(query: str) -> float:
        rows = list(
            Experience.objects.filter(team=team, status=Experience.Status.APPROVED)
            .filter(Q(roles_key="") | Q(roles_key__contains=f"|{role_key(role)}|"))
            .order_by("exp_id")
            .values_list("exp_id", "when", "what")
        )
        assert rows
        return 0.0

    return call


def session_floor(session: Any) -> Callable[[str], float]:
    """The bare indexed read of the session's newest SESSION_WINDOW messages."""
    from memory_app.conversations.models import Message

    def call(query: str) -> float:
        rows = list(
            Message.objects.filter(session=session)
            .order_by("-seq")
            .values("role", "content", "send_from", "send_to")[:SESSION_WINDOW]
        )
        assert rows
        return 0.0

    return call


def selection(team: Any, role: str, *, backend: str | None = None, session_id: str | None = None) -> Callable:
    from django.conf import settings

    from experiences_app import services
    from memory_app.conversations import selectors as memory_selectors

    instant = instant_class()

    def call(query: str) -> float:
        instant.elapsed = 0.0
        previous = settings.LLM_BACKEND
        if backend:
            settings.LLM_BACKEND = backend
        try:
            session = memory_selectors.session_get(team=team, session_id=session_id) if session_id else None
            result = services.experience_select(team=team, role=role, query=query, session=session)
        finally:
            settings.LLM_BACKEND = previous
        if result.log_id is None or (backend is None and len(result.selected) != SELECTED_PER_ANSWER):
            raise RuntimeError(f"unexpected selection: {result.skipped or result.selected}")
        return instant.elapsed

    return call


def instant_class() -> type[InstantBackend]:
    """The class get_backend() instantiates (run as a file, this module is __main__, and LLM_BACKEND
    imports it again as bench.selection_bench)."""
    from django.conf import settings
    from django.utils.module_loading import import_string

    return import_string(settings.LLM_BACKEND)


def make_figures(team: Any, session: Any, busy: str, typical: str) -> list[Figure]:
    from memory_app.llm import EXTRACTIVE_BACKEND

    figures: list[Figure] = []
    for label, role in (("busiest", busy), ("typical", typical)):
        floor = f"floor-{label}"
        figures += [
            Figure(floor, f"floor (a): bare candidate query, {label} role", role, candidate_floor(team, role)),
            Figure(
                f"select-{label}", f"experience_select, instant LLM, {label} role", role, selection(team, role), floor
            ),
            Figure(
                f"offline-{label}",
                f"(b) experience_select, offline BM25 backend, {label} role",
                role,
                selection(team, role, backend=EXTRACTIVE_BACKEND),
                floor,
                subtract_backend=False,
            ),
        ]
    figures += [
        Figure("floor-session", "floor: bare read of the session's 20 newest messages", busy, session_floor(session)),
        Figure(
            "session-busiest",
            f"experience_select + session_id ({session.last_seq:,} messages), instant LLM, busiest role",
            busy,
            selection(team, busy, session_id=str(session.pk)),
            "floor-busiest",
        ),
    ]
    return figures


def one_round(figures: list[Figure], queries: list[str], calls: int, number: int, meter: CpuMeter) -> Round:
    """Every figure's calls interleaved (the order rotated per round), so drift hits all alike."""
    order = figures[number % len(figures) :] + figures[: number % len(figures)]
    samples: dict[str, list[float]] = {f.key: [] for f in figures}
    backend: dict[str, list[float]] = {f.key: [] for f in figures}
    meter.start()
    for index in range(calls):
        query = queries[(index + number * calls) % len(queries)]
        for figure in order:
            started = time.perf_counter()
            in_backend = figure.call(query)
            seconds = time.perf_counter() - started
            samples[figure.key].append(seconds - in_backend if figure.subtract_backend else seconds)
            backend[figure.key].append(in_backend)
    return Round(samples, backend, meter.stop())


def bench_rounds(figures: list[Figure], queries: list[str], args: argparse.Namespace, meter: CpuMeter) -> list[Round]:
    for figure in figures:  # warm-up: connection, plans, caches, lazy imports, the instant answers
        for query in queries:
            figure.call(query)
    taken: list[Round] = []
    for number in range(args.rounds):
        best: Round | None = None
        for attempt in range(args.retries + 1):
            wait_for_quiet(args.quiet, args.max_wait)
            this = one_round(figures, queries, args.calls, number, meter)
            print(
                f"  round {number + 1}/{args.rounds}{f' (retake {attempt})' if attempt else ''}: "
                f"{cores_text(this.cores)}",
                flush=True,
            )
            if best is None or this.disturbance < best.disturbance:
                best = this
            if this.disturbance <= args.max_other:
                break
        assert best is not None
        taken.append(best)
        for figure in figures:
            figure.p50.append(pct(best.samples[figure.key], 50))
            figure.p99.append(pct(best.samples[figure.key], 99))
            figure.backend_p50.append(pct(best.backend[figure.key], 50))
    return taken


# --- where the time goes -----------------------------------------------------------------------

STEPS = (
    ("session lookup (session_get)", "memory_selectors.session_get"),
    ("team settings read", "selectors.experience_config_get"),
    ("session context (session_role_context)", "selectors.session_role_context"),
    ("candidate query (experience_candidates)", "selectors.experience_candidates"),
    ("prompt rendering: candidate block", "services.candidate_block"),
    ("prompt rendering: template", "services.render_template"),
    ("backend lookup (get_backend)", "services.get_backend"),
    ("the instant LLM (complete)", "InstantBackend.complete"),
    ("answer parsing (parse_selection)", "services.parse_selection"),
    ("injected block", "services.format_experience_in_prompt"),
    ("log insert (SelectionLog.save)", "SelectionLog.save"),
)


class StepTimers:
    """Wraps each step of experience_select (module attributes it calls through) with a timer."""

    def __init__(self) -> None:
        from experiences_app import selectors, services
        from experiences_app.models import SelectionLog
        from memory_app.conversations import selectors as memory_selectors

        self.owners = {
            "memory_selectors": memory_selectors,
            "selectors": selectors,
            "services": services,
            "InstantBackend": instant_class(),
            "SelectionLog": SelectionLog,
        }
        self.elapsed: dict[str, float] = dict.fromkeys([name for name, _ in STEPS], 0.0)
        self.originals: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> StepTimers:
        for name, path in STEPS:
            owner_name, attribute = path.split(".")
            owner = self.owners[owner_name]
            original = getattr(owner, attribute)
            self.originals.append((owner, attribute, original))
            setattr(owner, attribute, self._timed(name, original))
        return self

    def _timed(self, name: str, function: Callable) -> Callable:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.elapsed[name] += time.perf_counter() - started

        return timed

    def __exit__(self, *exc: object) -> None:
        for owner, attribute, original in reversed(self.originals):
            setattr(owner, attribute, original)

    def reset(self) -> None:
        self.elapsed = dict.fromkeys(self.elapsed, 0.0)


def breakdown(figure: Figure, queries: list[str], calls: int) -> tuple[dict[str, float], float]:
    """Median time per step and median total of `calls` calls of the figure, each step timed."""
    per_step: dict[str, list[float]] = {name: [] for name, _ in STEPS}
    totals: list[float] = []
    with StepTimers() as timers:
        for index in range(calls):
            timers.reset()
            started = time.perf_counter()
            figure.call(queries[index % len(queries)])
            totals.append(time.perf_counter() - started)
            for name, seconds in timers.elapsed.items():
                per_step[name].append(seconds)
    return {name: statistics.median(values) for name, values in per_step.items()}, statistics.median(totals)


def plans(team: Any, session: Any, role: str) -> None:
    """The SQL one selection with a session runs, each SELECT's plan with its actual times."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from experiences_app import services

    with CaptureQueriesContext(connection) as captured:
        services.experience_select(team=team, role=role, query=make_query(random.Random(1)), session=session)
    print(f"\nquery plans: experience_select with a session, role {role} ({len(captured.captured_queries)} statements)")
    for query in captured.captured_queries:
        text = query["sql"]
        print(f"- {query['time']} s: {text[:200]}{' ...' if len(text) > 200 else ''}")
        if not text.lstrip().upper().startswith("SELECT"):
            continue
        with connection.cursor() as cursor:
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {text}")
            lines = [row[0] for row in cursor.fetchall()]
        print("\n".join(f"    {line[:180]}" for line in lines[:12]))


def profile(figure: Figure, queries: list[str], calls: int) -> None:
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for index in range(calls):
        figure.call(queries[index % len(queries)])
    profiler.disable()
    print(f"\nprofile: {figure.name}, {calls} calls, {ms((time.perf_counter() - started) / calls)} per call (profiled)")
    stats = pstats.Stats(profiler, stream=sys.stdout)
    stats.sort_stats("cumulative").print_stats("experiences_app|memory_app", 20)
    stats.sort_stats("tottime").print_stats(15)


def log_size(db_name: str) -> tuple[int, int, int]:
    """(rows, bytes of the table with its TOAST and indexes, average stored bytes of a row's JSON)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), pg_total_relation_size('experiences_app_selectionlog'), "
            "coalesce(avg(pg_column_size(messages) + pg_column_size(candidates)), 0) "
            "FROM experiences_app_selectionlog"
        )
        rows, total, average = cursor.fetchone()
    return int(rows), int(total), int(average)


# --- report ------------------------------------------------------------------------------------


def median_ratio(values: list[float], floors: list[float]) -> float:
    return statistics.median(v / f for v, f in zip(values, floors, strict=True))


def report(header: list[str], figures: list[Figure], candidates: dict[str, int]) -> None:
    floors = {f.key: f for f in figures if f.floor is None}
    print()
    for line in header:
        print(line)
    print()
    print(
        "| figure | candidates | p50 | p99 | LLM p50 (subtracted) | floor p50 | floor p99 | p50 / floor | p99 / floor |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for figure in figures:
        p50, p99 = statistics.median(figure.p50), statistics.median(figure.p99)
        llm = ms(statistics.median(figure.backend_p50)) if figure.subtract_backend and figure.floor else ""
        if figure.floor is None:
            count = "" if figure.key == "floor-session" else candidates[figure.role]  # it reads no experience
            print(f"| {figure.name} | {count} | {ms(p50)} | {ms(p99)} | {llm} |  |  |  |  |")
            continue
        floor = floors[figure.floor]
        print(
            f"| {figure.name} | {candidates[figure.role]} | {ms(p50)} | {ms(p99)} | {llm} | "
            f"{ms(statistics.median(floor.p50))} | {ms(statistics.median(floor.p99))} | "
            f"{median_ratio(figure.p50, floor.p50):.1f}x | {median_ratio(figure.p99, floor.p99):.1f}x |"
        )


def figures_json(figures: list[Figure], candidates: dict[str, int]) -> list[dict[str, Any]]:
    """The table's rows: medians of the per-round p50/p99 (seconds) and of the per-round ratios."""
    floors = {f.key: f for f in figures if f.floor is None}
    rows = []
    for figure in figures:
        row: dict[str, Any] = {
            "figure": figure,
            "candidates": None if figure.key == "floor-session" else candidates[figure.role],
            "p50_s": statistics.median(figure.p50),
            "p99_s": statistics.median(figure.p99),
        }
        if figure.floor is not None:
            floor = floors[figure.floor]
            row["p50_over_floor"] = median_ratio(figure.p50, floor.p50)
            row["p99_over_floor"] = median_ratio(figure.p99, floor.p99)
            if figure.subtract_backend:
                row["llm_p50_subtracted_s"] = statistics.median(figure.backend_p50)
        rows.append(row)
    return rows


def report_breakdown(title: str, steps: dict[str, float], total: float) -> None:
    print()
    print(f"Where the time goes: {title} (medians of each step; total {ms(total)} with the timers)")
    print()
    print("| step | p50 | share |")
    print("|---|---:|---:|")
    for name, seconds in steps.items():
        if seconds:
            print(f"| {name} | {ms(seconds)} | {seconds / total:.0%} |")
    rest = total - sum(steps.values())
    print(f"| rest of experience_select (result, dicts, timers) | {ms(rest)} | {rest / total:.0%} |")


# --- the run -----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    rng = random.Random(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="memsite-sbench-"))
    drop_database(args.pg_url, args.db_name)
    admin_execute(args.pg_url, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(args.db_name)))
    try:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "memsite.settings",
            "DATABASE_URL": f"{args.pg_url}/{args.db_name}",
            "DB_CONN_MAX_AGE": "600",
            "LLM_BACKEND": INSTANT_BACKEND,
            "LLM_BASE_URL": "",
            "DEBUG": "0",
            "MEMSITE_VAR_DIR": str(workdir),
            "PYTHONUNBUFFERED": "1",
        }
        print(f"database {args.db_name}: create, migrate ...", flush=True)
        migrate(env)
        setup_django({**env, "LOG_LEVEL": "WARNING"})
        from django.conf import settings

        from memory_app.tenancy import services as tenancy  # after setup_django: it loads models

        if settings.DEBUG or settings.LLM_BACKEND != INSTANT_BACKEND:
            raise RuntimeError("expected DEBUG off and the instant LLM backend")
        team = tenancy.team_get_or_create(name="sbench")
        other_team = tenancy.team_get_or_create(name="sbench-other")
        print(f"seeding {args.experiences:,} approved experiences (+ drafts, disabled, another team) ...", flush=True)
        seeded = seed_experiences(team, other_team, args.experiences, rng)
        session = seed_session(team, args.messages, rng)
        settle_database()
        by_count = sorted(EXPERIENCE_ROLES, key=lambda role: seeded.candidates[role])
        busy, typical = by_count[-1], by_count[len(by_count) // 2]
        print(
            f"  {seeded.seconds:.1f} s; candidates per role: "
            + ", ".join(f"{role} {seeded.candidates[role]}" for role in reversed(by_count)),
            flush=True,
        )
        queries = [make_query(random.Random(args.seed * 1000 + i)) for i in range(40)]
        figures = make_figures(team, session, busy, typical)
        gc.collect()
        gc.freeze()  # the seeding's garbage is not a selection's to collect
        meter = CpuMeter({"bench": os.getpid()}, args.db_name)
        print("1. rounds", flush=True)
        rounds = bench_rounds(figures, queries, args, meter)
        if instant_class().json_object_requests == 0:
            raise RuntimeError("the instant backend was never asked for a JSON object")
        rows, total_bytes, row_json = log_size(args.db_name)

        print("2. where the time goes", flush=True)
        by_key = {f.key: f for f in figures}
        wait_for_quiet(args.quiet, args.max_wait)
        meter.start()
        steps_busy = breakdown(by_key["select-busiest"], queries, args.breakdown_calls)
        steps_session = breakdown(by_key["session-busiest"], queries, args.breakdown_calls)
        steps_typical = breakdown(by_key["select-typical"], queries, args.breakdown_calls)
        breakdown_cores = meter.stop()
        plans(team, session, busy)
        profile(by_key["select-busiest"], queries, 50)
        profile(by_key["offline-busiest"], queries, 20)

        with psycopg.connect(f"{args.pg_url}/postgres") as conn:
            version = conn.execute("SHOW server_version").fetchone()
        header = [
            f"memsite selection bench, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
            f"{time.monotonic() - started:.0f} s",
            f"machine: {machine_description()}; Python {platform.python_version()}; "
            f"PostgreSQL {version[0] if version else '?'}",
            "services and selectors called in-process (DEBUG=0); LLM: an in-process backend answering at once "
            f"(the JSON object form, {SELECTED_PER_ANSWER} of the candidates true), its own time subtracted",
            f"data: team of {seeded.experiences:,} approved experiences over {len(EXPERIENCE_ROLES)} roles "
            f"({sum(1 for c in seeded.candidates.values() if c)} with candidates; "
            f"{seeded.candidates[by_count[0]]}-{seeded.candidates[busy]} candidates per role, median "
            f"{statistics.median(seeded.candidates.values()):.0f}), {ALL_ROLES_SHARE:.0%} for every role; "
            f"+ {seeded.others:,} drafts, disabled and another team's; `when` {min(seeded.when_chars)}-"
            f"{max(seeded.when_chars)} chars (median {statistics.median(seeded.when_chars):.0f}), `what` "
            f"{min(seeded.what_chars)}-{max(seeded.what_chars)} chars "
            f"(median {statistics.median(seeded.what_chars):.0f})"
            f"; session of {session.last_seq:,} multi-agent messages",
            f"{args.rounds} rounds x {args.calls} calls per figure, interleaved; medians of the per-round p50/p99 "
            f"and ratios; busiest role {busy}, typical role {typical}; other processes' cores per round "
            f"{', '.join(f'{r.disturbance:.2f}' for r in rounds)}, during the breakdown "
            f"{breakdown_cores[OTHERS]:.2f}",
        ]
        report(header, figures, seeded.candidates)
        report_breakdown(f"experience_select, busiest role ({busy}, {seeded.candidates[busy]} candidates)", *steps_busy)
        report_breakdown(f"the same with session_id ({session.last_seq:,} messages)", *steps_session)
        report_breakdown(
            f"experience_select, typical role ({typical}, {seeded.candidates[typical]} candidates)", *steps_typical
        )
        print()
        print("Details:")
        for number, r in enumerate(rounds, 1):
            print(f"- round {number}: cores used: {cores_text(r.cores)}")
        print(f"- breakdown: cores used: {cores_text(breakdown_cores)}")
        print(
            f"- selection log after the rounds: {rows:,} rows, {total_bytes / 2**20:.0f} MiB with TOAST and "
            f"indexes ({total_bytes / max(rows, 1) / 1024:.0f} KiB per selection; messages + candidates stored "
            f"{row_json / 1024:.0f} KiB per row on average)"
        )
        write_figures(
            args.json,
            "selection_bench",
            {
                "header": header,
                "table": figures_json(figures, seeded.candidates),
                "breakdown": {
                    name: {"steps_p50_s": steps, "total_p50_s": total}
                    for name, (steps, total) in (
                        ("busiest role", steps_busy),
                        ("busiest role with session_id", steps_session),
                        ("typical role", steps_typical),
                    )
                },
                "rounds_cores": [r.cores for r in rounds],
                "breakdown_cores": breakdown_cores,
                "selection_log": {"rows": rows, "bytes": total_bytes, "row_json_bytes": row_json},
            },
        )
        return 0
    finally:
        if "django" in sys.modules:
            from django.db import connections

            connections.close_all()
        if not args.keep_db:
            drop_database(args.pg_url, args.db_name)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
