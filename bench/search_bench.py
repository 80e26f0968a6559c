"""Recall's search: latency on three engines as teams grow, the offline model's throughput, and
the quality of lexical, vector and hybrid ranking on planted memories.

    .venv/bin/python bench/search_bench.py                  # scale 0.1 (100k items), ~5 min on 2 cores
    .venv/bin/python bench/search_bench.py --scale 1        # 1M items (long: HNSW build, seeding)
    .venv/bin/python bench/search_bench.py --scale 1 --measured-only  # the 1k, 10k and 200k teams alone
    # options: --engines sqlite,postgres,pgvector  --rounds 5  --queries 40  --distractors 3000
    #          --pg-url postgres://postgres@127.0.0.1:5432  --keep-db

Engines: SQLite (FTS5 + the in-process faiss IVF index) in MEMSITE_VAR_DIR (default
/tmp/var-searchbench); on the PostgreSQL server of --pg-url, in a database `memsite_searchbench` (or
--db-name) created and dropped by the bench (tests/pgvector_server.py): PostgreSQL without pgvector
(tsvector/GIN + faiss IVF; the database's role may not create the extension) and PostgreSQL +
pgvector (tsvector/GIN + HNSW; the server must have pgvector, which .ci/run installs). Each engine
runs in a child process with its own DATABASE_URL: a fresh database, `migrate`, the seed, the
measurements, a JSON result.

1. Model (a child process of its own, 1 onnxruntime thread): the offline model
   (memory_app.search.embeddings.offline) embeds the quality set's distractors, realistic
   message chunks (bench/search_quality.py): items/s per core; then one query at a time.
2. Seed: 100 teams, Zipf sizes (bench/search_corpus.py), --scale x 1M items, written in bulk
   straight into the item table (binary COPY on PostgreSQL, executemany on SQLite), every item
   indexed, with synthetic text and synthetic clustered 384-dimension vectors: the real model
   would take hours for 1M items. The HNSW index (pgvector), or each team's in-process IVF index
   (without pgvector: every team of SEARCH_ANN_MIN_ITEMS vectors or more, in the index run's
   SEARCH_RUN_SECONDS steps) is built after the load, as `reindex` would; timed.
3. Latency of the teams of ~1k, ~10k and the largest (~200k) x scale: lexical only
   (engines.lexical), vector only (engines.vector), both with the 40 candidates a 10-result
   search asks for, and hybrid (selectors.search, limit 10: both engines, fusion, the items read
   back, snippets, the backlog count, and the query embedded by the real model, whose result is
   then swapped for the synthetic query vector). Rounds of up to --queries queries per team and
   mode (at most 2 s each), teams and modes in a rotating order; p50 and p99 of each round,
   medians over rounds. Also: recall@10 of the vector engine against exact cosine over the same
   team (what HNSW with a team filter loses), which plan PostgreSQL chose, and (IVF) the time to
   add a tail of 2,000 re-embedded vectors to the largest team's index.
4. Quality: a team of the 40 planted memories and --distractors real texts, all embedded by the
   real model and spread over the last 90 days; the 60 questions, through the product's code:
   lexical and vector (40 candidates each) and hybrid (selectors.search, limit 10). Recall@5
   and MRR@10 per question group.

See bench/README.md for the method and the latest results.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import search_corpus as corpus
from bench import search_quality as quality
from bench.harness import ROOT, json_option, machine_description, write_figures

DB_NAME = "memsite_searchbench"
ENGINES = ("sqlite", "postgres", "pgvector")
ENGINE_LABELS = {
    "sqlite": "SQLite (FTS5 + faiss IVF)",
    "postgres": "PostgreSQL (tsvector + faiss IVF)",
    "pgvector": "PostgreSQL + pgvector (tsvector + HNSW)",
}
MODES = ("lexical", "vector", "hybrid")
CANDIDATES = 40  # what selectors.search asks each engine for at limit 10
RESULT_LIMIT = 10
CELL_SECONDS = 2.0  # a round's queries of one team and mode stop after this long (at least 3 run)
QUALITY_DAYS = 90
QUALITY_TEAM = "search-bench-quality"
SYNTHETIC_AGENT = "agent"
THROUGHPUT_TEXTS = 400  # message chunks embedded on one thread for the throughput figure
MODEL_SHA256 = "ae4d6e065701031b9d0696ec63562092f9e0445dbe999314d01a370a9a901de3"  # offline.QUANTIZED_SHA256


# --- command line ------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.1, help="x 1M items over 100 teams (default 0.1)")
    parser.add_argument("--engines", default=",".join(ENGINES), help="any of sqlite,postgres,pgvector")
    parser.add_argument("--rounds", type=int, default=5, help="latency rounds (medians of per-round p50/p99)")
    parser.add_argument("--queries", type=int, default=40, help="queries per team, mode and round (at most)")
    parser.add_argument("--distractors", type=int, default=3000, help="real texts the planted memories hide among")
    parser.add_argument(
        "--pg-url", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL server (as its superuser)"
    )
    parser.add_argument("--keep-db", action="store_true", help="leave the databases")
    parser.add_argument("--db-name", default=DB_NAME, help="the PostgreSQL database to create and drop")
    parser.add_argument(
        "--measured-only",
        action="store_true",
        help="seed only the three teams whose latency is measured (at --scale 1: ~1k, ~10k and ~200k items)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)  # model | engine
    parser.add_argument("--config", help=argparse.SUPPRESS)
    json_option(parser, "search_bench")
    args = parser.parse_args(argv)
    args.engines = [e for e in args.engines.split(",") if e]
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        parser.error(f"unknown engines: {sorted(unknown)}")
    return args


# --- Django in a child -------------------------------------------------------------------------


def child_environment(var_dir: Path, database_url: str | None, sqlite_path: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "memsite.settings",
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
            "MEMSITE_VAR_DIR": str(var_dir),
            "DB_CONN_MAX_AGE": "600",
            "MEMSITE_EMBEDDINGS_THREADS": "1",
            "EMBEDDINGS_BACKEND": "bench.search_corpus.SyntheticQueryEmbeddings",
            "MEMSITE_JOB_DISPATCHER": "memory_app.jobs.dispatchers.RecordingDispatcher",
        }
    )
    env.pop("EMBEDDINGS_BASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    if sqlite_path:
        env["SQLITE_PATH"] = str(sqlite_path)
    return env


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    (Path(os.environ["MEMSITE_VAR_DIR"]) / "staticfiles").mkdir(parents=True, exist_ok=True)
    import django

    django.setup()


def run_child(kind: str, config: dict[str, Any], env: dict[str, str], workdir: Path) -> dict[str, Any]:
    config_path = workdir / f"{kind}-{config.get('engine', 'model')}.json"
    config_path.write_text(json.dumps(config))
    started = time.perf_counter()
    process = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--config", str(config_path)],
        cwd=ROOT,
        env=env,
        check=False,
    )
    if process.returncode != 0:
        raise SystemExit(f"the {kind} child ({config.get('engine', '')}) failed with exit code {process.returncode}")
    result: dict[str, Any] = json.loads(Path(config["result"]).read_text())
    result["child_seconds"] = time.perf_counter() - started
    return result


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- 1. the model: throughput and the quality set's vectors ------------------------------------


def model_child(config: dict[str, Any]) -> dict[str, Any]:
    setup_django()
    from django.conf import settings

    from memory_app.search.embeddings import OFFLINE_BACKEND, get_embedder
    from memory_app.search.embeddings.offline import _runtime

    embedder = get_embedder(OFFLINE_BACKEND)  # one thread (MEMSITE_EMBEDDINGS_THREADS=1): one core
    started = time.perf_counter()
    embedder.embed(["warm up"], purpose="document")
    load_seconds = time.perf_counter() - started
    texts = quality.distractors(config["distractors"])
    sample = texts[: config["throughput_texts"]]
    tokens = [sum(e.attention_mask) for e in _runtime(1).tokenizer.encode_batch(sample)]
    log(f"model: throughput on {len(sample)} message chunks, 1 thread")
    started = time.perf_counter()
    embedder.embed(sample, purpose="document")
    seconds = time.perf_counter() - started
    short = [*quality.MEMORIES, *(q for _, q, _ in quality.QUESTIONS)] * 3
    started = time.perf_counter()
    embedder.embed(short, purpose="document")
    short_seconds = time.perf_counter() - started
    one_query = []
    for _, question, _ in quality.QUESTIONS:
        started_one = time.perf_counter()
        embedder.embed([question], purpose="query")
        one_query.append((time.perf_counter() - started_one) * 1000)
    cached = Path(config["vectors"]).exists()
    if not cached:
        log(f"model: embedding the quality set ({len(texts)} distractors), 2 threads")
        settings.EMBEDDINGS_THREADS = 2  # a fresh instance with two intra-op threads: only the set is made faster
        both = get_embedder(OFFLINE_BACKEND)
        np.savez(
            config["vectors"],
            distractors=both.embed(texts, purpose="document"),
            memories=both.embed(quality.MEMORIES, purpose="document"),
            distractor_texts=np.array(texts, dtype=object),
        )
    return {
        "model": embedder.model,
        "load_s": load_seconds,
        "texts": len(texts),
        "sample": len(sample),
        "items_per_s": len(sample) / seconds,
        "tokens_per_s": sum(tokens) / seconds,
        "chars_mean": statistics.mean(len(t) for t in sample),
        "tokens_mean": statistics.mean(tokens),
        "short_items_per_s": len(short) / short_seconds,
        "short_chars_mean": statistics.mean(len(t) for t in short),
        "query_ms_p50": statistics.median(one_query),
        "query_ms_p99": percentile(one_query, 99),
        "vectors_cached": cached,
    }


# --- 2. seeding --------------------------------------------------------------------------------

COLUMNS = (
    "id team_id kind source_key chunk agent role text text_hash occurred_at state error embedding "
    "embedding_model embedding_dim indexed_at"
).split()
COPY_TYPES = "int8 int8 text text int4 text text text text timestamptz text text bytea text int2 timestamptz".split()


@contextlib.contextmanager
def postgres_copy(pgvector: bool) -> Any:
    """A writer of item rows by binary COPY; the vector column's bytes are pgvector's binary format
    (dimension, unused, big-endian float4s), passed through psycopg as opaque bytes."""
    from django.db import connection

    connection.ensure_connection()
    columns = [*COLUMNS, "embedding_vec"] if pgvector else COLUMNS
    types = [*COPY_TYPES, "bytea"] if pgvector else COPY_TYPES
    cursor = connection.connection.cursor()
    with cursor.copy(f"COPY memory_app_searchitem ({', '.join(columns)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(types)
        header = struct.pack(">HH", corpus.DIMENSION, 0)

        def write(row: list[Any], vector: np.ndarray) -> None:
            copy.write_row([*row, header + vector.astype(">f4").tobytes()] if pgvector else row)

        yield write
    connection.connection.commit()


@contextlib.contextmanager
def sqlite_insert() -> Any:
    from django.db import connection, transaction

    pending: list[list[Any]] = []
    placeholders = ", ".join(["%s"] * len(COLUMNS))
    sql = f"INSERT INTO memory_app_searchitem ({', '.join(COLUMNS)}) VALUES ({placeholders})"  # noqa: S608

    def flush() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(sql, pending)
        pending.clear()

    adapt = connection.ops.adapt_datetimefield_value  # Django's text form of a datetime on SQLite

    def write(row: list[Any], vector: np.ndarray) -> None:
        row[9], row[15] = adapt(row[9]), adapt(row[15])
        pending.append(row)
        if len(pending) >= 5000:
            flush()

    yield write
    if pending:
        flush()


def item_rows(
    team_id: int, first_id: int, texts: Sequence[str], vectors: np.ndarray, ages: Iterable[float], model: str, now: Any
) -> Iterable[tuple[list[Any], np.ndarray]]:
    for offset, (text, vector, age) in enumerate(zip(texts, vectors, ages, strict=True)):
        item_id = first_id + offset
        occurred = now - dt.timedelta(seconds=float(age))
        row = [
            item_id,
            team_id,
            "message",
            str(item_id),
            0,
            SYNTHETIC_AGENT,
            "user" if item_id % 2 else "assistant",
            text,
            corpus.text_hash(text),
            occurred,
            "indexed",
            "",
            np.asarray(vector, dtype="<f4").tobytes(),
            model,
            corpus.DIMENSION,
            occurred,
        ]
        yield row, vector


def seed(config: dict[str, Any], vendor: str, pgvector: bool) -> dict[str, Any]:
    """Every team's items, then the quality team's; returns team ids, sizes and timings."""
    from django.utils import timezone

    from memory_app.search.embeddings.offline import MODEL
    from memory_app.tenancy.models import Team

    vocab = corpus.vocabulary()
    sizes = corpus.team_sizes(config["scale"])
    if config.get("measured_only"):
        # The other 97 teams stay empty: the measured teams' own size is what their latency
        # depends on (every query is scoped to one team), and seeding 1M items takes an hour.
        measured = {rank for _, rank in pick_teams(sizes, config["scale"])}
        sizes = [size if rank in measured else 0 for rank, size in enumerate(sizes)]
    teams = Team.objects.bulk_create([Team(name=f"search-bench-{rank:03d}") for rank in range(len(sizes))])
    quality_team = Team.objects.create(name=QUALITY_TEAM)
    now = timezone.now()
    next_id = 1
    started = time.perf_counter()
    writer = postgres_copy(pgvector) if vendor == "postgresql" else sqlite_insert()
    with writer as write:
        for rank, (team, size) in enumerate(zip(teams, sizes, strict=True)):
            for piece in corpus.team_chunks(rank, size, vocab):
                for row, vector in item_rows(
                    team.pk, next_id, piece.texts, piece.vectors, piece.age_seconds, corpus.SYNTHETIC_MODEL, now
                ):
                    write(row, vector)
                next_id += len(piece.texts)
            if rank % 20 == 0 or size > 10_000:
                log(f"seed: team {rank} ({size} items) done, {next_id - 1} items so far")
        vectors = np.load(config["vectors"], allow_pickle=True)
        texts = [*quality.MEMORIES, *vectors["distractor_texts"].tolist()]
        matrix = np.vstack([vectors["memories"], vectors["distractors"]])
        rng = np.random.default_rng(3)
        ages = rng.uniform(0, QUALITY_DAYS * 86400, size=len(texts))
        quality_first_id = next_id
        for row, vector in item_rows(quality_team.pk, next_id, texts, matrix, ages, MODEL, now):
            write(row, vector)
        next_id += len(texts)
    seed_seconds = time.perf_counter() - started
    if vendor == "postgresql":
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT setval(pg_get_serial_sequence('memory_app_searchitem', 'id'), %s)", [next_id])
    return {
        "team_ids": [t.pk for t in teams],
        "sizes": sizes,
        "items": next_id - 1,
        "quality_team": quality_team.pk,
        "quality_first_id": quality_first_id,
        "seed_s": seed_seconds,
    }


def settle(vendor: str, pgvector: bool) -> dict[str, float]:
    """Statistics, the HNSW index (built once, after the load, as `reindex` builds it) and a checkpoint."""
    from django.db import connection

    from memory_app.search import schema

    timings: dict[str, float] = {}
    with connection.cursor() as cursor:
        if vendor == "postgresql":
            if pgvector:
                started = time.perf_counter()
                cursor.execute("SET maintenance_work_mem = '2GB'")
                schema.ensure_vector_index(corpus.DIMENSION)
                timings["hnsw_s"] = time.perf_counter() - started
            started = time.perf_counter()
            cursor.execute("VACUUM ANALYZE")
            cursor.execute("CHECKPOINT")
            timings["analyze_s"] = time.perf_counter() - started
            cursor.execute("SELECT pg_total_relation_size('memory_app_searchitem')")
            timings["table_mb"] = cursor.fetchone()[0] / 2**20
        else:
            started = time.perf_counter()
            cursor.execute("ANALYZE")
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            timings["analyze_s"] = time.perf_counter() - started
            timings["table_mb"] = Path(connection.settings_dict["NAME"]).stat().st_size / 2**20
    return timings


def build_vector_indexes(seeded: dict[str, Any]) -> dict[str, Any]:
    """Without pgvector: each team's in-process IVF index, as the index runs build it (steps of
    SEARCH_RUN_SECONDS, each a fresh call); the largest team's timings, and all teams' total."""
    from django.conf import settings

    from memory_app.search import ann
    from memory_app.search.embeddings.offline import MODEL

    teams = [(team_id, corpus.SYNTHETIC_MODEL) for team_id in seeded["team_ids"]]
    teams.append((seeded["quality_team"], MODEL))
    built: dict[str, Any] = {"teams": 0, "total_s": 0.0, "largest": {}}
    for team_id, model in teams:
        key = ann.IndexKey(team_id=team_id, model=model, dimension=corpus.DIMENSION)
        steps: list[float] = []
        while True:
            started = time.perf_counter()
            more = ann.maintain(key=key, until=time.monotonic() + settings.SEARCH_RUN_SECONDS)
            steps.append(time.perf_counter() - started)
            if not more:
                break
        described = ann.describe(key)
        if not described:
            continue
        built["teams"] += 1
        built["total_s"] += sum(steps)
        if team_id == seeded["team_ids"][0]:
            built["largest"] = {
                "vectors": described["size"],
                "cells": described["cells"],
                "build_s": sum(steps),
                "steps": len(steps),
                "longest_step_s": max(steps),
                "file_mb": int(described["file_bytes"]) / 2**20,  # type: ignore[call-overload]
            }
    log(f"in-process vector indexes: {built}")
    return built


def refresh_timing(seeded: dict[str, Any], vectors: int = 2000) -> dict[str, float]:
    """The largest team's index takes in a tail: `vectors` items re-embedded (their indexed_at
    moved to now) are added by the next maintenance, and the stale copies taken out."""
    from django.conf import settings
    from django.utils import timezone

    from memory_app.search import ann
    from memory_app.search.models import SearchItem

    team_id = seeded["team_ids"][0]
    chosen = list(SearchItem.objects.filter(team_id=team_id).order_by("?").values_list("id", flat=True)[:vectors])
    SearchItem.objects.filter(id__in=chosen).update(indexed_at=timezone.now())
    key = ann.IndexKey(team_id=team_id, model=corpus.SYNTHETIC_MODEL, dimension=corpus.DIMENSION)
    started = time.perf_counter()
    while ann.maintain(key=key, until=time.monotonic() + settings.SEARCH_RUN_SECONDS):
        pass
    seconds = time.perf_counter() - started
    manifest = ann.describe(key)
    return {"vectors": len(chosen), "refresh_s": seconds, "replaced": float(manifest.get("stale", 0))}  # type: ignore[arg-type]


# --- 3. latency --------------------------------------------------------------------------------


def pick_teams(sizes: list[int], scale: float) -> list[tuple[str, int]]:
    """(label, team rank) of the teams nearest 1k x scale, 10k x scale and the largest."""
    out = []
    for label, wanted in (("~1k", 1000 * scale), ("~10k", 10_000 * scale)):
        rank = min(range(len(sizes)), key=lambda r: (abs(sizes[r] - wanted), r))
        out.append((label, rank))
    out.append(("largest", 0))
    return out


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot; steal counts as busy."""
    values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(values) - values[3] - values[4], sum(values)


