"""The one search function: what recall returns for a query, for the API, the context, the
dashboard and the client alike."""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, TypedDict

import numpy as np
from django.conf import settings
from django.utils import timezone

from memory_app.search import documents, engines, fusion, temporal
from memory_app.search.embeddings import get_embedder
from memory_app.search.embeddings.base import EmbeddingError
from memory_app.search.engines import Filters
from memory_app.search.models import SearchItem, pending_items

# Each engine proposes this many candidates per result asked for (and at least MIN_CANDIDATES):
# fusion needs more than the final list to find the items both engines rank well.
CANDIDATES_PER_RESULT = 4
MIN_CANDIDATES = 40


class HitSource(TypedDict):
    """Where a hit comes from: the ids of its source, of which the kind's own are set."""

    session: str | None
    seq: int | None
    message_id: str | None
    run_id: str | None
    fact_id: str | None
    record_entry_id: int | None
    experience_id: int | None
    shared_memory_id: int | None
    attachment_id: int | None
    chunk: int  # which piece of its source
    agent: str
    role: str


class HitExplain(TypedDict):
    """How a hit was ranked: each engine's place for it and the factors of its fused score."""

    lexical_rank: int | None
    lexical_score: float | None
    vector_rank: int | None
    vector_similarity: float | None
    lexical_share: float
    coverage: float
    best_coverage: float
    similarity_gap: float
    substance: float
    speaker_named: bool
    in_time: bool
    holds_identifiers: bool
    relevance: float
    recency_factor: float
    kind_weight: float
    fused_score: float
    live: bool


@dataclass(frozen=True)
class Hit:
    item: SearchItem
    scored: fusion.Scored
    snippet: str  # set on the hits a search returns (search()), "" on the other candidates

    @property
    def source_id(self) -> str:
        return self.item.source_key

    def source(self) -> HitSource:
        item = self.item
        return {
            "session": str(item.session_id) if item.session_id else None,
            "seq": item.seq,
            "message_id": str(item.message_id) if item.message_id else None,
            "run_id": str(item.compaction_run_id) if item.compaction_run_id else None,
            "fact_id": str(item.fact_id) if item.fact_id else None,
            "record_entry_id": item.record_entry_id,
            "experience_id": int(item.source_key) if item.kind == "experience" else None,
            "shared_memory_id": item.shared_memory_id,
            "attachment_id": item.attachment_id,
            "chunk": item.chunk,
            "agent": item.agent,
            "role": item.role,
        }

    def explain(self) -> HitExplain:
        ranked, features = self.scored.ranked, self.scored.features
        return {
            "lexical_rank": ranked.lexical_rank,
            "lexical_score": ranked.lexical_score,
            "vector_rank": ranked.vector_rank,
            "vector_similarity": features.similarity if features.similarity else ranked.vector_similarity,
            "lexical_share": features.lexical_share,
            "coverage": features.coverage,
            "best_coverage": features.best_coverage,
            "similarity_gap": features.similarity_gap,
            "substance": features.substance,
            "speaker_named": features.speaker_named,
            "in_time": features.in_time,
            "holds_identifiers": features.holds_identifiers,
            "relevance": self.scored.relevance,
            "recency_factor": self.scored.recency_factor,
            "kind_weight": self.scored.kind_weight,
            "fused_score": self.scored.fused_score,
            "live": self.scored.live,
        }


@dataclass(frozen=True)
class SearchResult:
    query: str
    hits: list[Hit]
    lexical_engine: str
    vector_engine: str
    model: str
    pending: int
    vector_error: str = ""
    terms: list[str] = field(default_factory=list)
    time_window: temporal.TimeWindow | None = None  # the time the query names, if any


def filters_from(data: Mapping[str, Any], *, team_id: int) -> Filters:
    """A search request's validated fields (SearchInputSerializer: wire names, `from`/`to`) as the
    filters of the team's search; the API and the search page read requests the same way."""
    return Filters(
        team_id=team_id,
        kinds=tuple(data.get("kinds") or ()),
        session_id=data.get("session"),
        agent=data.get("agent"),
        role=data.get("role"),
        since=data.get("from"),
        until=data.get("to"),
        as_of=data.get("as_of"),
        include_invalidated=bool(data.get("include_invalidated")),
    )


def search(*, filters: Filters, query: str, limit: int = 10) -> SearchResult:
    """The team's best `limit` items for `query`: both engines' candidates, scored (see fusion).

    A time the query names ("in March 2023") is not matched as words or meaning: it becomes a
    feature of each candidate (said within that time or not), and the rest of the query is searched."""
    found = _find(filters, query, limit)
    pending = pending_items(filters.team_id).count()
    # Snippets for the hits returned only: a search weighs 4 candidates a result (~1 ms of regex each).
    hits = [
        replace(hit, snippet=fusion.snippet(hit.item.text, found.context.terms)) for hit in _scored(found, keep=limit)
    ]
    return SearchResult(
        query=query,
        hits=hits,
        lexical_engine=engines.lexical_engine_name(),
        vector_engine=engines.vector_engine_name(),
        model=found.context.model,
        pending=pending,
        vector_error=found.vector_error,
        terms=found.context.terms,
        time_window=found.context.window,
    )


