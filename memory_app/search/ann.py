"""Recall's in-process approximate-nearest-neighbour index, for databases without pgvector (the
embedded SQLite default, PostgreSQL without the extension): an inverted-file index (faiss IVF,
int8 vectors) per team, embedding model and dimension, in a directory of its own under
SEARCH_ANN_DIR. The team's vectors are split into about sqrt(n) cells around k-means centres; a
search compares the query with the centres, then with the vectors of the nearest cells.

Why not a graph (HNSW, as pgvector's)? On the search bench's 200k team (clustered vectors whose
noise spreads over all 384 dimensions, as a model's does) usearch's HNSW put 0.68 of exact
cosine's top 10 among its 100 candidates (ef 160) and took 300 s to build on one core; the
inverted file puts 0.97 there with 10 % of its cells probed, builds in ~10 s, and adds or removes
a vector in microseconds, which suits an index that follows writes.

The index only proposes candidates. The engine reads them back through the search's filters and
scores them with their stored vectors, so a deleted, filtered-out or re-embedded item can never be
returned on the index's word; and it scores exactly every vector indexed after the index was last
brought up to date (its tail), so nothing written since is missed. The vectors in the index are
int8 (a quarter of float32): they only have to rank candidates, the exact cosine comes from the row.

Files: `manifest.json` names the current index file (immutable, named by generation) and what it
covers; both are replaced atomically (temp file + os.replace), so a reader sees one whole index or
the one before. Readers (web processes) memory-map the file (page cache shared between processes)
and reload when the manifest changes. The writer is the index run (services.search_index_execute):
a build or a refresh proceeds in steps within the run's time slice, its progress kept beside the
index (`partial.faiss` + `work.json`), so a 200k build never holds a worker for minutes at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

import numpy as np
from django.conf import settings
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from memory_app.search.models import SearchItem
from memory_app.tenancy.models import Team

if TYPE_CHECKING:  # imported where used: loading faiss takes ~1 s, which only searches without pgvector need
    import faiss

log = logging.getLogger(__name__)

FORMAT = 1  # of the manifest and files: an index of another format is rebuilt
MANIFEST = "manifest.json"
WORK = "work.json"
PARTIAL = "partial.faiss"
LOCK = ".lock"
# The share of cells a search compares the query's vector with, for 100 candidates (more for more),
# at least MIN_PROBES cells. Recall@10 of 100 candidates against exact cosine on the bench's 200k
# team (447 cells): 0.83 at 5 %, 0.975 at 10 %, 1.00 at 15 % (docs/recall.md).
PROBE_SHARE = 0.12
MIN_PROBES = 16
CELLS_PER_ROOT = 1.0  # cells = sqrt(vectors) x this: ~450 vectors a cell at 200k
TRAINING_PER_CELL = 32  # k-means learns the centres from a sample of this many vectors a cell
TRAINING_ROUNDS = 10
ADD_BATCH = 5000  # vectors read and added per step of a build or refresh
# A vector indexed this long before the index's mark may still have been committed after the
# build read the table (its time is taken before its transaction waits for the write lock):
# the engine scores it as part of the tail too.
TAIL_MARGIN = timedelta(minutes=2)
# Entries replaced or removed since the last build, as a share of the index, past which the next
# maintenance rebuilds it (the cells' centres were learnt from vectors that are no longer there).
REBUILD_STALE_SHARE = 0.2


@dataclass(frozen=True)
class IndexKey:
    team_id: int
    model: str
    dimension: int


class Manifest(TypedDict):
    format: int
    team_created: str  # the team's created_at: an index left by a team of a recreated database is ignored
    model: str
    dimension: int
    generation: str  # the index file's name
    size: int  # vectors it holds
    cells: int
    stale: int  # entries replaced or removed since the last build
    covers_until: str  # every vector indexed before this moment (less TAIL_MARGIN) is in the index
    built_at: str
    build_seconds: float  # the last build's or refresh's working time, every step together


class Work(TypedDict):
    """A build or refresh in progress: vectors are added in id order, through `through_id`."""

    kind: Literal["build", "refresh"]
    started_at: str  # becomes the index's covers_until: anything indexed later is in its tail
    since: str | None  # a refresh adds the vectors indexed after this
    through_id: int
    replaced: int
    seconds: float


@dataclass(frozen=True)
class OpenIndex:
    index: faiss.IndexIVFScalarQuantizer
    tail_after: datetime  # vectors indexed after this are not (all) in the index: scored exactly
    size: int

    def nearest(self, query_vector: np.ndarray, count: int) -> list[int]:
        """The ids of the (about) `count` nearest vectors, nearest first."""
        cells = int(self.index.nlist)
        share = PROBE_SHARE * max(1.0, count / 100)
        self.index.nprobe = min(cells, max(MIN_PROBES, int(np.ceil(cells * share))))
        _, found = self.index.search(np.ascontiguousarray(query_vector[None, :], dtype=np.float32), count)
        return [int(item_id) for item_id in found[0] if item_id >= 0]


# --- where the files are -------------------------------------------------------------------------


def _slug(text: str, length: int = 40) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:length]


def _database_directory() -> Path:
    """One directory per database: tests, benches and deployments may share a var directory."""
    config = connection.settings_dict
    identity = f"{connection.vendor}|{config.get('HOST') or ''}|{config.get('PORT') or ''}|{config['NAME']}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return Path(settings.SEARCH_ANN_DIR) / f"{connection.vendor}-{_slug(Path(str(config['NAME'])).stem)}-{digest}"


def index_directory(key: IndexKey) -> Path:
    model = f"{_slug(key.model)}-{hashlib.sha256(key.model.encode()).hexdigest()[:8]}"
    return _database_directory() / f"team-{key.team_id}" / f"{model}-{key.dimension}"


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def _save_index(index: faiss.IndexIVFScalarQuantizer, path: Path) -> None:
    import faiss

    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    faiss.write_index(index, str(temporary))
    os.replace(temporary, path)


def _restore(path: Path, *, view: bool) -> faiss.IndexIVFScalarQuantizer:
    """An index file, memory-mapped (`view`: pages shared between processes) or read into memory
    (to add to). faiss raises RuntimeError on a file it cannot read."""
    import faiss

    # One thread: a search is one query, and a build must not take the cores of the worker's
    # other jobs (faiss's OpenMP would use every core).
    faiss.omp_set_num_threads(1)
    if not path.is_file():
        raise FileNotFoundError(path)
    index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP if view else 0)
    if not isinstance(index, faiss.IndexIVFScalarQuantizer):
        raise ValueError(f"{path.name} is not an inverted-file index")
    return index


def _read_json(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _team_created(team_id: int) -> str:
    created = Team.objects.filter(pk=team_id).values_list("created_at", flat=True).first()
    return created.isoformat() if created is not None else ""


def read_manifest(key: IndexKey) -> Manifest | None:
    """The index's manifest, if it is one of this format, model, dimension and team."""
    data = _read_json(index_directory(key) / MANIFEST)
    if (
        data is None
        or data.get("format") != FORMAT
        or data.get("model") != key.model
        or data.get("dimension") != key.dimension
        or data.get("team_created") != _team_created(key.team_id)
    ):
        return None
    return data  # type: ignore[return-value]