def wait_for_quiet(threshold: float = 0.15, max_wait: float = 20.0) -> float:
    """Wait (at most max_wait s) until the machine, with the bench idle, is below `threshold` busy:
    other sessions' tests on this 2-core machine would otherwise show up as search latency."""
    deadline = time.monotonic() + max_wait
    while True:
        busy, total = machine_ticks()
        time.sleep(1.0)
        busy_after, total_after = machine_ticks()
        share = (busy_after - busy) / max(total_after - total, 1)
        if share <= threshold or time.monotonic() >= deadline:
            return share


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def latency(config: dict[str, Any], seeded: dict[str, Any]) -> dict[str, Any]:
    from memory_app.search import engines, fusion, schema, selectors
    from memory_app.search.embeddings import OFFLINE_BACKEND, get_embedder
    from memory_app.search.engines import Filters

    vocab = corpus.vocabulary()
    picked = pick_teams(seeded["sizes"], config["scale"])
    per_team: dict[str, list[corpus.Query]] = {}
    for label, rank in picked:
        per_team[label] = corpus.queries(rank, 200, vocab)
        for query in per_team[label]:
            corpus.QUERY_VECTORS[query.text] = query.vector
    get_embedder(OFFLINE_BACKEND).embed(["load the model"], purpose="query")

    def call(mode: str, team_id: int, query: corpus.Query) -> int:
        filters = Filters(team_id=team_id)
        if mode == "lexical":
            return len(engines.lexical(filters, fusion.query_terms(query.text), CANDIDATES))
        if mode == "vector":
            return len(engines.vector(filters, query.vector, model=corpus.SYNTHETIC_MODEL, limit=CANDIDATES))
        return len(selectors.search(filters=filters, query=query.text, limit=RESULT_LIMIT).hits)

    cells = [(label, rank, mode) for label, rank in picked for mode in MODES]
    found: dict[tuple[str, str], list[int]] = {}
    # Warm-up: every cell once over a few queries (caches, the planner's first plans).
    for label, rank, mode in cells:
        for query in per_team[label][:5]:
            call(mode, seeded["team_ids"][rank], query)
    rounds: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    cursor_of = dict.fromkeys(per_team, 0)
    quiet: list[float] = []
    for round_index in range(config["rounds"]):
        quiet.append(wait_for_quiet())
        order = cells[round_index % len(cells) :] + cells[: round_index % len(cells)]
        if round_index % 2:
            order.reverse()
        for label, rank, mode in order:
            team_id = seeded["team_ids"][rank]
            times: list[float] = []
            deadline = time.perf_counter() + CELL_SECONDS
            while len(times) < config["queries"] and (len(times) < 3 or time.perf_counter() < deadline):
                query = per_team[label][cursor_of[label] % len(per_team[label])]
                cursor_of[label] += 1
                started = time.perf_counter()
                count = call(mode, team_id, query)
                times.append((time.perf_counter() - started) * 1000)
                found.setdefault((label, mode), []).append(count)
            rounds.setdefault((label, mode), []).append((percentile(times, 50), percentile(times, 99), len(times)))
        log(f"latency: round {round_index + 1}/{config['rounds']} done")
    results = []
    for label, rank in picked:
        for mode in MODES:
            per_round = rounds[(label, mode)]
            results.append(
                {
                    "team": label,
                    "size": seeded["sizes"][rank],
                    "mode": mode,
                    "p50": statistics.median(r[0] for r in per_round),
                    "p99": statistics.median(r[1] for r in per_round),
                    "queries": sum(r[2] for r in per_round),
                    "found_mean": statistics.mean(found[(label, mode)]),
                }
            )
    embed_ms = []
    embedder = get_embedder(OFFLINE_BACKEND)
    for query in per_team["largest"][:40]:
        started = time.perf_counter()
        embedder.embed([query.text], purpose="query")
        embed_ms.append((time.perf_counter() - started) * 1000)
    return {
        "cells": results,
        "vector_recall": vector_recall(picked, seeded, per_team, vocab),
        "plans": vector_plans(picked, seeded, per_team) if schema.pgvector_installed() else ann_plans(picked, seeded),
        "query_embedding_ms_p50": statistics.median(embed_ms),
        "busy_before_rounds": quiet,
    }