def scored_candidates(*, filters: Filters, query: str, limit: int = 10) -> list[Hit]:
    """Every candidate a search for `limit` results weighs, scored and best first: what the
    relevance model's weights are fitted on (bench/recall_fit.py)."""
    return _scored(_find(filters, query, limit))


@dataclass(frozen=True)
class _QueryContext:
    query: str
    terms: list[str]
    vector: np.ndarray | None
    model: str
    window: temporal.TimeWindow | None

    @property
    def identifiers(self) -> list[str]:
        return fusion.identifiers(self.terms)


@dataclass(frozen=True)
class _Found:
    ranked: list[fusion.Ranked]
    context: _QueryContext
    vector_error: str


def _find(filters: Filters, query: str, limit: int) -> _Found:
    """Both engines' candidates for the query (and, for a time it names, within that time)."""
    window = _time_window(filters, query)
    asked = _without_time(query, window)
    terms = fusion.query_terms(asked)
    wanted = max(limit * CANDIDATES_PER_RESULT, MIN_CANDIDATES)
    # Within the time named, the engines are asked again: what was said then may rank far down
    # the whole team's lists ("what did Rosa do in March 2023?" matches every turn of Rosa's).
    scopes = [filters] if window is None else [filters, _within(filters, window)]
    embedder = get_embedder()
    # The query's vector is computed while its words are searched: the model runs outside Python's
    # lock (onnxruntime, or an embedding server's reply awaited), the lexical engine mostly waits
    # for its database, so on two cores a search takes the longer of the two, not their sum.
    embedding = _embedding_threads().submit(embedder.embed, [asked], purpose="query")
    lexical = _merged([engines.lexical(scope, terms, wanted) for scope in scopes])
    vector_error = ""
    query_vector: np.ndarray | None = None
    try:
        query_vector = np.asarray(embedding.result()[0], dtype="<f4")
        vector = _merged([engines.vector(scope, query_vector, model=embedder.model, limit=wanted) for scope in scopes])
    except EmbeddingError as exc:
        # The words still find what they can: a search is never an error because a model server is down.
        vector, vector_error = [], str(exc)
    # Found by meaning alone, an item must be close enough to count: without a floor every search
    # (and every recall) returns `limit` items, however unrelated.
    found_by_words = {item_id for item_id, _ in lexical}
    floor = settings.SEARCH_VECTOR_MIN_SIMILARITY
    vector = [(item_id, sim) for item_id, sim in vector if sim >= floor or item_id in found_by_words]
    context = _QueryContext(query=query, terms=terms, vector=query_vector, model=embedder.model, window=window)
    return _Found(ranked=fusion.fuse(lexical, vector), context=context, vector_error=vector_error)


_embedding_pool: tuple[int, ThreadPoolExecutor] | None = None


def _embedding_threads() -> ThreadPoolExecutor:
    """This process's threads for query embeddings (made again in a forked child: a pool's
    threads do not cross a fork)."""
    global _embedding_pool
    if _embedding_pool is None or _embedding_pool[0] != os.getpid():
        _embedding_pool = (os.getpid(), ThreadPoolExecutor(max_workers=4, thread_name_prefix="query-embedding"))
    return _embedding_pool[1]


def _time_window(filters: Filters, query: str) -> temporal.TimeWindow | None:
    """The time the query names, resolved against the latest time said in what is searched (so an
    imported history from 2023 reads "last July" as July 2023); only asked when the query names one."""
    if temporal.resolve_time(query, reference=timezone.now()) is None:
        return None
    latest = engines.latest_time(filters)
    return temporal.resolve_time(query, reference=latest or timezone.now())


def _within(filters: Filters, window: temporal.TimeWindow) -> Filters:
    """The filters narrowed to the window (inside any from/to the request gave)."""
    since = window.start if filters.since is None else max(filters.since, window.start)
    until = window.end - timedelta(microseconds=1)  # the filter's end is inclusive, the window's not
    return replace(filters, since=since, until=until if filters.until is None else min(filters.until, until))


def _merged(lists: list[list[tuple[int, float]]]) -> list[tuple[int, float]]:
    """Several (item id, score) lists of one engine as one, best first (an item once, at its best)."""
    best: dict[int, float] = {}
    for found in lists:
        for item_id, value in found:
            best[item_id] = max(value, best.get(item_id, value))
    return sorted(best.items(), key=lambda pair: (-pair[1], -pair[0]))


