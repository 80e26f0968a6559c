"""The in-process vector index (search/ann.py) that databases without pgvector search through:
it finds what exact cosine finds, misses nothing written, deleted or re-embedded since it was
built, keeps every filter, and a missing or damaged file only costs speed until it is rebuilt.

The engine is called as `engines.in_process_vector`, which reads only the item table, so these
tests also run on a database with pgvector (and again, end to end, on one without it:
test_pgvector_engine.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.utils import timezone

from memory_app.search import ann, engines, schema
from memory_app.search import services as search
from memory_app.search.embeddings.fake import FakeEmbeddings
from memory_app.search.engines import Filters
from memory_app.search.models import IndexRun, SearchItem, SearchKind
from memory_app.tenancy.models import Team
from tests.conftest import Tenant, managed_session

MODEL = "ann-test-model"
DIMENSION = 32
CLUSTERS = 20


@pytest.fixture(autouse=True)
def ann_dir(settings, tmp_path: Path) -> Iterator[Path]:
    settings.SEARCH_ANN_DIR = tmp_path / "ann"
    settings.SEARCH_ANN_MIN_ITEMS = 100
    settings.SEARCH_ANN_TAIL_ITEMS = 50
    ann.forget_opened()
    yield tmp_path / "ann"
    ann.forget_opened()


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def clustered(count: int, seed: int = 0) -> np.ndarray:
    """Vectors around CLUSTERS random centres (cosine ~0.7 to theirs), as a model's are."""
    rng = np.random.default_rng(seed)
    centres = unit(rng.standard_normal((CLUSTERS, DIMENSION)))
    noise = rng.standard_normal((count, DIMENSION)) / np.sqrt(DIMENSION)
    return unit(centres[rng.integers(0, CLUSTERS, count)] + noise)


def seed(
    team: Team,
    vectors: np.ndarray,
    *,
    first: int = 0,
    kind: str = SearchKind.MESSAGE,
    session_id: Any = None,
    occurred_at: datetime | None = None,
    indexed_at: datetime | None = None,
) -> list[int]:
    """Indexed items holding these vectors; returns their ids in order. Indexed an hour ago by
    default: well before any index built in the test."""
    indexed = indexed_at or timezone.now() - timedelta(hours=1)
    items = SearchItem.objects.bulk_create(
        SearchItem(
            team=team,
            kind=kind,
            source_key=f"{kind}-{first + offset}",
            session_id=session_id,
            text=f"item {first + offset}",
            text_hash=f"{first + offset:032d}",
            occurred_at=occurred_at or indexed - timedelta(minutes=offset),
            state=SearchItem.State.INDEXED,
            embedding=vector.astype("<f4").tobytes(),
            embedding_model=MODEL,
            embedding_dim=DIMENSION,
            indexed_at=indexed,
        )
        for offset, vector in enumerate(vectors)
    )
    return [item.pk for item in items]


def key(team: Team) -> ann.IndexKey:
    return ann.IndexKey(team_id=team.pk, model=MODEL, dimension=DIMENSION)


def build(team: Team, *, rebuild: bool = False) -> None:
    """Maintain the team's index until nothing is left to do (as successive index runs would)."""
    for _ in range(50):
        if not ann.maintain(key=key(team), until=time.monotonic() + 30, rebuild=rebuild):
            return
        rebuild = False
    raise AssertionError("the index never finished")


def held(team: Team) -> set[int]:
    """The item ids the team's current index holds."""
    index = ann.open_index(key(team))
    assert index is not None
    return set(ann.held_ids(index.index).tolist())


def search_ids(team: Team, query: np.ndarray, limit: int = 10, **filters: object) -> list[int]:
    found = engines.in_process_vector(Filters(team_id=team.pk, **filters), query, model=MODEL, limit=limit)  # type: ignore[arg-type]
    return [item_id for item_id, _ in found]


def exact_ids(ids: list[int], vectors: np.ndarray, query: np.ndarray, limit: int = 10) -> list[int]:
    order = np.argsort(-(vectors @ query), kind="stable")[:limit]
    return [ids[i] for i in order]


