"""Indexing: how many tokens a second recall's index takes in per core, through the product's own
code (messages appended, turned into items, embedded by the offline model, vectors written), and
how long an appended message waits before a search finds it while agents keep writing.

Throughput: on a fresh database (SQLite in a fresh var dir by default, `--database-url` for
PostgreSQL: the database `memsite_indexbench` on that server, created and dropped), per workload
and run, a fresh team gets its messages through `conversations.message_append` (one append per
message, as agents send them; not timed), then the team's index runs are run in this process until
nothing is pending (`evaluation.index_until_done`: the product's `search_index_execute`, slices,
follow-up runs and all). Timed: the whole path and its parts (materialize: messages into items;
embed: the model, tokenizer included; write: the vectors stored), in CPU seconds of this process
(the model runs on one onnxruntime thread in the calling thread: CPU seconds are core-seconds) and
in wall seconds. The floor is the model alone on the very texts the run embedded, in the same
process right after it: path / floor says how much of the model's own speed the product keeps,
whatever else the machine is doing. Tokens are the messages' own (WordPiece, not truncated,
counted once however they are cut), so a change of chunking cannot inflate them.

Workloads: "agent" sessions of bench/retention_sessions.py (tasks, tool calls, tool outputs of
code, logs and test runs: long messages), "chat" the conversations of bench/data/recall_dev.json
(short turns, photo captions), each appended as `manage.py recall_eval` appends them.

Lag: a real indexer (`celery worker -Q search`, prefork, concurrency 1: the Procfile's `indexer`)
on the same database and broker (the filesystem broker on SQLite; `--redis-url` with PostgreSQL),
while this process appends a mixed stream (agent and chat messages, round robin over sessions) at
`--rate` messages a second for `--lag-seconds`. Each message carries a word of its own; it counts as
searchable once every item of it is `indexed` and `selectors.search` for that word returns it.
Reported: p50 / p95 / max of append -> searchable, and whether the lag grew over the run (a rate
above what the indexer keeps up with).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # `python bench/indexing_bench.py`: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import retention_sessions
from bench.harness import (
    ROOT,
    Worker,
    busy_share,
    create_database,
    drop_database,
    json_option,
    machine_description,
    migrate,
    setup_django,
    write_figures,
)

DATABASE_NAME = "memsite_indexbench"
DEV_SET = ROOT / "bench" / "data" / "recall_dev.json"
AGENT_MESSAGES = 120  # messages per generated agent session
PARTS = ("materialize", "embed", "write")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the messages ------------------------------------------------------------------------------

Message = dict[str, Any]


def agent_sessions(count: int, messages: int = AGENT_MESSAGES) -> list[list[Message]]:
    """Generated agent sessions: a task, tool calls and their outputs, decisions."""
    return [retention_sessions.generate(seed, messages).messages for seed in range(1, count + 1)]


def chat_sessions(count: int) -> list[list[Message]]:
    """Dated sessions of the recall dev set's conversations, turns as recall_eval appends them."""
    from memory_app.search.evalset import message_content

    data = json.loads(DEV_SET.read_text())
    sessions = [session for conversation in data["conversations"] for session in conversation["sessions"]]
    return [
        [{"role": "user", "name": turn["speaker"], "content": message_content(turn)} for turn in session["turns"]]
        for session in sessions[:count]
    ]


# --- timing the parts of an index run ------------------------------------------------------------


