"""Facts on PostgreSQL + Redis + one real Celery worker, each figure beside its floor.

    .venv/bin/python bench/facts_bench.py [--facts 100000] [--rounds 3] [--calls 150] [--profile]

One run creates a dedicated PostgreSQL database and migrates it, flushes a Redis database
(the broker), starts the scripted OpenAI-compatible LLM server of the tests in a child process
(answering at once with the triples the prompt states) and ONE Celery worker (`--pool solo
-Q facts`), and calls the selectors, the API and the services from this process. It measures:

1. reads at 100k facts (bulk-inserted, a power-law entity distribution: a few hub entities
   with thousands of edges, a long tail with one or two): the facts of a subject through
   `fact_selectors.fact_list` (the API's selector, first page of 50) and through
   `GET /api/v1/facts/?subject=` (in-process Django client: middleware, API-key auth, the
   paginator's COUNT, serialization), and the graph neighbourhood `fact_graph` / `GET
   /api/v1/facts/graph/` at depth 1 and 2; p50/p99 for hub and typical entities, each beside
   the floor: a bare indexed read of 50 facts by subject of the same table;
2. extraction throughput through the real worker: batches of manual runs over 10 messages
   each (the scripted LLM answers 10 triples per run), runs/s and facts/s from the first
   request to the worker's last "succeeded" line, beside the same number of no-op tasks
   (Celery's built-in `celery.accumulate`) through the same worker and queue; also the
   single-run latency (request -> done) beside one no-op round trip.

The machine has 2 cores shared with other engineers: before each phase the bench waits
until the machine is idle, measures the CPU used by processes not its own, and re-takes a
round or batch they disturbed. --profile adds cProfiles of the slowest reads and of one
extraction job in-process, and the query plans of the hub reads.
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
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import (
    CLK_TCK,
    HOST,
    OTHERS,
    CpuMeter,
    LLMServer,
    Worker,
    admin_execute,
    cores_text,
    drop_database,
    json_option,
    machine_description,
    migrate,
    ms,
    pct,
    process_ticks,
    serve_scripted_llm,
    server_versions,
    settle_database,
    setup_django,
    wait_for_quiet,
    write_figures,
)

PAGE = 50  # the API's default page of facts
EXTRACT_DONE = re.compile(
    r"Task memory_app\.tasks\.extract_facts\[(?P<id>[0-9a-f-]+)\] succeeded in (?P<secs>[0-9.e-]+)s: "
    r"'(?P<result>[^']*)'"
)
NOOP_DONE = re.compile(r"Task celery\.accumulate\[(?P<id>[0-9a-f-]+)\] succeeded in (?P<secs>[0-9.e-]+)s")
# The statements the extraction sessions hold, one fact each, and what the scripted LLM finds in them.
STATED = ("works at", "lives in", "knows", "uses", "likes", "works on")
SINGLE_VALUED = ("works at", "lives in")  # in MEMSITE_SINGLE_VALUED_PREDICATES: the LLM marks them `replaces`
STATEMENT = re.compile(rf"^\[[^\]]+\] (.+?) ({'|'.join(STATED)}) (.+?)\.$", re.M)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000, help="facts seeded for the reads")
    parser.add_argument("--rounds", type=int, default=3, help="read rounds (median of the per-round figures)")
    parser.add_argument("--calls", type=int, default=150, help="timed calls per read figure per round")
    parser.add_argument("--runs", type=int, default=200, help="extraction runs per throughput batch")
    parser.add_argument("--triples", type=int, default=10, help="messages (one fact each) per extraction run")
    parser.add_argument("--batches", type=int, default=3, help="throughput batches (median reported)")
    parser.add_argument("--reps", type=int, default=7, help="single-run latency repetitions (median reported)")
    parser.add_argument("--pg-url", default=os.environ.get("BENCH_PG_URL", f"postgres://postgres@{HOST}:5432"))
    parser.add_argument("--db-name", default="memsite_fbench")
    parser.add_argument("--redis-url", default=f"redis://{HOST}:6379/9")
    parser.add_argument("--seed", type=int, default=4, help="random seed of the generated graph")
    parser.add_argument("--keep-db", action="store_true", help="leave the database for inspection")
    parser.add_argument("--profile", action="store_true", help="cProfile the hub reads and one extraction job")
    parser.add_argument("--quiet", type=float, default=0.15, help="max busy share of the machine before a phase")
    parser.add_argument("--max-wait", type=float, default=120.0, help="seconds to wait for a quiet machine")
    parser.add_argument("--retries", type=int, default=2, help="re-takes of a round disturbed by others")
    parser.add_argument(
        "--max-other", type=float, default=0.15, help="cores other processes may use before a round is re-taken"
    )
    parser.add_argument("--serve-llm", action="store_true", help=argparse.SUPPRESS)
    json_option(parser, "facts_bench")
    return parser.parse_args(argv)


# --- the scripted LLM, in a child process ------------------------------------------------------


def extract_from_prompt(body: dict[str, Any]) -> str:
    """A scripted extractor: the triples the conversation in the prompt states, as JSON."""
    conversation = body["messages"][-1]["content"]
    facts = [
        {"subject": s, "predicate": p, "object": o, "confidence": 0.9, "replaces": p in SINGLE_VALUED}
        for s, p, o in STATEMENT.findall(conversation)
    ]
    return json.dumps({"facts": facts})


def serve_llm() -> None:
    """Child mode: serve the scripted LLM, extracting the triples each prompt states."""
    serve_scripted_llm(extract_from_prompt)


# --- the generated graph -----------------------------------------------------------------------

FIRST = (
    "Ada Alan Amara Bea Boris Chen Cleo Dara Eli Emre Femi Gia Hana Ivan Jae Kofi Lea Lin Mara Nia Omar "
    "Pia Quinn Ravi Rosa Sami Tara Udo Vera Wen Xena Yuki Zoe Ines Jonas Karin Luca Mei Nils Olga"
).split()
SYLLABLES = "ka lo mi ne ra su ti ve ba do fe gu hi ja ko lu ma no pe ri sa to vi wa ze".split()
TOPICS = (
    "jazz chess hiking rust python databases climbing cooking sailing photography go tennis poetry "
    "astronomy gardening cycling opera sushi coffee tea linguistics robotics knitting running"
).split()
TOOLS = "postgres redis celery django kubernetes terraform vim emacs docker grafana kafka nginx".split()
# (subject kind, predicate, object kind, weight). "literal" objects are values, not entities.
TEMPLATES = (
    ("person", "works at", "company", 12),
    ("person", "lives in", "city", 12),
    ("person", "knows", "person", 18),
    ("person", "works on", "project", 12),
    ("person", "uses", "tool", 10),
    ("person", "likes", "topic", 8),
    ("person", "age", "literal", 3),
    ("person", "email", "literal", 2),
    ("project", "uses", "tool", 8),
    ("project", "owned by", "company", 4),
    ("company", "located in", "city", 3),
    ("company", "uses", "tool", 4),
    ("user", "likes", "topic", 2),  # the speaker of every session: a hub subject
    ("user", "works on", "project", 2),
)
KIND_SIZES = {"person": 12_000, "company": 2_000, "city": 500, "project": 3_000, "tool": 800, "topic": 600}


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(syllables)).capitalize()


def entity_pools(rng: random.Random) -> dict[str, list[str]]:
    """Distinct entity names per kind, in popularity order (index 0 is the biggest hub)."""
    makers: dict[str, Callable[[], str]] = {
        "person": lambda: f"{rng.choice(FIRST)} {_word(rng, 3)}",
        "company": lambda: f"{_word(rng, 2)} {rng.choice(('Labs', 'Systems', 'GmbH', 'Group', 'Inc'))}",
        "city": lambda: _word(rng, rng.choice((2, 3))),
        "project": lambda: f"project {_word(rng, 2).lower()}-{rng.randrange(1, 99)}",
        "tool": lambda: f"{rng.choice(TOOLS)} {rng.randrange(1, 20)}.{rng.randrange(0, 10)}",
        "topic": lambda: f"{rng.choice(TOPICS)} {_word(rng, 2).lower()}",
    }
    pools: dict[str, list[str]] = {}
    taken: set[str] = set()
    for kind, size in KIND_SIZES.items():
        names: list[str] = []
        while len(names) < size:
            name = makers[kind]()
            if name.casefold() not in taken:
                taken.add(name.casefold())
                names.append(name)
        pools[kind] = names
    pools["user"] = ["user"]
    return pools


class Zipf:
    """Picks from a pool with weight 1 / rank ** s: a few hubs, a long tail."""

    def __init__(self, pool: list[str], s: float) -> None:
        self.pool = pool
        total, self.cum = 0.0, []
        for rank in range(1, len(pool) + 1):
            total += 1 / rank**s
            self.cum.append(total)

    def pick(self, rng: random.Random) -> str:
        return rng.choices(self.pool, cum_weights=self.cum)[0]


@dataclass
class Seeded:
    facts: int  # rows written
    live: int
    subject_counts: Counter[str]  # live facts per normalised subject
    degrees: Counter[str]  # live facts per normalised entity (as subject or object)
    labels: dict[str, str]  # normalised -> as written
    seconds: float


def seed_facts(team: Any, sessions: list[Any], total: int, rng: random.Random) -> Seeded:
    """`total` fact rows, bulk-inserted in time order over 90 days; a single-valued predicate's
    new value invalidates the old one in its scope, as the extraction does (history kept)."""
    from django.db import connection, transaction
    from django.utils import timezone

    from memory_app.facts.models import Fact
    from memory_app.facts.output import normalize_term
    from memory_app.facts.selectors import term_key
    from memory_app.facts.services import fact_key, is_single_valued

    started = time.perf_counter()
    pools = entity_pools(rng)
    subject_pick = {kind: Zipf(pool, 0.9) for kind, pool in pools.items()}
    object_pick = {kind: Zipf(pool, 1.1) for kind, pool in pools.items()}
    templates, weights = [t[:3] for t in TEMPLATES], [t[3] for t in TEMPLATES]
    norm_cache: dict[str, str] = {}

    def norm(term: str) -> str:
        if term not in norm_cache:
            norm_cache[term] = normalize_term(term)
        return norm_cache[term]

    scopes: list[Any] = [None, *sessions]  # None: team-wide
    scope_weights = [len(sessions) / 9, *([1.0] * len(sessions))]  # ~10 % team-wide
    start = timezone.now() - dt.timedelta(days=90)
    step = dt.timedelta(days=90) / total
    rows: list[Fact] = []
    live: dict[tuple[str, str], Fact] = {}  # (scope, fact key) -> live fact
    single: dict[tuple[str, str, str], Fact] = {}  # (scope, subject, predicate) -> live fact
    while len(rows) < total:
        subject_kind, predicate, object_kind = rng.choices(templates, weights=weights)[0]
        subject = subject_pick[subject_kind].pick(rng)
        if object_kind == "literal":
            value = str(rng.randrange(18, 80)) if predicate == "age" else f"{subject.split()[0].lower()}@example.org"
        else:
            value = object_pick[object_kind].pick(rng)
        session = rng.choices(scopes, weights=scope_weights)[0]
        scope = str(session.pk) if session else Fact.TEAM_SCOPE
        s_norm, p_norm, o_norm = norm(subject), norm(predicate), norm(value)
        if s_norm == o_norm:
            continue
        key = fact_key(s_norm, p_norm, o_norm)
        if (scope, key) in live:  # said again: one live fact, seen once more
            live[(scope, key)].times_seen += 1
            continue
        when = start + step * len(rows)
        fact = Fact(
            id=uuid.uuid4(),
            team_id=team.pk,
            session_id=session.pk if session else None,
            scope_key=scope,
            role="user",
            subject=subject,
            predicate=predicate,
            object=value,
            subject_norm=s_norm,
            predicate_norm=p_norm,
            object_norm=o_norm,
            fact_key=key,
            subject_key=term_key(s_norm),
            object_key=term_key(o_norm),
            extractor="openai:scripted-model",
            confidence=round(rng.uniform(0.6, 1.0), 2),
            valid_from=when,
        )
        if is_single_valued(p_norm):
            old = single.get((scope, s_norm, p_norm))
            if old is not None:
                old.invalidated_at, old.invalidated_by_id = when, fact.pk
                del live[(scope, old.fact_key)]
            single[(scope, s_norm, p_norm)] = fact
        live[(scope, key)] = fact
        rows.append(fact)
    with transaction.atomic():  # invalidated_by points forward: the FK is checked at commit
        for first in range(0, len(rows), 5_000):
            Fact.objects.bulk_create(rows[first : first + 5_000])
        with connection.cursor() as cursor:  # created_at is auto_now_add: give it the history's times
            cursor.execute(
                "UPDATE memory_app_fact SET created_at = valid_from, updated_at = "
                "COALESCE(invalidated_at, valid_from) WHERE team_id = %s",
                [team.pk],
            )
    subject_counts: Counter[str] = Counter()
    degrees: Counter[str] = Counter()
    labels: dict[str, str] = {}
    for fact in live.values():
        subject_counts[fact.subject_norm] += 1
        degrees[fact.subject_norm] += 1
        degrees[fact.object_norm] += 1
        labels.setdefault(fact.subject_norm, fact.subject)
        labels.setdefault(fact.object_norm, fact.object)
    return Seeded(len(rows), len(live), subject_counts, degrees, labels, time.perf_counter() - started)


# --- 1. reads ----------------------------------------------------------------------------------


@dataclass
class ReadFigure:
    key: str
    name: str
    floor: str | None  # the key of the floor it is compared with; None for a floor
    entities: list[str]  # as written, cycled through
    call: Callable[[str], int]  # returns the rows (facts or edges) it served
    p50: list[float] = field(default_factory=list)  # per round
    p99: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)  # per call, last round


@dataclass
class ReadRound:
    samples: dict[str, list[float]]
    cores: dict[str, float]

    @property
    def disturbance(self) -> float:
        return self.cores[OTHERS]


def read_figures(team: Any, raw_key: str, seeded: Seeded, rng: random.Random) -> list[ReadFigure]:
    from django.test import Client

    from memory_app.facts import selectors as fact_selectors
    from memory_app.facts.models import Fact
    from memory_app.facts.output import normalize_term
    from memory_app.facts.selectors import term_key

    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw_key}")

    def floor(entity: str) -> int:
        """A bare indexed read of one page of facts by subject (the (team, subject_key) index)."""
        key = term_key(normalize_term(entity))
        return len(list(Fact.objects.filter(team=team, subject_key=key).values("id", "subject", "object")[:PAGE]))

    def selector(entity: str) -> int:
        return len(list(fact_selectors.fact_list(team=team, subject=entity)[:PAGE]))

    def api(path: str, params: dict[str, Any], field_name: str) -> int:
        response = client.get(path, params)
        if response.status_code != 200:
            raise RuntimeError(f"{path} {params}: {response.status_code} {response.content[:300]!r}")
        return len(json.loads(response.content)[field_name])

    def graph(depth: int) -> Callable[[str], int]:
        return lambda entity: len(fact_selectors.fact_graph(team=team, entity=entity, depth=depth).edges)

    def graph_api(depth: int) -> Callable[[str], int]:
        return lambda entity: api("/api/v1/facts/graph/", {"entity": entity, "depth": depth}, "edges")

    def subject_api(entity: str) -> int:
        return api("/api/v1/facts/", {"subject": entity}, "results")

    # Hubs: the 5 biggest; typical: 200 drawn uniformly from those that have facts (the long tail).
    hub_subjects = [seeded.labels[n] for n, _ in seeded.subject_counts.most_common(5)]
    typical_subjects = [seeded.labels[n] for n in rng.sample(sorted(seeded.subject_counts), 200)]
    hub_entities = [seeded.labels[n] for n, _ in seeded.degrees.most_common(5)]
    typical_entities = [seeded.labels[n] for n in rng.sample(sorted(seeded.degrees), 200)]
    figures = []
    for label, subjects, entities in (
        ("hub", hub_subjects, hub_entities),
        ("typical", typical_subjects, typical_entities),
    ):
        by_subject, by_entity = f"subject-floor-{label}", f"entity-floor-{label}"
        figures += [
            ReadFigure(by_subject, f"floor: bare read by subject, {label} subjects", None, subjects, floor),
            ReadFigure(
                f"list-{label}", f"facts by subject, selector, {label} subjects", by_subject, subjects, selector
            ),
            ReadFigure(
                f"list-api-{label}", f"facts by subject, API, {label} subjects", by_subject, subjects, subject_api
            ),
            ReadFigure(by_entity, f"floor: bare read by subject, {label} entities", None, entities, floor),
        ]
        for depth in (1, 2):
            figures += [
                ReadFigure(
                    f"graph{depth}-{label}",
                    f"graph depth {depth}, selector, {label} entities",
                    by_entity,
                    entities,
                    graph(depth),
                ),
                ReadFigure(
                    f"graph{depth}-api-{label}",
                    f"graph depth {depth}, API, {label} entities",
                    by_entity,
                    entities,
                    graph_api(depth),
                ),
            ]
    return figures


def read_round(figures: list[ReadFigure], calls: int, number: int, meter: CpuMeter) -> ReadRound:
    """Every figure's calls interleaved (the order rotated per round), so drift hits all alike."""
    order = figures[number % len(figures) :] + figures[: number % len(figures)]
    samples: dict[str, list[float]] = {f.key: [] for f in figures}
    rows: dict[str, list[int]] = {f.key: [] for f in figures}
    meter.start()
    for index in range(calls):
        for figure in order:
            entity = figure.entities[index % len(figure.entities)]
            started = time.perf_counter()
            served = figure.call(entity)
            samples[figure.key].append(time.perf_counter() - started)
            rows[figure.key].append(served)
    cores = meter.stop()
    for figure in figures:
        figure.rows = rows[figure.key]
    return ReadRound(samples, cores)