def queries(count: int, seed: int = 1) -> np.ndarray:
    """Queries near the data (a stored vector plus noise), so each has true neighbours to find."""
    base = clustered(count, seed=0)
    noise = np.random.default_rng(seed).standard_normal((count, DIMENSION)) / np.sqrt(DIMENSION) / 2
    return unit(base + noise)


def test_it_finds_what_exact_search_finds_on_clustered_vectors(tenant: Tenant) -> None:
    vectors = clustered(3000)
    ids = seed(tenant.team, vectors)
    build(tenant.team)
    assert ann.open_index(key(tenant.team)) is not None
    recalls = []
    for query in queries(30):
        found = engines.in_process_vector(Filters(team_id=tenant.team.pk), query, model=MODEL, limit=10)
        expected = exact_ids(ids, vectors, query)
        recalls.append(len({item_id for item_id, _ in found} & set(expected)) / 10)
        # The scores are exact cosines of the stored vectors, not the index's int8 estimates.
        stored = {item_id: vectors[ids.index(item_id)] for item_id, _ in found}
        assert all(abs(score - float(stored[item_id] @ query)) < 1e-5 for item_id, score in found)
    assert np.mean(recalls) >= 0.95


def test_a_vector_indexed_after_the_build_is_found(tenant: Tenant) -> None:
    seed(tenant.team, clustered(500))
    build(tenant.team)
    query = queries(1)[0]
    [newcomer] = seed(tenant.team, query[None, :], first=500, indexed_at=timezone.now())

    assert search_ids(tenant.team, query)[0] == newcomer
    assert newcomer not in held(tenant.team)  # found as part of the tail


def test_the_tail_is_added_to_the_index_once_it_is_long_enough(tenant: Tenant) -> None:
    seed(tenant.team, clustered(500))
    build(tenant.team)
    newcomers = seed(tenant.team, clustered(60, seed=5), first=500, indexed_at=timezone.now())
    build(tenant.team)

    index = ann.open_index(key(tenant.team))
    assert index is not None and index.size == 560
    assert set(newcomers) <= held(tenant.team)


def test_a_deleted_item_never_comes_back(tenant: Tenant) -> None:
    vectors = clustered(500)
    seed(tenant.team, vectors)
    build(tenant.team)
    query = queries(1)[0]
    best = search_ids(tenant.team, query)[0]

    SearchItem.objects.filter(pk=best).delete()

    assert best not in search_ids(tenant.team, query, limit=50)
    seed(tenant.team, clustered(60, seed=5), first=500, indexed_at=timezone.now())
    build(tenant.team)  # the refresh takes it out of the graph too
    assert best not in held(tenant.team)
    assert best not in search_ids(tenant.team, query, limit=50)


def test_a_re_embedded_item_is_scored_by_its_new_vector(tenant: Tenant) -> None:
    vectors = clustered(500)
    seed(tenant.team, vectors)
    build(tenant.team)
    query = queries(1)[0]
    moved = search_ids(tenant.team, query)[0]
    elsewhere = unit(-query)  # its new text means the opposite

    SearchItem.objects.filter(pk=moved).update(embedding=elsewhere.astype("<f4").tobytes(), indexed_at=timezone.now())

    assert moved not in search_ids(tenant.team, query, limit=50)
    found = engines.in_process_vector(Filters(team_id=tenant.team.pk), elsewhere, model=MODEL, limit=1)
    assert found[0][0] == moved and found[0][1] == pytest.approx(1.0, abs=1e-5)


def test_another_teams_items_never_appear(tenant: Tenant, other_tenant: Tenant) -> None:
    query = queries(1)[0]
    own = seed(tenant.team, clustered(300))
    seed(other_tenant.team, np.vstack([np.tile(query, (20, 1)), clustered(300)]), first=1000)
    build(tenant.team)
    build(other_tenant.team)

    found = search_ids(tenant.team, query, limit=50)

    assert len(found) == 50 and set(found) <= set(own)


def test_the_oldest_item_is_found_with_and_without_the_index(tenant: Tenant) -> None:
    # The exact engine once compared only a team's newest vectors (100,000 of them): now every one.
    query = queries(1)[0]
    seed(tenant.team, clustered(400))
    [oldest] = seed(tenant.team, query[None, :], first=400, occurred_at=timezone.now() - timedelta(days=3650))

    assert search_ids(tenant.team, query)[0] == oldest  # no index yet: exact cosine
    build(tenant.team)
    assert ann.open_index(key(tenant.team)) is not None
    assert search_ids(tenant.team, query)[0] == oldest