def vector_recall(
    picked: list[tuple[str, int]], seeded: dict[str, Any], per_team: dict[str, list[corpus.Query]], vocab: Any
) -> dict[str, float]:
    """Recall@10 of engines.vector against exact cosine over the team's own (regenerated) vectors."""
    from memory_app.search import engines
    from memory_app.search.engines import Filters

    out = {}
    for label, rank in picked:
        size = seeded["sizes"][rank]
        first_id = 1 + sum(seeded["sizes"][:rank])
        matrix = np.vstack([piece.vectors for piece in corpus.team_chunks(rank, size, vocab)])
        recalls = []
        for query in per_team[label][:20]:
            exact = first_id + np.argsort(-(matrix @ query.vector), kind="stable")[:10]
            got = engines.vector(
                Filters(team_id=seeded["team_ids"][rank]), query.vector, model=corpus.SYNTHETIC_MODEL, limit=10
            )
            recalls.append(len({item_id for item_id, _ in got} & set(exact.tolist())) / 10)
        out[label] = statistics.mean(recalls)
    return out


def ann_plans(picked: list[tuple[str, int]], seeded: dict[str, Any]) -> dict[str, str]:
    """Which path the in-process engine takes for each measured team: its IVF index, or exact cosine."""
    from memory_app.search import ann

    plans = {}
    for label, rank in picked:
        key = ann.IndexKey(team_id=seeded["team_ids"][rank], model=corpus.SYNTHETIC_MODEL, dimension=corpus.DIMENSION)
        opened = ann.open_index(key)
        plans[label] = "exact cosine (below the index size)" if opened is None else f"IVF, {opened.index.nlist} cells"
    return plans