def bench_reads(figures: list[ReadFigure], args: argparse.Namespace, meter: CpuMeter) -> list[ReadRound]:
    for figure in figures:  # warm-up: connection, plans, caches, lazy imports
        for entity in figure.entities[:10]:
            figure.call(entity)
    taken: list[ReadRound] = []
    for number in range(args.rounds):
        best: ReadRound | None = None
        for attempt in range(args.retries + 1):
            wait_for_quiet(args.quiet, args.max_wait)
            this = read_round(figures, args.calls, number, meter)
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
            values = best.samples[figure.key]
            figure.p50.append(pct(values, 50))
            figure.p99.append(pct(values, 99))
    return taken


# --- 2. extraction throughput ------------------------------------------------------------------


def extraction_session(team: Any, name: str, messages: int, rng: random.Random, people: list[str]) -> Any:
    """A conversation whose every message states one fact, bulk-inserted (not a "kg" session:
    the bench asks for the runs itself)."""
    from django.db import transaction

    from memory_app.conversations import counting, services
    from memory_app.conversations.models import Message, Session

    session = services.session_create(team=team, external_id=name)
    rows = []
    for seq in range(1, messages + 1):
        predicate = rng.choice(STATED)
        obj = {
            "works at": lambda: f"{_word(rng, 2)} Labs",
            "lives in": lambda: _word(rng, 3),
            "knows": lambda: rng.choice(people),
            "uses": lambda: f"{rng.choice(TOOLS)} {rng.randrange(1, 20)}",
            "likes": lambda: rng.choice(TOPICS),
            "works on": lambda: f"project {_word(rng, 2).lower()}",
        }[predicate]()
        content = f"{rng.choice(people)} {predicate} {obj}."
        message = {"role": "user", "content": content}
        rows.append(
            Message(
                session=session, seq=seq, role="user", content=content, token_count=counting.message_tokens(message)
            )
        )
    with transaction.atomic():
        Message.objects.bulk_create(rows, batch_size=5_000)
        Session.objects.filter(pk=session.pk).update(last_seq=messages)
    session.refresh_from_db()
    return session