def test_a_corrupt_or_missing_index_falls_back_to_exact_search_and_is_rebuilt(tenant: Tenant, ann_dir: Path) -> None:
    vectors = clustered(500)
    ids = seed(tenant.team, vectors)
    build(tenant.team)
    query = queries(1)[0]
    manifest = ann.read_manifest(key(tenant.team))
    assert manifest is not None
    (ann.index_directory(key(tenant.team)) / manifest["generation"]).write_bytes(b"not an index" * 100)
    ann.forget_opened()

    assert ann.open_index(key(tenant.team)) is None
    assert search_ids(tenant.team, query) == exact_ids(ids, vectors, query)
    build(tenant.team)
    assert ann.open_index(key(tenant.team)) is not None
    assert search_ids(tenant.team, query) == exact_ids(ids, vectors, query)

    for path in ann_dir.rglob("*"):
        if path.is_file():
            path.unlink()
    assert ann.open_index(key(tenant.team)) is None
    assert search_ids(tenant.team, query) == exact_ids(ids, vectors, query)
    build(tenant.team)
    assert ann.open_index(key(tenant.team)) is not None


def test_filters_still_hold(tenant: Tenant) -> None:
    query = queries(1)[0]
    first, second = managed_session(), managed_session()
    now = timezone.now()
    in_first = seed(tenant.team, clustered(300, seed=1), session_id=first.pk)
    in_second = seed(tenant.team, clustered(300, seed=2), first=300, session_id=second.pk)
    facts = seed(tenant.team, clustered(30, seed=3), first=600, kind=SearchKind.FACT)
    last_week = seed(tenant.team, clustered(40, seed=4), first=700, occurred_at=now - timedelta(days=7))
    build(tenant.team)

    assert set(search_ids(tenant.team, query, limit=40, session_id=second.pk)) <= set(in_second)
    assert set(search_ids(tenant.team, query, limit=40, session_id=first.pk)) <= set(in_first)
    assert sorted(search_ids(tenant.team, query, limit=40, kinds=(SearchKind.FACT,))) == sorted(facts)
    window = {"since": now - timedelta(days=8), "until": now - timedelta(days=6)}
    assert sorted(search_ids(tenant.team, query, limit=40, **window)) == sorted(last_week)


def test_a_build_yields_between_steps(tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ann, "ADD_BATCH", 200)
    seed(tenant.team, clustered(500))

    # Out of time at once: each call takes one step and keeps its progress for the next run.
    steps = 1
    while ann.maintain(key=key(tenant.team), until=time.monotonic()):
        assert ann.open_index(key(tenant.team)) is None  # nothing half-built is ever searched
        steps += 1

    assert steps == 3
    index = ann.open_index(key(tenant.team))
    assert index is not None and index.size == 500


@pytest.mark.usefixtures("job_outbox")
def test_the_index_run_builds_the_team_index_where_pgvector_does_not_serve(tenant: Tenant) -> None:
    session = managed_session()
    items = SearchItem.objects.bulk_create(
        SearchItem(
            team=tenant.team,
            kind=SearchKind.MESSAGE,
            source_key=str(n),
            session_id=session.pk,
            text=f"deploy note number {n} about the billing service",
            text_hash=f"{n:032d}",
        )
        for n in range(150)
    )
    search.index_request(team_id=tenant.team.pk, trigger=IndexRun.Trigger.REINDEX)
    run = IndexRun.objects.get(team_id=tenant.team.pk, status=IndexRun.Status.PENDING)

    assert search.search_index_execute(run_id=str(run.pk)) == "done"

    model_key = ann.IndexKey(team_id=tenant.team.pk, model=FakeEmbeddings.model, dimension=FakeEmbeddings.dimension)
    index = ann.open_index(model_key)
    if schema.pgvector_installed():  # the pgvector column and its HNSW index serve: no file is written
        assert index is None
    else:
        assert index is not None and index.size == len(items)
        assert engines.vector_engine_name() == "faiss-ivf"