def _without_time(query: str, window: temporal.TimeWindow | None) -> str:
    """The query without the words of the time it names (kept whole if nothing else is left)."""
    if window is None:
        return query
    rest = " ".join(query.replace(window.expression, " ").split())
    return rest if fusion.query_terms(rest) else query


_ITEM_FIELDS = (
    "id kind source_key chunk session_id message_id compaction_run_id fact_id record_entry_id shared_memory_id "
    "attachment_id agent role seq text occurred_at invalidated_at valid_from state embedding_model embedding_dim"
).split()
# In the model's order: SearchItem.from_db takes a row's values in that order.
_ITEM_COLUMNS = [field.attname for field in SearchItem._meta.concrete_fields if field.attname in _ITEM_FIELDS]
_ROW = {name: place for place, name in enumerate(_ITEM_COLUMNS)}


def _scored(found: _Found, keep: int | None = None) -> list[Hit]:
    """The candidates as hits, best first (see fusion): the first `keep` of them (all: None).
    Candidates are scored from their rows; an item is made only of each hit kept (a search weighs
    4 candidates a result, and making an item costs ~30 us)."""
    ranked, context = found.ranked, found.context
    if not ranked:
        return []
    # Each candidate's row and stored vector, in one read.
    read = engines.rows_of(
        SearchItem.objects.filter(pk__in=[r.item_id for r in ranked]).values_list(*_ITEM_COLUMNS, "embedding")
    )
    rows = {row[_ROW["id"]]: row for row in read}  # the item's columns, then its vector
    ranked = [r for r in ranked if r.item_id in rows]  # deleted between the engines' read and this one
    similarity = _similarities(ranked, rows, context)
    best_similarity = max(similarity.values(), default=0.0)
    best_lexical = max((r.lexical_score or 0.0 for r in ranked), default=0.0)
    words = {r.item_id: fusion.Words.of(rows[r.item_id][_ROW["text"]]) for r in ranked}
    coverage = {
        r.item_id: words[r.item_id].coverage(context.terms) if r.lexical_rank is not None else 0.0 for r in ranked
    }
    best_coverage = max(coverage.values(), default=0.0)
    now = timezone.now()
    identifiers = context.identifiers
    scored = []
    for r in ranked:
        row = rows[r.item_id]
        kind, agent, occurred_at = row[_ROW["kind"]], row[_ROW["agent"]], row[_ROW["occurred_at"]]
        # The speaker's label ("Rosa: ...") is not the item's own words: they are read without it.
        own_text = documents.without_speaker_label(row[_ROW["text"]], agent)
        own_words = words[r.item_id] if own_text is row[_ROW["text"]] else fusion.Words.of(own_text)
        features = fusion.Features(
            lexical_share=(r.lexical_score or 0.0) / best_lexical if best_lexical > 0 else 0.0,
            coverage=coverage[r.item_id],
            best_coverage=best_coverage,
            similarity=similarity.get(r.item_id, 0.0),
            similarity_gap=similarity.get(r.item_id, 0.0) - best_similarity,
            substance=own_words.substance(kind=kind),
            speaker_named=fusion.names_speaker(context.query, agent),
            in_time=context.window is not None and context.window.start <= occurred_at < context.window.end,
            holds_identifiers=own_words.holds_all(identifiers),
        )
        scored.append(
            fusion.score(
                r,
                features=features,
                kind=kind,
                occurred_at=occurred_at,
                live=row[_ROW["invalidated_at"]] is None,
                now=now,
                half_life_days=settings.SEARCH_RECENCY_HALF_LIFE_DAYS,
            )
        )
    ordered = fusion.order(scored)
    return [
        Hit(
            item=SearchItem.from_db(SearchItem.objects.db, _ITEM_COLUMNS, rows[s.ranked.item_id][:-1]),
            scored=s,
            snippet="",
        )
        for s in (ordered if keep is None else ordered[:keep])
    ]


def _similarities(
    ranked: list[fusion.Ranked], rows: dict[int, tuple[Any, ...]], context: _QueryContext
) -> dict[int, float]:
    """Every candidate's cosine to the query: the vector engine's, and for those only the words
    found, from their stored vectors (a strong word match is judged by its meaning too; `rows`:
    each candidate's row, its vector last)."""
    similarity = {r.item_id: r.vector_similarity for r in ranked if r.vector_similarity is not None}
    if context.vector is None:
        return similarity
    dimension = int(context.vector.shape[0])
    for r in ranked:
        row = rows[r.item_id]
        blob = row[-1]
        comparable = (row[_ROW["state"]], row[_ROW["embedding_model"]], row[_ROW["embedding_dim"]]) == (
            SearchItem.State.INDEXED,
            context.model,
            dimension,
        )
        if r.vector_similarity is None and comparable and blob:
            similarity[r.item_id] = float(np.frombuffer(bytes(blob), dtype="<f4") @ context.vector)
    return similarity