@dataclass
class Batch:
    seconds: float  # first request -> the worker's last "succeeded" line
    runs: int
    added: int
    seen: int
    invalidated: int
    noop_seconds: float  # the same number of no-op tasks through the same worker and queue
    job_ms: list[float]  # claim -> written, per run
    task_s: list[float]  # the task's runtime from the worker log, per run
    cores: dict[str, float]
    worker_cpu_ms: float  # per run

    @property
    def disturbance(self) -> float:
        return self.cores[OTHERS]


def wait_lines(worker: Worker, pattern: re.Pattern[str], start: int, count: int, timeout: float) -> list[Any]:
    """The (arrival, match) of the first `count` lines from `start` on that match."""
    found: list[Any] = []
    index = start
    deadline = time.monotonic() + timeout
    while len(found) < count:
        arrived, match = worker.wait_line(pattern, start=index, timeout=max(deadline - time.monotonic(), 0.1))
        found.append((arrived, match))
        index = next(i for i in range(index, len(worker.lines)) if worker.lines[i][0] == arrived) + 1
    return found


def noop_batch(worker: Worker, count: int) -> float:
    """`count` no-op tasks sent at once to the facts queue, until the worker logs the last."""
    from django.conf import settings

    from memsite.celery import app

    mark = worker.mark()
    started = time.perf_counter()
    for _ in range(count):
        app.send_task("celery.accumulate", args=[0], queue=settings.FACTS_QUEUE)
    lines = wait_lines(worker, NOOP_DONE, mark, count, timeout=120)
    return lines[-1][0] - started