def vector_plans(
    picked: list[tuple[str, int]], seeded: dict[str, Any], per_team: dict[str, list[corpus.Query]]
) -> dict[str, str]:
    """Which access path PostgreSQL takes for each team's vector query (EXPLAIN of the engine's SQL)."""
    from django.db import connection, transaction

    from memory_app.search import engines, schema
    from memory_app.search.engines import Filters

    plans = {}
    for label, rank in picked:
        captured: list[tuple[str, Any]] = []

        def capture(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
            if sql.lstrip().upper().startswith("SELECT") and "<=>" in sql:
                captured.append((sql, params))  # noqa: B023 (used right away)
            return execute(sql, params, many, context)

        query = per_team[label][0]
        with connection.execute_wrapper(capture):
            engines.vector(
                Filters(team_id=seeded["team_ids"][rank]), query.vector, model=corpus.SYNTHETIC_MODEL, limit=CANDIDATES
            )
        if not captured:
            plans[label] = "?"
            continue
        sql, params = captured[-1]
        with transaction.atomic(), connection.cursor() as cursor:
            if schema.pgvector_installed():
                engines.set_pgvector_scan(cursor, CANDIDATES)
            cursor.execute(f"EXPLAIN {sql}", params)
            text = "\n".join(row[0] for row in cursor.fetchall())
        if schema.vector_index_name(corpus.DIMENSION) in text:
            plans[label] = "HNSW index scan"
        elif "Bitmap" in text:
            plans[label] = "bitmap scan of the team + sort"
        elif "Index Scan" in text:
            plans[label] = "btree index scan + sort"
        else:
            plans[label] = "sequential scan + sort"
    return plans


# --- 4. quality --------------------------------------------------------------------------------


def quality_run(seeded: dict[str, Any]) -> dict[str, Any]:
    """Each question's rank of its memory through the product's code, and both engines' candidate
    lists (with the candidates' ages) for the parent to fuse in other ways."""
    from django.conf import settings
    from django.utils import timezone

    from memory_app.search import engines, fusion, selectors
    from memory_app.search.embeddings import OFFLINE_BACKEND, get_embedder
    from memory_app.search.embeddings.offline import MODEL
    from memory_app.search.engines import Filters
    from memory_app.search.models import SearchItem

    settings.EMBEDDINGS_BACKEND = OFFLINE_BACKEND  # the quality team's vectors are the real model's
    embedder = get_embedder()
    filters = Filters(team_id=seeded["quality_team"])
    first = seeded["quality_first_id"]
    now = timezone.now()
    items = SearchItem.objects.filter(team_id=seeded["quality_team"]).values_list("id", "occurred_at")
    age_days = {item_id: (now - occurred).total_seconds() / 86400 for item_id, occurred in items}
    rows = []
    for group, question, answer in quality.QUESTIONS:
        target = first + answer
        lexical = engines.lexical(filters, fusion.query_terms(question), CANDIDATES)
        query_vector = embedder.embed([question], purpose="query")[0]
        vector_list = engines.vector(filters, query_vector, model=MODEL, limit=CANDIDATES)
        hybrid = [hit.item.pk for hit in selectors.search(filters=filters, query=question, limit=RESULT_LIMIT).hits]
        rows.append(
            {
                "group": group,
                "question": question,
                "target": target,
                "hybrid": rank_of(target, hybrid),
                "lexical_list": lexical,
                "vector_list": vector_list,
                "age_days": {str(i): age_days[i] for i, _ in [*lexical, *vector_list]},
            }
        )
    return {"questions": rows, "half_life_days": settings.SEARCH_RECENCY_HALF_LIFE_DAYS}


def rank_of(target: int, ids: Sequence[int]) -> int | None:
    for position, item_id in enumerate(ids[:RESULT_LIMIT], start=1):
        if item_id == target:
            return position
    return None


def scores(ranks: Sequence[int | None]) -> tuple[float, float]:
    recall = sum(1 for r in ranks if r is not None and r <= 5) / len(ranks)
    mrr = statistics.mean(1 / r if r else 0.0 for r in ranks)
    return recall, mrr


# --- fusions of the same candidates, for the quality table ----------------------------------------

FIRST_K = 60  # the first fusion's constant (the paper's), before the planted-memory set retuned it
FIRST_RECENCY_FLOOR = 0.5


def fused_rank(
    row: dict[str, Any], texts: Sequence[str], first_id: int, half_life: float, *, variant: str
) -> int | None:
    """The memory's rank when the question's two candidate lists are fused by `variant`:
    "no recency": the product's relevance model (fusion.Features) without the recency factor (a
    candidate only the words found gets similarity 0 here: the lists keep no vectors); "first": the
    first fusion, plain RRF with K=60 and a recency factor between 0.5 and 1 (see bench/README.md)."""
    from memory_app.search import fusion

    ranked = fusion.fuse([tuple(x) for x in row["lexical_list"]], [tuple(x) for x in row["vector_list"]])
    best_lexical = max((item.lexical_score or 0.0 for item in ranked), default=0.0) or 1.0
    best_similarity = max((item.vector_similarity or 0.0 for item in ranked), default=0.0)
    terms = fusion.query_terms(row["question"])
    coverage = {
        item.item_id: fusion.coverage(texts[item.item_id - first_id], terms) if item.lexical_rank else 0.0
        for item in ranked
    }
    best_coverage = max(coverage.values(), default=0.0)
    scored = []
    for item in ranked:
        if variant == "no recency":
            similarity = item.vector_similarity or 0.0
            text = texts[item.item_id - first_id]
            value = fusion.Features(
                lexical_share=(item.lexical_score or 0.0) / best_lexical,
                coverage=coverage[item.item_id],
                best_coverage=best_coverage,
                similarity=similarity,
                similarity_gap=similarity - best_similarity,
                substance=fusion.substance(text, kind="message"),
                speaker_named=False,
                in_time=False,
            ).relevance()
        else:
            value = sum(1 / (FIRST_K + rank) for rank in (item.lexical_rank, item.vector_rank) if rank is not None)
            age = row["age_days"][str(item.item_id)]
            value *= FIRST_RECENCY_FLOOR + (1 - FIRST_RECENCY_FLOOR) * 0.5 ** (age / half_life)
        scored.append((-value, -item.item_id, item.item_id))
    return rank_of(row["target"], [item_id for _, _, item_id in sorted(scored)])


def quality_ranks(result: dict[str, Any], texts: Sequence[str]) -> list[dict[str, Any]]:
    """Per question: its group and the memory's rank in each arm."""
    first_id = result["seeded"]["quality_first_id"]
    half_life = result["quality"]["half_life_days"]
    out = []
    for row in result["quality"]["questions"]:
        out.append(
            {
                "group": row["group"],
                "lexical": rank_of(row["target"], [i for i, _ in row["lexical_list"]]),
                "vector": rank_of(row["target"], [i for i, _ in row["vector_list"]]),
                "hybrid": row["hybrid"],
                "no recency": fused_rank(row, texts, first_id, half_life, variant="no recency"),
                "first": fused_rank(row, texts, first_id, half_life, variant="first"),
            }
        )
    return out


# --- the engine child --------------------------------------------------------------------------


def engine_child(config: dict[str, Any]) -> dict[str, Any]:
    setup_django()
    from django.core.management import call_command
    from django.db import connection

    from memory_app.search import engines, schema

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    migrate_s = time.perf_counter() - started
    vendor = connection.vendor
    pgvector = schema.pgvector_installed()
    vector_engine = engines.vector_engine_name()
    if config["engine"] == "pgvector" and not pgvector:
        raise SystemExit("pgvector engine: the migration did not install the vector column")
    if config["engine"] == "postgres" and pgvector:
        raise SystemExit("postgres engine: the migration installed pgvector's column")
    with connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute("SHOW server_version")
            version = f"PostgreSQL {cursor.fetchone()[0]}"
            if pgvector:
                cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
                version += f", pgvector {cursor.fetchone()[0]}"
            cursor.execute("SHOW shared_buffers")
            version += f", shared_buffers {cursor.fetchone()[0]}"
        else:
            cursor.execute("SELECT sqlite_version()")
            version = f"SQLite {cursor.fetchone()[0]}"
    log(f"{config['engine']}: migrated ({version}); seeding scale {config['scale']}")
    seeded = seed(config, vendor, pgvector)
    log(f"{config['engine']}: {seeded['items']} items seeded in {seeded['seed_s']:.0f} s; settling")
    settled = settle(vendor, pgvector)
    indexes = {} if pgvector else build_vector_indexes(seeded)
    log(f"{config['engine']}: settled {settled}; timing")
    timed = latency(config, seeded)
    refresh = {} if pgvector else refresh_timing(seeded)
    log(f"{config['engine']}: quality")
    judged = quality_run(seeded)
    return {
        "engine": config["engine"],
        "version": version,
        "migrate_s": migrate_s,
        "seeded": {k: v for k, v in seeded.items() if k != "team_ids"},
        "settled": settled,
        "vector_indexes": indexes,
        "refresh": refresh,
        "vector_engine": vector_engine,
        "latency": timed,
        "quality": judged,
    }


# --- the parent --------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    var_dir = Path(os.environ.get("MEMSITE_VAR_DIR", "/tmp/var-searchbench"))
    var_dir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="searchbench-", dir=var_dir))
    # The quality set's vectors depend only on its size and the model: kept between runs.
    vectors = var_dir / f"searchbench-quality-{args.distractors}-{MODEL_SHA256[:12]}.npz"
    base_env = child_environment(var_dir, None, var_dir / "searchbench-model.sqlite3")
    log("model: throughput and the quality set's vectors")
    model = run_child(
        "model",
        {
            "distractors": args.distractors,
            "throughput_texts": THROUGHPUT_TEXTS,
            "vectors": str(vectors),
            "result": str(workdir / "model.out.json"),
        },
        base_env,
        workdir,
    )
    results: dict[str, dict[str, Any]] = {}
    for engine in args.engines:
        config = {
            "engine": engine,
            "scale": args.scale,
            "measured_only": args.measured_only,
            "rounds": args.rounds,
            "queries": args.queries,
            "vectors": str(vectors),
            "result": str(workdir / f"{engine}.out.json"),
        }
        if engine == "sqlite":
            path = var_dir / "searchbench.sqlite3"
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
            results[engine] = run_child("engine", config, child_environment(var_dir, None, path), workdir)
            if not args.keep_db:
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)
        else:
            from tests.pgvector_server import create_database, drop_database

            drop_database(args.db_name, args.pg_url)
            url = create_database(args.db_name, pgvector=engine == "pgvector", server=args.pg_url)
            try:
                results[engine] = run_child("engine", config, child_environment(var_dir, url, None), workdir)
            finally:
                if not args.keep_db:
                    drop_database(args.db_name, args.pg_url)
    goals = report(args, when, model, results, vectors, time.perf_counter() - started)
    write_figures(
        args.json,
        "search_bench",
        {
            "scale": args.scale,
            "rounds": args.rounds,
            "queries": args.queries,
            "distractors": args.distractors,
            "model": model,
            "engines": results,
            "goals": [{"goal": text, "passed": ok} for text, ok in goals],
        },
    )
    return 0