# --- reading (every search) ----------------------------------------------------------------------

_opened: dict[Path, tuple[tuple[int, int], OpenIndex]] = {}  # directory -> (manifest inode and mtime, index)


def open_index(key: IndexKey) -> OpenIndex | None:
    """The team's index, memory-mapped and cached in this process until its manifest changes (a
    stat per search); None when there is none yet or it cannot be read (the engine then searches
    exactly, and the next index run rebuilds it)."""
    directory = index_directory(key)
    try:
        status = (directory / MANIFEST).stat()
    except OSError:
        _opened.pop(directory, None)
        return None
    stamp = (status.st_ino, status.st_mtime_ns)
    cached = _opened.get(directory)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    manifest = read_manifest(key)
    if manifest is None:
        return None
    try:
        index = _restore(directory / manifest["generation"], view=True)
        if index.d != key.dimension:
            raise ValueError(f"{index.d} dimensions")
    except (OSError, ValueError, RuntimeError) as exc:
        log.warning("search index of team %s unreadable (%s): exact search until it is rebuilt", key.team_id, exc)
        return None
    tail_after = datetime.fromisoformat(manifest["covers_until"]) - TAIL_MARGIN
    opened = OpenIndex(index=index, tail_after=tail_after, size=int(index.ntotal))
    _opened[directory] = (stamp, opened)
    return opened


def forget_opened() -> None:
    """Drop this process's open indexes (tests that remove the files under it)."""
    _opened.clear()


# --- writing (the index run) ---------------------------------------------------------------------


def team_vectors(key: IndexKey) -> QuerySet[SearchItem]:
    """Every vector an index of `key` holds: the team's indexed items of that model and dimension."""
    return SearchItem.objects.filter(
        team_id=key.team_id, embedding_model=key.model, embedding_dim=key.dimension, state=SearchItem.State.INDEXED
    )