def noop_round_trip(worker: Worker) -> float:
    """The floor of one run: a task that does nothing, sent to the facts queue, until the
    worker logs it succeeded."""
    from django.conf import settings

    from memsite.celery import app

    task_id = str(uuid.uuid4())
    mark = worker.mark()
    started = time.perf_counter()
    app.send_task("celery.accumulate", args=[0], task_id=task_id, queue=settings.FACTS_QUEUE)
    arrived, _ = worker.wait_line(NOOP_DONE, start=mark, timeout=30, accept=lambda m: m["id"] == task_id)
    return arrived - started


def extraction_batch(worker: Worker, session: Any, runs: int, per_run: int, meter: CpuMeter) -> Batch:
    from memory_app.facts import extraction as fact_extraction
    from memory_app.facts.models import FactExtractionRun

    worker_pid = meter.base["worker"]
    meter.start()
    ticks = process_ticks(worker_pid)
    mark = worker.mark()
    started = time.perf_counter()
    ids = [
        fact_extraction.fact_extraction_request(
            session=session, from_seq=k * per_run + 1, to_seq=(k + 1) * per_run
        ).pk  # committed, sent on commit: the worker starts while the rest are requested
        for k in range(runs)
    ]
    lines = wait_lines(worker, EXTRACT_DONE, mark, runs, timeout=600)
    seconds = lines[-1][0] - started
    worker_cpu = (process_ticks(worker_pid) - ticks) / CLK_TCK * 1000 / runs
    cores = meter.stop()
    results = Counter(match["result"] for _, match in lines)
    done = list(FactExtractionRun.objects.filter(pk__in=ids))
    if results != {"done": runs} or any(r.status != FactExtractionRun.Status.DONE for r in done):
        raise RuntimeError(f"extraction batch: {results}, {Counter(r.status for r in done)}")
    time.sleep(0.2)
    noop = noop_batch(worker, runs)
    return Batch(
        seconds=seconds,
        runs=runs,
        added=sum(r.facts_added for r in done),
        seen=sum(r.facts_seen for r in done),
        invalidated=sum(r.facts_invalidated for r in done),
        noop_seconds=noop,
        job_ms=[float(r.duration_ms or 0) for r in done],
        task_s=[float(match["secs"]) for _, match in lines],
        cores=cores,
        worker_cpu_ms=worker_cpu,
    )