@dataclass
class PartClock:
    """CPU and wall seconds spent in each part of the index runs while it is installed."""

    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    wall: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    embedded_texts: list[str] = field(default_factory=list)

    def timed(self, part: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.cpu[part] += time.process_time() - cpu
                self.wall[part] += time.perf_counter() - wall

        return wrapper


class TimedEmbedder:
    """The configured backend, its `embed` timed and the texts it was given kept (the floor's)."""

    def __init__(self, inner: Any, clock: PartClock) -> None:
        self._inner = inner
        self._clock = clock
        self.name, self.model, self.dimension = inner.name, inner.model, inner.dimension

    def embed(self, texts: Sequence[str], *, purpose: Any) -> Any:
        self._clock.embedded_texts.extend(texts)
        return self._clock.timed("embed", self._inner.embed)(texts, purpose=purpose)


@contextlib.contextmanager
def parts_timed(clock: PartClock) -> Iterator[None]:
    """Time the index run's parts by wrapping the services' own functions (bench only)."""
    from memory_app.search import services

    originals: dict[str, Callable[..., Any]] = {
        "_materialize_messages": services._materialize_messages,
        "_store_vectors": services._store_vectors,
        "get_embedder": services.get_embedder,
    }
    setattr(services, "_materialize_messages", clock.timed("materialize", originals["_materialize_messages"]))  # noqa: B010
    setattr(services, "_store_vectors", clock.timed("write", originals["_store_vectors"]))  # noqa: B010
    setattr(services, "get_embedder", lambda *a, **k: TimedEmbedder(originals["get_embedder"](*a, **k), clock))  # noqa: B010
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(services, name, original)


# --- throughput ---------------------------------------------------------------------------------


def token_counter() -> Callable[[Sequence[str]], list[int]]:
    """WordPiece token counts of the offline model's tokenizer, not truncated."""
    from tokenizers import Tokenizer

    from memory_app.search.embeddings import offline

    tokenizer = Tokenizer.from_file(str(offline._tokenizer_path()))
    tokenizer.no_truncation()  # the file truncates and pads to 128
    tokenizer.no_padding()
    return lambda texts: [len(encoding.ids) for encoding in tokenizer.encode_batch(list(texts))]


def append_all(team: Any, sessions: list[list[Message]]) -> list[Any]:
    from memory_app.conversations import services as conversations

    appended = []
    for number, messages in enumerate(sessions):
        session = conversations.session_create(team=team, external_id=f"s{number}")
        for message in messages:
            appended += conversations.message_append(session=session, messages=[message]).messages
    return appended


def throughput_run(
    workload: str, sessions: list[list[Message]], count_tokens: Callable[..., list[int]]
) -> dict[str, Any]:
    from memory_app.search import documents
    from memory_app.search.embeddings import get_embedder
    from memory_app.search.evaluation import index_until_done, jobs_run_here
    from memory_app.search.models import SearchItem
    from memory_app.tenancy.models import Team

    team = Team.objects.create(name=f"indexbench-{workload}-{uuid.uuid4().hex[:8]}")
    clock = PartClock()
    with jobs_run_here():
        started = time.perf_counter()
        messages = append_all(team, sessions)
        append_seconds = time.perf_counter() - started
        get_embedder().embed(["warm up"], purpose="document")  # the model's load is not indexing
        cpu, wall = time.process_time(), time.perf_counter()
        with parts_timed(clock):
            index_until_done(team_id=team.pk)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    items = SearchItem.objects.filter(team=team)
    if items.exclude(state=SearchItem.State.INDEXED).exists():
        raise RuntimeError(f"{workload}: items left unindexed")
    tokens = sum(count_tokens([documents.message_text(message) for message in messages]))
    floor_cpu = time.process_time()
    get_embedder().embed(clock.embedded_texts, purpose="document")
    floor_cpu = time.process_time() - floor_cpu
    return {
        "messages": len(messages),
        "items": items.count(),
        "tokens": tokens,
        "embedded_tokens": sum(count_tokens(clock.embedded_texts)),
        "append_s": append_seconds,
        "cpu_s": cpu,
        "wall_s": wall,
        "part_cpu_s": dict(clock.cpu),
        "part_wall_s": dict(clock.wall),
        "floor_cpu_s": floor_cpu,
        "tokens_per_cpu_s": tokens / cpu,
        "items_per_cpu_s": items.count() / cpu,
        "messages_per_cpu_s": len(messages) / cpu,
        "floor_tokens_per_cpu_s": tokens / floor_cpu,
        "path_over_floor": floor_cpu / cpu,
    }


def median_of(runs: list[dict[str, Any]], key: str, part: str | None = None) -> float:
    return statistics.median(run[key][part] if part else run[key] for run in runs)


def throughput(workloads: dict[str, list[list[Message]]], runs: int) -> dict[str, Any]:
    count_tokens = token_counter()
    results: dict[str, Any] = {}
    for name, sessions in workloads.items():
        per_run = []
        for number in range(runs):
            per_run.append(throughput_run(name, sessions, count_tokens))
            last = per_run[-1]
            log(
                f"{name} run {number + 1}: {last['tokens_per_cpu_s']:.0f} tokens/s per core, "
                f"{last['items_per_cpu_s']:.1f} items/s, path/floor {last['path_over_floor']:.2f}"
            )
        results[name] = {
            "runs": per_run,
            "messages": per_run[0]["messages"],
            "items": per_run[0]["items"],
            "tokens": per_run[0]["tokens"],
            "embedded_tokens": per_run[0]["embedded_tokens"],
            "tokens_per_cpu_s": median_of(per_run, "tokens_per_cpu_s"),
            "tokens_per_wall_s": statistics.median(run["tokens"] / run["wall_s"] for run in per_run),
            "items_per_cpu_s": median_of(per_run, "items_per_cpu_s"),
            "messages_per_cpu_s": median_of(per_run, "messages_per_cpu_s"),
            "floor_tokens_per_cpu_s": median_of(per_run, "floor_tokens_per_cpu_s"),
            "path_over_floor": median_of(per_run, "path_over_floor"),
            "part_share": {
                part: statistics.median(run["part_cpu_s"][part] / run["cpu_s"] for run in per_run) for part in PARTS
            },
            "part_tokens_per_cpu_s": {
                part: statistics.median(run["tokens"] / max(run["part_cpu_s"][part], 1e-9) for run in per_run)
                for part in PARTS
            },
        }
    return results


# --- lag ----------------------------------------------------------------------------------------


@dataclass
class Sent:
    message_id: Any
    marker: str
    sent_at: float
    searchable_at: float | None = None


def marked(message: Message, marker: str) -> Message:
    """The message with a word of its own at the end of its text (what the lag's search asks)."""
    return {**message, "content": f"{message.get('content') or ''} {marker}"}


def stream(workloads: dict[str, list[list[Message]]]) -> Iterator[tuple[int, Message]]:
    """(session index, message), round robin over every session of every workload, forever."""
    sessions = [messages for group in workloads.values() for messages in group]
    position = 0
    while True:
        for number, messages in enumerate(sessions):
            if position < len(messages):
                yield number, messages[position]
        position += 1
        if position >= max(map(len, sessions)):
            raise RuntimeError("the lag stream ran out of messages: fewer --lag-seconds or a lower --rate")


def watch_searchable(team_id: int, sent: list[Sent], lock: threading.Lock, stop: threading.Event) -> None:
    """Until `stop`: mark each sent message searchable once all its items are indexed and a search
    for its word returns it."""
    from django.db import connection
    from django.db.models import Count, Q

    from memory_app.search import selectors
    from memory_app.search.models import SearchItem

    try:
        while not stop.is_set():
            with lock:
                waiting = {entry.message_id: entry for entry in sent if entry.searchable_at is None}
            if waiting:
                rows = (
                    SearchItem.objects.filter(team_id=team_id, message_id__in=list(waiting))
                    .values("message_id")
                    .annotate(items=Count("id"), indexed=Count("id", filter=Q(state=SearchItem.State.INDEXED)))
                )
                for row in rows:
                    if row["items"] != row["indexed"]:
                        continue
                    entry = waiting[row["message_id"]]
                    filters = selectors.filters_from({}, team_id=team_id)
                    hits = selectors.search(filters=filters, query=entry.marker, limit=3).hits
                    if any(hit.item.message_id == entry.message_id for hit in hits):
                        entry.searchable_at = time.perf_counter()
            stop.wait(0.2)
    finally:
        connection.close()


def lag(workloads: dict[str, list[list[Message]]], env: dict[str, str], rate: float, seconds: float) -> dict[str, Any]:
    from memory_app.conversations import services as conversations
    from memory_app.search.embeddings import get_embedder
    from memory_app.tenancy.models import Team

    team = Team.objects.create(name=f"indexbench-lag-{uuid.uuid4().hex[:8]}")
    get_embedder().embed(["warm up"], purpose="query")  # the watcher's searches embed their query
    sessions = [
        conversations.session_create(team=team, external_id=f"lag{number}")
        for number in range(sum(map(len, workloads.values())))
    ]
    worker = Worker({**env, "LOG_LEVEL": "INFO"}, "search", concurrency=1)  # its "ready." line is INFO
    sent: list[Sent] = []
    lock = threading.Lock()
    stop = threading.Event()
    watcher = threading.Thread(target=watch_searchable, args=(team.pk, sent, lock, stop), daemon=True)
    watcher.start()
    try:
        started = time.perf_counter()
        for count, (number, message) in enumerate(stream(workloads)):
            due = started + count / rate
            if due - started >= seconds:
                break
            time.sleep(max(due - time.perf_counter(), 0.0))
            marker = f"lagword{count:06d}"
            appended = conversations.message_append(session=sessions[number], messages=[marked(message, marker)])
            with lock:
                sent.append(Sent(appended.messages[0].pk, marker, time.perf_counter()))
        appended_seconds = time.perf_counter() - started
        deadline = time.perf_counter() + max(120.0, seconds)
        while time.perf_counter() < deadline and any(entry.searchable_at is None for entry in sent):
            time.sleep(0.5)
    finally:
        stop.set()
        watcher.join(timeout=30)
        worker.stop()
    lags = [entry.searchable_at - entry.sent_at for entry in sent if entry.searchable_at is not None]
    for entry in sent:
        if entry.searchable_at is None:  # named, so a miss can be looked into
            log(f"lag: never found by its own word: {entry.marker} (message {entry.message_id})")
    half = len(sent) // 2
    first = [e.searchable_at - e.sent_at for e in sent[:half] if e.searchable_at is not None]
    second = [e.searchable_at - e.sent_at for e in sent[half:] if e.searchable_at is not None]
    return {
        "rate": rate,
        "seconds": seconds,
        "sent": len(sent),
        "achieved_rate": len(sent) / appended_seconds,
        "searchable": len(lags),
        "p50_s": statistics.median(lags) if lags else None,
        "p95_s": sorted(lags)[int(0.95 * (len(lags) - 1))] if lags else None,
        "max_s": max(lags) if lags else None,
        "first_half_p50_s": statistics.median(first) if first else None,
        "second_half_p50_s": statistics.median(second) if second else None,
    }


# --- the report ---------------------------------------------------------------------------------


def report(figures: dict[str, Any]) -> None:
    print(f"# Indexing throughput and lag ({figures['database']}, {figures['machine']})\n")
    print(f"model {figures['model']}; medians of {figures['runs']} runs; CPU seconds of the indexing process\n")
    print(
        "| workload | messages | items | tokens | tokens/s per core | items/s per core | messages/s per core "
        "| model alone, tokens/s | path / model | materialize / embed / write (share of CPU) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name, w in figures["throughput"].items():
        shares = " / ".join(f"{w['part_share'][part]:.0%}" for part in PARTS)
        print(
            f"| {name} | {w['messages']} | {w['items']} | {w['tokens']} | **{w['tokens_per_cpu_s']:.0f}** "
            f"| {w['items_per_cpu_s']:.1f} | {w['messages_per_cpu_s']:.1f} | {w['floor_tokens_per_cpu_s']:.0f} "
            f"| {w['path_over_floor']:.2f} | {shares} |"
        )
    if figures.get("lag"):
        g = figures["lag"]
        print(
            f"\nlag at {g['rate']:g} messages/s for {g['seconds']:g} s ({g['sent']} sent, {g['achieved_rate']:.1f}/s "
            f"achieved, {g['searchable']} searchable): append -> searchable p50 {fmt(g['p50_s'])} s, "
            f"p95 {fmt(g['p95_s'])} s, max {fmt(g['max_s'])} s; p50 first half {fmt(g['first_half_p50_s'])} s, "
            f"second half {fmt(g['second_half_p50_s'])} s"
        )


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="a PostgreSQL server (postgres://user@host:port); default SQLite")
    parser.add_argument(
        "--redis-url", help="the broker for the lag's worker with PostgreSQL (default: the filesystem one)"
    )
    parser.add_argument("--runs", type=int, default=3, help="throughput runs per workload (default 3; 0: lag only)")
    parser.add_argument("--agent-sessions", type=int, default=2, help="generated agent sessions (default 2)")
    parser.add_argument("--agent-messages", type=int, default=AGENT_MESSAGES, help="messages per agent session")
    parser.add_argument("--chat-sessions", type=int, default=12, help="dated chat sessions of the dev set (~20 turns)")
    parser.add_argument("--rate", type=float, default=5.0, help="lag: messages appended a second (default 5)")
    parser.add_argument(
        "--lag-seconds", type=float, default=60.0, help="lag: how long to append (default 60; 0: no lag)"
    )
    json_option(parser, "indexing_bench")
    args = parser.parse_args(argv)

    var_dir = Path(tempfile.mkdtemp(prefix="indexbench-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "memsite.settings",
        "MEMSITE_VAR_DIR": str(var_dir),
        "MEMSITE_EMBEDDINGS_THREADS": "1",  # one core: the figures are per core
        "EMBEDDINGS_BACKEND": "",
        "EMBEDDINGS_BASE_URL": "",
        "LOG_LEVEL": "WARNING",
        # index_until_done gives up after this: a loaded machine can take longer than the default.
        "MEMSITE_SEARCH_RUNNING_DEADLINE": "7200",
    }
    env.pop("REDIS_URL", None)
    env.pop("CELERY_BROKER_URL", None)
    if args.database_url:
        create_database(args.database_url, DATABASE_NAME)
        env["DATABASE_URL"] = f"{args.database_url.rstrip('/')}/{DATABASE_NAME}"
        if args.redis_url:
            env["REDIS_URL"] = args.redis_url
    else:
        env.pop("DATABASE_URL", None)
    try:
        migrate(env)
        setup_django(env)
        from memory_app.search.embeddings import get_embedder

        workloads = {
            "agent": agent_sessions(args.agent_sessions, args.agent_messages),
            "chat": chat_sessions(args.chat_sessions),
        }
        log(f"machine busy {busy_share(1.0):.0%} before the runs")
        figures: dict[str, Any] = {
            "database": "PostgreSQL" if args.database_url else "SQLite",
            "machine": machine_description(),
            "model": get_embedder().model,
            "runs": args.runs,
            "throughput": throughput(workloads, args.runs) if args.runs > 0 else {},
        }
        write_figures(args.json, "indexing_bench", figures)  # kept should the lag's worker not start
        if args.lag_seconds > 0:
            log(f"lag: {args.rate:g} messages/s for {args.lag_seconds:g} s")
            figures["lag"] = lag(workloads, env, args.rate, args.lag_seconds)
            write_figures(args.json, "indexing_bench", figures)
        report(figures)
    finally:
        from bench.harness import close_django_connections

        with contextlib.suppress(Exception):
            close_django_connections()
        if args.database_url:
            drop_database(args.database_url, DATABASE_NAME)
        shutil.rmtree(var_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