# --- the report --------------------------------------------------------------------------------


def report(
    args: argparse.Namespace,
    when: str,
    model: dict[str, Any],
    results: dict[str, dict[str, Any]],
    vectors: Path,
    seconds: float,
) -> list[tuple[str, bool]]:
    """Print the tables; the goals and whether each is met."""
    any_result = next(iter(results.values()), None)
    print(f"memsite search bench, {when}")
    print(f"machine: {machine_description()}; Python {platform.python_version()}")
    for engine, result in results.items():
        print(f"{engine}: {result['version']}; vector engine {result.get('vector_engine', '?')}")
    command = "bench/search_bench.py " + " ".join(sys.argv[1:])
    print(f"command: .venv/bin/python {command.strip()}")
    if any_result:
        seeded = any_result["seeded"]
        sizes = seeded["sizes"]
        seeded_teams = [size for size in sizes if size]
        print(
            f"seed: scale {args.scale}{' (measured teams only)' if args.measured_only else ''}: {sum(sizes):,}"
            f" synthetic items over {len(seeded_teams)} teams (largest {seeded_teams[0]:,},"
            f" smallest {seeded_teams[-1]:,}) + the quality team ({seeded['items'] - sum(sizes):,} real texts)"
        )
    print()
    print("## Seeding (bulk, synthetic text and vectors)\n")
    print("| engine | items | write s | items/s | HNSW build s | analyze s | table + indexes MB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for engine, result in results.items():
        seeded, settled = result["seeded"], result["settled"]
        hnsw = f"{settled['hnsw_s']:.1f}" if "hnsw_s" in settled else "-"
        print(
            f"| {engine} | {seeded['items']:,} | {seeded['seed_s']:.1f} | {seeded['items'] / seeded['seed_s']:,.0f} |"
            f" {hnsw} | {settled['analyze_s']:.1f} | {settled['table_mb']:,.0f} |"
        )
    indexed = {engine: result for engine, result in results.items() if result.get("vector_indexes")}
    if indexed:
        print()
        print("## In-process vector indexes (faiss IVF, int8; built in SEARCH_RUN_SECONDS steps)\n")
        print(
            "| engine | teams indexed | all builds s | largest team: vectors | cells | build s | steps |"
            " longest step s | file MB | MB per 100k vectors | refresh of 2,000 re-embedded s |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for engine, result in indexed.items():
            built, largest = result["vector_indexes"], result["vector_indexes"]["largest"]
            per_100k = largest["file_mb"] / max(largest["vectors"], 1) * 100_000
            print(
                f"| {engine} | {built['teams']} | {built['total_s']:.1f} | {largest['vectors']:,} |"
                f" {largest['cells']} | {largest['build_s']:.1f} | {largest['steps']} |"
                f" {largest['longest_step_s']:.1f} |"
                f" {largest['file_mb']:.1f} | {per_100k:.1f} | {result['refresh']['refresh_s']:.1f} |"
            )
    print()
    print(
        f"## Latency (ms; p50 / p99 = medians over {args.rounds} rounds of each round's p50 / p99; "
        f"{CANDIDATES} candidates per engine, hybrid = selectors.search limit {RESULT_LIMIT})\n"
    )
    print(
        "| engine | team | items | lexical p50 / p99 | vector p50 / p99 | hybrid p50 / p99 | vector recall@10 | plan |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|")
    growth: list[str] = []
    verdicts: list[tuple[str, bool]] = []
    for engine, result in results.items():
        cells = {(c["team"], c["mode"]): c for c in result["latency"]["cells"]}
        teams = list(dict.fromkeys(c["team"] for c in result["latency"]["cells"]))
        for team in teams:
            parts = [f"{cells[(team, m)]['p50']:.2f} / {cells[(team, m)]['p99']:.2f}" for m in MODES]
            recall = result["latency"]["vector_recall"].get(team, float("nan"))
            plan = result["latency"]["plans"].get(team, "exact: the team's newest vectors, numpy")
            print(
                f"| {engine} | {team} | {cells[(team, 'lexical')]['size']:,} | {' | '.join(parts)} | {recall:.2f}"
                f" | {plan} |"
            )
        ratios = [f"{m} {cells[('largest', m)]['p50'] / cells[('~1k', m)]['p50']:.2f}x" for m in MODES]
        growth.append(f"{engine}: p50 largest / ~1k: {', '.join(ratios)}")
        if engine == "pgvector":
            hybrid_largest = cells[("largest", "hybrid")]["p50"]
            hybrid_growth = hybrid_largest / cells[("~1k", "hybrid")]["p50"]
            verdicts.append(
                (f"pgvector hybrid p50 at the largest team {hybrid_largest:.1f} ms < 25 ms", hybrid_largest < 25)
            )
            verdicts.append((f"pgvector hybrid p50 largest / ~1k = {hybrid_growth:.2f} < 2", hybrid_growth < 2))
    print()
    for line in growth:
        print(f"- {line}")
    for engine, result in results.items():
        shares = ", ".join(f"{share:.0%}" for share in result["latency"]["busy_before_rounds"])
        print(f"- {engine}: machine busy before each round (bench idle): {shares}")
    for engine, result in results.items():
        print(
            f"- {engine}: the real model's one-query embedding inside hybrid: p50"
            f" {result['latency']['query_embedding_ms_p50']:.1f} ms"
        )
    print()
    print("## Embedding throughput (offline model, 1 onnxruntime thread = 1 core)\n")
    print(
        f"- {model['model']}: **{model['items_per_s']:.1f} items/s per core** ({model['tokens_per_s']:,.0f} tokens/s)"
        f" on {model['sample']:,} indexed chunks of agent sessions (mean {model['chars_mean']:.0f} chars,"
        f" {model['tokens_mean']:.0f} tokens)"
    )
    print(
        f"- {model['short_items_per_s']:.1f} items/s per core on short chat messages (mean"
        f" {model['short_chars_mean']:.0f} chars); one query {model['query_ms_p50']:.1f} ms p50,"
        f" {model['query_ms_p99']:.1f} ms p99; cold load {model['load_s']:.2f} s"
    )
    print()
    print(
        f"## Quality ({len(quality.MEMORIES)} planted memories among {model['texts']:,} real distractors, "
        f"{len(quality.QUESTIONS)} questions; recall@5 / MRR@10)\n"
    )
    arms = {
        "lexical": "lexical",
        "vector": "vector",
        "hybrid": "**hybrid** (selectors.search)",
        "no recency": "hybrid without the recency factor (bench)",
        "first": "hybrid, first fusion: RRF K=60, recency 0.5-1 (bench)",
    }
    groups = [*quality.GROUPS, "shares a keyword", "all"]
    print("| engine | arm | " + " | ".join(groups) + " |")
    print("|---|---|" + "---:|" * len(groups))
    texts = [*quality.MEMORIES, *np.load(vectors, allow_pickle=True)["distractor_texts"].tolist()]
    for engine, result in results.items():
        rows = quality_ranks(result, texts)
        by_arm: dict[str, dict[str, tuple[float, float]]] = {}
        for arm, label in arms.items():
            cells_q = {}
            for group in groups:
                chosen = [
                    r[arm]
                    for r in rows
                    if group == "all"
                    or r["group"] == group
                    or (group == "shares a keyword" and r["group"] != "no keyword")
                ]
                cells_q[group] = scores(chosen)
            by_arm[arm] = cells_q
            print(f"| {engine} | {label} | " + " | ".join(f"{r:.2f} / {m:.2f}" for r, m in cells_q.values()) + " |")
        hybrid, lexical, vector = by_arm["hybrid"]["all"], by_arm["lexical"]["all"], by_arm["vector"]["all"]
        beats = hybrid[0] >= max(lexical[0], vector[0]) and hybrid[1] > max(lexical[1], vector[1])
        verdicts.append(
            (
                f"{engine}: hybrid beats lexical and vector on all questions (R@5 {hybrid[0]:.2f} vs {lexical[0]:.2f}"
                f" / {vector[0]:.2f}, MRR {hybrid[1]:.2f} vs {lexical[1]:.2f} / {vector[1]:.2f})",
                beats,
            )
        )
        keyword = by_arm["hybrid"]["shares a keyword"][0]
        verdicts.append(
            (f"{engine}: hybrid recall@5 on questions sharing a keyword {keyword:.2f} >= 0.9", keyword >= 0.9)
        )
    print()
    print("| goal | result |")
    print("|---|---|")
    for text, ok in verdicts:
        print(f"| {text} | {'PASS' if ok else 'FAIL'} |")
    print(
        f"\ntotal {seconds:.0f} s (model {model['child_seconds']:.0f} s, "
        + ", ".join(f"{engine} {result['child_seconds']:.0f} s" for engine, result in results.items())
        + ")"
    )
    return verdicts


def child_main(args: argparse.Namespace) -> int:
    config = json.loads(Path(args.config).read_text())
    random.seed(0)
    result = model_child(config) if args.child == "model" else engine_child(config)
    Path(config["result"]).write_text(json.dumps(result, default=str))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_args(argv)
    return child_main(arguments) if arguments.child else run(arguments)


if __name__ == "__main__":
    sys.exit(main())