@dataclass
class Latency:
    run: list[float] = field(default_factory=list)  # request -> run done (polled every 1 ms)
    noop: list[float] = field(default_factory=list)


def single_run(session: Any, first: int, per_run: int) -> float:
    from memory_app.facts import extraction as fact_extraction
    from memory_app.facts.models import FactExtractionRun

    started = time.perf_counter()
    run = fact_extraction.fact_extraction_request(session=session, from_seq=first, to_seq=first + per_run - 1)
    status = FactExtractionRun.objects.filter(pk=run.pk).values_list("status", flat=True)
    while (current := status.get()) != FactExtractionRun.Status.DONE:
        if current not in FactExtractionRun.ACTIVE or time.perf_counter() - started > 60:
            raise RuntimeError(f"single extraction run {current}")
        time.sleep(0.001)
    return time.perf_counter() - started


def bench_extraction(
    worker: Worker, team: Any, args: argparse.Namespace, meter: CpuMeter, people: list[str], rng: random.Random
) -> tuple[list[Batch], Latency]:
    per_run, runs = args.triples, args.runs
    sessions = [extraction_session(team, f"extract-{i}", runs * per_run, rng, people) for i in range(args.batches + 1)]
    latency_session = extraction_session(team, "extract-latency", (args.reps + 1) * per_run, rng, people)
    settle_database()
    extraction_batch(worker, sessions[0], min(20, runs), per_run, meter)  # warm-up: the worker's first jobs
    batches: list[Batch] = []
    spare = iter(sessions[1:])
    for number in range(args.batches):
        best: Batch | None = None
        for attempt in range(args.retries + 1):
            wait_for_quiet(args.quiet, args.max_wait)
            session = next(spare, None) or extraction_session(
                team, f"extract-r{number}-{attempt}", runs * per_run, rng, people
            )
            this = extraction_batch(worker, session, runs, per_run, meter)
            print(
                f"  batch {number + 1}/{args.batches}{f' (retake {attempt})' if attempt else ''}: "
                f"{this.runs / this.seconds:.1f} runs/s, no-op {this.runs / this.noop_seconds:.1f} tasks/s; "
                f"{cores_text(this.cores)}",
                flush=True,
            )
            if best is None or this.disturbance < best.disturbance:
                best = this
            if this.disturbance <= args.max_other:
                break
        assert best is not None
        batches.append(best)
    latency = Latency()
    wait_for_quiet(args.quiet, args.max_wait)
    for rep in range(args.reps + 1):  # the first is a warm-up
        noop = noop_round_trip(worker)
        time.sleep(0.05)
        run = single_run(latency_session, rep * per_run + 1, per_run)
        time.sleep(0.05)
        if rep:
            latency.noop.append(noop)
            latency.run.append(run)
    return batches, latency