@contextlib.contextmanager
def _exclusive(directory: Path) -> Iterator[bool]:
    """Whether this process holds the index's lock: two runs (a run and the sweeper's copy of it,
    or `reindex --now` beside a worker) never write one index at once; the second one skips."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / LOCK, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def maintain(*, key: IndexKey, until: float, rebuild: bool = False) -> bool:
    """Build the team's index, or add its tail, when it is due, in steps until `until` (a
    time.monotonic()), at least one step. Returns whether work is left for a follow-up run.

    Due: a build once the team has SEARCH_ANN_MIN_ITEMS vectors and no usable index (or when
    `rebuild`, or once replaced and removed entries pass REBUILD_STALE_SHARE of it); a refresh once
    its tail passes SEARCH_ANN_TAIL_ITEMS."""
    directory = index_directory(key)
    with _exclusive(directory) as locked:
        if not locked:
            return False
        work = _read_work(directory)
        if work is None or rebuild:
            work = _due_work(key, rebuild=rebuild)
            if work is None:
                return False
            (directory / PARTIAL).unlink(missing_ok=True)
        return _advance(key, directory, work, until)


def _read_work(directory: Path) -> Work | None:
    data = _read_json(directory / WORK)
    if data is None or data.get("kind") not in ("build", "refresh"):
        return None
    if data["through_id"] and not (directory / PARTIAL).exists():
        return None  # its partial index is gone: start again
    return data  # type: ignore[return-value]


def _due_work(key: IndexKey, *, rebuild: bool) -> Work | None:
    now = timezone.now().isoformat()
    build: Work = {"kind": "build", "started_at": now, "since": None, "through_id": 0, "replaced": 0, "seconds": 0.0}
    manifest = read_manifest(key)
    usable = manifest is not None and _readable(index_directory(key) / manifest["generation"], key.dimension)
    if rebuild or not usable or manifest is None:
        return build if team_vectors(key).count() >= settings.SEARCH_ANN_MIN_ITEMS else None
    since = datetime.fromisoformat(manifest["covers_until"]) - TAIL_MARGIN
    tail = team_vectors(key).filter(indexed_at__gt=since).count()
    if tail < settings.SEARCH_ANN_TAIL_ITEMS:
        return None
    if manifest["stale"] + tail > REBUILD_STALE_SHARE * max(manifest["size"], 1):
        return build
    return {**build, "kind": "refresh", "since": since.isoformat()}


def _readable(path: Path, dimension: int) -> bool:
    """Whether searches can open the file (memory-mapped: cheap), else it is built again."""
    try:
        return int(_restore(path, view=True).d) == dimension
    except (OSError, ValueError, RuntimeError):
        return False


def _matrix(rows: list[tuple[int, bytes | memoryview | None]], dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """(item ids, float32 vectors) of (id, stored vector) rows."""
    ids = np.fromiter((item_id for item_id, _ in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(bytes(blob or b"") for _, blob in rows), dtype="<f4").reshape(len(rows), dimension)
    return ids, np.ascontiguousarray(matrix, dtype=np.float32)


def _trained_index(key: IndexKey) -> faiss.IndexIVFScalarQuantizer:
    """An empty index whose cells' centres and int8 ranges are learnt from a sample of the team's
    vectors: the one step of a build that is not cut (~5 s at 200k vectors on one core)."""
    import faiss

    faiss.omp_set_num_threads(1)  # as in _restore
    ids = np.fromiter(team_vectors(key).values_list("id", flat=True).iterator(chunk_size=10_000), dtype=np.int64)
    cells = max(1, round(CELLS_PER_ROOT * float(np.sqrt(len(ids)))))
    chosen = np.random.default_rng(0).choice(ids, size=min(len(ids), cells * TRAINING_PER_CELL), replace=False)
    rows: list[tuple[int, bytes | memoryview | None]] = []
    for start in range(0, len(chosen), ADD_BATCH):
        rows.extend(
            team_vectors(key).filter(id__in=chosen[start : start + ADD_BATCH].tolist()).values_list("id", "embedding")
        )
    _, sample = _matrix(rows, key.dimension)
    centres = faiss.IndexFlatIP(key.dimension)
    index = faiss.IndexIVFScalarQuantizer(
        centres, key.dimension, cells, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
    )
    index.cp.niter = TRAINING_ROUNDS
    index.cp.min_points_per_centroid = 1  # a small team's few vectors a cell are enough
    index.train(sample)  # faiss's Python constructor keeps `centres` alive with the index
    return index


def _starting_index(key: IndexKey, directory: Path, work: Work) -> faiss.IndexIVFScalarQuantizer:
    """What this step adds to: the partial index of the steps before, else (a refresh) a writable
    copy of the current index, else a newly trained one."""
    if work["through_id"]:
        return _restore(directory / PARTIAL, view=False)
    manifest = read_manifest(key)
    if work["kind"] == "refresh" and manifest is not None:
        return _restore(directory / manifest["generation"], view=False)
    return _trained_index(key)


def _advance(key: IndexKey, directory: Path, work: Work, until: float) -> bool:
    import faiss

    started = time.monotonic()
    try:
        index = _starting_index(key, directory, work)
    except (OSError, ValueError, RuntimeError) as exc:  # a damaged partial or index: build afresh
        log.warning("search index of team %s: starting again (%s)", key.team_id, exc)
        work = {**work, "kind": "build", "since": None, "through_id": 0, "replaced": 0}
        index = _trained_index(key)
    vectors = team_vectors(key)
    if work["since"] is not None:
        vectors = vectors.filter(indexed_at__gt=datetime.fromisoformat(work["since"]))
    while True:
        batch = list(
            vectors.filter(id__gt=work["through_id"]).order_by("id").values_list("id", "embedding")[:ADD_BATCH]
        )
        if batch:
            ids, matrix = _matrix(batch, key.dimension)
            if work["kind"] == "refresh":  # re-embedded since it was added: its new vector replaces the old
                work["replaced"] += int(index.remove_ids(faiss.IDSelectorBatch(ids)))
            index.add_with_ids(matrix, ids)
            work["through_id"] = int(ids[-1])
        if len(batch) < ADD_BATCH:  # that was the last of them
            work["seconds"] += time.monotonic() - started
            _publish(key, directory, index, work)
            return False
        if time.monotonic() >= until:
            break
    work["seconds"] += time.monotonic() - started
    _save_index(index, directory / PARTIAL)
    _write_atomically(directory / WORK, json.dumps(work).encode())
    return True


def _publish(key: IndexKey, directory: Path, index: faiss.IndexIVFScalarQuantizer, work: Work) -> None:
    """Make the finished index the current one; remove the files readers no longer need."""
    previous = read_manifest(key)
    stale = 0
    if work["kind"] == "refresh":
        stale = (previous["stale"] if previous else 0) + work["replaced"] + _remove_deleted(key, index)
    generation = f"index-{uuid.uuid4().hex[:12]}.faiss"
    _save_index(index, directory / generation)
    manifest: Manifest = {
        "format": FORMAT,
        "team_created": _team_created(key.team_id),
        "model": key.model,
        "dimension": key.dimension,
        "generation": generation,
        "size": int(index.ntotal),
        "cells": int(index.nlist),
        "stale": stale,
        "covers_until": work["started_at"],
        "built_at": timezone.now().isoformat(),
        "build_seconds": round(work["seconds"], 3),
    }
    _write_atomically(directory / MANIFEST, json.dumps(manifest).encode())
    (directory / WORK).unlink(missing_ok=True)
    (directory / PARTIAL).unlink(missing_ok=True)
    # The generation before stays for a reader that read the old manifest and opens its file now.
    keep = {generation, previous["generation"] if previous else ""}
    for old in directory.glob("index-*.faiss"):
        if old.name not in keep:
            old.unlink(missing_ok=True)
    log.info(
        "search index of team %s: %s of %d vectors in %.1f s", key.team_id, work["kind"], index.ntotal, work["seconds"]
    )


def _remove_deleted(key: IndexKey, index: faiss.IndexIVFScalarQuantizer) -> int:
    """Take out of the index the entries whose item is gone (deleted, re-embedded by another model,
    or back to pending): they would keep taking places among every search's candidates."""
    import faiss

    live = np.fromiter(team_vectors(key).values_list("id", flat=True).iterator(chunk_size=10_000), dtype=np.int64)
    gone = np.setdiff1d(held_ids(index), live)
    return int(index.remove_ids(faiss.IDSelectorBatch(gone))) if len(gone) else 0


def held_ids(index: faiss.IndexIVFScalarQuantizer) -> np.ndarray:
    """Every item id the index holds (its cells' id lists)."""
    import faiss

    lists = index.invlists
    if lists is None:
        return np.zeros(0, dtype=np.int64)
    held = [
        faiss.rev_swig_ptr(lists.get_ids(cell), lists.list_size(cell)).copy()
        for cell in range(index.nlist)
        if lists.list_size(cell)
    ]
    return np.concatenate(held) if held else np.zeros(0, dtype=np.int64)


def describe(key: IndexKey) -> dict[str, object]:
    """What the index holds and what it weighs (the search bench prints it)."""
    manifest = read_manifest(key)
    if manifest is None:
        return {}
    path = index_directory(key) / manifest["generation"]
    return {**manifest, "file_bytes": path.stat().st_size if path.exists() else 0}