# --- profile -----------------------------------------------------------------------------------


def profile(team: Any, raw_key: str, seeded: Seeded, worker_session: Any, per_run: int) -> None:
    """cProfile the slowest reads and one extraction job, in this process; the hub query plans."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from memory_app.facts import extraction as fact_extraction
    from memory_app.facts import selectors as fact_selectors
    from memory_app.facts.models import FactExtractionRun

    hub = seeded.labels[seeded.degrees.most_common(1)[0][0]]
    subject_hub = seeded.labels[seeded.subject_counts.most_common(1)[0][0]]
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw_key}")

    def plans(title: str, run: Callable[[], Any]) -> None:
        """The SQL a call runs, each statement's plan with its actual times."""
        with CaptureQueriesContext(connection) as captured:
            run()
        print(f"\nquery plans: {title} ({len(captured.captured_queries)} statements)")
        for query in captured.captured_queries:
            if not query["sql"].lstrip().upper().startswith("SELECT"):
                continue
            with connection.cursor() as cursor:
                cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {query['sql']}")
                plan = [row[0] for row in cursor.fetchall()]
            print(f"- {query['sql'][:160]}{' ...' if len(query['sql']) > 160 else ''}")
            print("\n".join(f"    {line[:200]}{' ...' if len(line) > 200 else ''}" for line in plan[:14]))

    plans(
        f"GET /api/v1/facts/?subject= of hub {subject_hub!r}",
        lambda: client.get("/api/v1/facts/", {"subject": subject_hub}),
    )
    plans(f"fact_graph depth 2 of hub {hub!r}", lambda: fact_selectors.fact_graph(team=team, entity=hub, depth=2))

    def show(title: str, run: Callable[[], Any], calls: int) -> None:
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        for _ in range(calls):
            run()
        profiler.disable()
        print(f"\nprofile: {title}, {calls} calls, {ms((time.perf_counter() - started) / calls)} per call (profiled)")
        stats = pstats.Stats(profiler, stream=sys.stdout)
        stats.sort_stats("cumulative").print_stats("memory_app|rest_framework", 12)
        stats.sort_stats("tottime").print_stats(12)

    show(f"fact_graph depth 2 of hub {hub!r}", lambda: fact_selectors.fact_graph(team=team, entity=hub, depth=2), 10)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    show(
        f"GET /api/v1/facts/?subject= hub {subject_hub!r}",
        lambda: client.get("/api/v1/facts/", {"subject": subject_hub}),
        20,
    )
    # One extraction job, in this process (a run the worker never hears of), after a warm-up job.
    for index in range(2):
        run = FactExtractionRun.objects.create(
            team_id=team.pk,
            session=worker_session,
            trigger=FactExtractionRun.Trigger.MANUAL,
            from_seq=index * per_run + 1,
            to_seq=(index + 1) * per_run,
        )
        if index == 0:
            fact_extraction.fact_extraction_execute(run_id=str(run.pk))
    show(
        "one extraction job (10 messages, 10 triples)",
        lambda: fact_extraction.fact_extraction_execute(run_id=str(run.pk)),
        1,
    )


# --- report ------------------------------------------------------------------------------------


def median_ratio(values: list[float], floors: list[float]) -> float:
    return statistics.median(v / f for v, f in zip(values, floors, strict=True))


def report(
    header: list[str], figures: list[ReadFigure], rounds: list[ReadRound], batches: list[Batch], latency: Latency
) -> None:
    floors = {f.key: f for f in figures if f.floor is None}
    print()
    for line in header:
        print(line)
    print()
    print(
        "| read (first page / neighbourhood) | rows served p50 | p50 | p99 | floor p50 | floor p99 "
        "| p50 / floor | p99 / floor |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for figure in figures:
        if figure.floor is None:
            continue
        floor = floors[figure.floor]
        print(
            f"| {figure.name} | {statistics.median(figure.rows):.0f} | {ms(statistics.median(figure.p50))} | "
            f"{ms(statistics.median(figure.p99))} | {ms(statistics.median(floor.p50))} | "
            f"{ms(statistics.median(floor.p99))} | {median_ratio(figure.p50, floor.p50):.1f}x | "
            f"{median_ratio(figure.p99, floor.p99):.1f}x |"
        )
    runs = batches[0].runs
    rate = statistics.median(b.runs / b.seconds for b in batches)
    noop_rate = statistics.median(b.runs / b.noop_seconds for b in batches)
    triples = statistics.median((b.added + b.seen) / b.seconds for b in batches)
    added = statistics.median(b.added / b.seconds for b in batches)
    run_latency, noop_latency = statistics.median(latency.run), statistics.median(latency.noop)
    print()
    print("| extraction (one worker, --pool solo) | value | floor | ratio |")
    print("|---|---:|---:|---:|")
    print(
        f"| throughput, {runs} runs of 10 triples | {rate:.1f} runs/s | {noop_rate:.1f} no-op tasks/s | "
        f"{median_ratio([b.seconds for b in batches], [b.noop_seconds for b in batches]):.1f}x floor |"
    )
    print(f"| triples applied (added + seen again) | {triples:.0f} facts/s |  |  |")
    print(f"| of which new facts | {added:.0f} facts/s |  |  |")
    print(
        f"| one run, request -> done | {ms(run_latency)} | {ms(noop_latency)} (no-op round trip) | "
        f"{run_latency / noop_latency:.1f}x floor |"
    )
    print()
    print("Details (medians):")
    for number, r in enumerate(rounds, 1):
        print(f"- read round {number}: cores used: {cores_text(r.cores)}")
    for number, b in enumerate(batches, 1):
        print(
            f"- batch {number}: {b.runs} runs in {b.seconds:.2f} s ({b.runs / b.seconds:.1f}/s), "
            f"{b.added} added, {b.seen} seen again, {b.invalidated} invalidated; no-op batch {b.noop_seconds:.2f} s; "
            f"job (claim -> written) p50 {statistics.median(b.job_ms):.0f} ms, task runtime p50 "
            f"{ms(statistics.median(b.task_s))}, worker CPU {b.worker_cpu_ms:.1f} ms per run"
        )
        print(f"  cores used: {cores_text(b.cores)}")
    print(
        f"- single run, {len(latency.run)} reps: {', '.join(ms(x) for x in latency.run)}; no-op: "
        f"{', '.join(ms(x) for x in latency.noop)}"
    )


def figures_json(
    header: list[str], figures: list[ReadFigure], rounds: list[ReadRound], batches: list[Batch], latency: Latency
) -> dict[str, Any]:
    """The tables' figures (seconds; medians of the per-round p50/p99 and ratios) and what they come from."""
    floors = {f.key: f for f in figures if f.floor is None}
    reads = []
    for figure in figures:
        row: dict[str, Any] = {
            "key": figure.key,
            "name": figure.name,
            "floor": figure.floor,
            "rows_served_p50": statistics.median(figure.rows) if figure.rows else None,
            "p50_s": statistics.median(figure.p50),
            "p99_s": statistics.median(figure.p99),
            "p50_per_round_s": figure.p50,
            "p99_per_round_s": figure.p99,
        }
        if figure.floor is not None:
            row["p50_over_floor"] = median_ratio(figure.p50, floors[figure.floor].p50)
            row["p99_over_floor"] = median_ratio(figure.p99, floors[figure.floor].p99)
        reads.append(row)
    return {
        "header": header,
        "reads": reads,
        "extraction": {
            "runs_per_s": statistics.median(b.runs / b.seconds for b in batches),
            "noop_tasks_per_s": statistics.median(b.runs / b.noop_seconds for b in batches),
            "over_floor": median_ratio([b.seconds for b in batches], [b.noop_seconds for b in batches]),
            "facts_applied_per_s": statistics.median((b.added + b.seen) / b.seconds for b in batches),
            "facts_added_per_s": statistics.median(b.added / b.seconds for b in batches),
            "one_run_s": statistics.median(latency.run),
            "noop_round_trip_s": statistics.median(latency.noop),
        },
        "batches": batches,
        "latency": latency,
        "read_rounds_cores": [r.cores for r in rounds],
    }


# --- the run -----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_llm:
        serve_llm()
        return 0
    started = time.monotonic()
    rng = random.Random(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="memsite-fbench-"))
    (workdir / "staticfiles").mkdir()  # WhiteNoise's root, for the in-process API calls
    redis.Redis.from_url(args.redis_url).flushdb()
    drop_database(args.pg_url, args.db_name)
    admin_execute(args.pg_url, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(args.db_name)))
    llm: LLMServer | None = None
    worker: Worker | None = None
    try:
        llm = LLMServer(Path(__file__))
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "memsite.settings",
            "DATABASE_URL": f"{args.pg_url}/{args.db_name}",
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
        }
        print(f"database {args.db_name}: create, migrate; LLM at {llm.base_url}; worker ...", flush=True)
        migrate(env)
        worker = Worker({**env, "LOG_LEVEL": "INFO"}, "facts")
        setup_django({**env, "LOG_LEVEL": "WARNING"})
        from django.conf import settings

        from memory_app.conversations import services
        from memory_app.tenancy import services as tenancy  # after setup_django: it loads models

        if settings.DEBUG or not settings.CELERY_BROKER_URL.startswith("redis://"):
            raise RuntimeError("expected DEBUG off and the Redis broker")
        team = tenancy.team_get_or_create(name="fbench")
        _, raw_key = tenancy.api_key_create(team=team, name="fbench")
        sessions = [services.session_create(team=team, external_id=f"kg-{i}", memory_type="kg") for i in range(200)]
        print(f"seeding {args.facts:,} facts ...", flush=True)
        seeded = seed_facts(team, sessions, args.facts, rng)
        settle_database()
        hubs = ", ".join(f"{seeded.labels[n]!r} {c:,}" for n, c in seeded.degrees.most_common(5))
        print(f"  {seeded.facts:,} rows ({seeded.live:,} live) in {seeded.seconds:.1f} s; hubs: {hubs}", flush=True)

        meter = CpuMeter(
            {"worker": worker.process.pid, "LLM server": llm.process.pid, "bench": os.getpid()}, args.db_name
        )
        print("1. reads", flush=True)
        figures = read_figures(team, raw_key, seeded, rng)
        gc.collect()
        gc.freeze()  # the seeding's garbage is not a read's to collect
        rounds = bench_reads(figures, args, meter)
        print("2. extraction through the worker", flush=True)
        people = [seeded.labels[n] for n, _ in seeded.subject_counts.most_common(2_000) if n != "user"]
        batches, latency = bench_extraction(worker, team, args, meter, people, rng)
        if args.profile:
            profile(
                team, raw_key, seeded, extraction_session(team, "profiled", 2 * args.triples, rng, people), args.triples
            )

        degree = [c for _, c in seeded.degrees.most_common()]
        header = [
            f"memsite facts bench, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {time.monotonic() - started:.0f} s",
            f"machine: {machine_description()}; Python {platform.python_version()}; "
            f"{server_versions(args.pg_url, args.redis_url)}",
            "one Celery worker (--pool solo -Q facts) on Redis; the scripted LLM answers at once; selectors, API "
            "(in-process Django client) and services called from the bench process (DEBUG=0)",
            f"data: {seeded.facts:,} facts ({seeded.live:,} live, the rest invalidated by a newer value) over "
            f"{len(degree):,} entities, 200 sessions + team-wide; entity degree max {degree[0]:,}, "
            f"top-5 {', '.join(f'{c:,}' for c in degree[:5])}, p50 {statistics.median(degree):.0f}, "
            f"p99 {pct([float(c) for c in degree], 99):.0f}",
            f"reads: {args.rounds} rounds x {args.calls} calls per figure, interleaved; medians of the per-round "
            f"p50/p99 and ratios; hub = the 5 biggest entities, typical = 200 drawn uniformly; other processes' "
            f"cores per round {', '.join(f'{r.disturbance:.2f}' for r in rounds)}",
            f"extraction: {args.batches} batches of {args.runs} runs x {args.triples} messages stating one fact "
            f"each; other processes' cores per batch {', '.join(f'{b.disturbance:.2f}' for b in batches)}",
        ]
        report(header, figures, rounds, batches, latency)
        write_figures(args.json, "facts_bench", figures_json(header, figures, rounds, batches, latency))
        return 0
    finally:
        if worker is not None:
            worker.stop()
        if llm is not None:
            llm.stop()
        if "django" in sys.modules:
            from django.db import connections

            connections.close_all()
        if not args.keep_db:
            drop_database(args.pg_url, args.db_name)
        redis.Redis.from_url(args.redis_url).flushdb()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
