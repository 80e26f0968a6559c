"""The one search function: what recall returns for a query, for the API, the context, the
dashboard and the client alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from django.conf import settings
from django.utils import timezone

from memory_app.search import engines, fusion
from memory_app.search.embeddings import get_embedder
from memory_app.search.embeddings.base import EmbeddingError
from memory_app.search.engines import Filters
from memory_app.search.models import SearchItem

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
    rrf_score: float
    lexical_weight: float
    recency_factor: float
    kind_weight: float
    fused_score: float
    live: bool


@dataclass(frozen=True)
class Hit:
    item: SearchItem
    scored: fusion.Scored
    snippet: str

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
        ranked = self.scored.ranked
        return {
            "lexical_rank": ranked.lexical_rank,
            "lexical_score": ranked.lexical_score,
            "vector_rank": ranked.vector_rank,
            "vector_similarity": ranked.vector_similarity,
            "rrf_score": fusion.rrf(ranked, lexical_weight=self.scored.lexical_weight),
            "lexical_weight": self.scored.lexical_weight,
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
    """The team's best `limit` items for `query`: both engines' candidates, fused (see fusion)."""
    terms = fusion.query_terms(query)
    wanted = max(limit * CANDIDATES_PER_RESULT, MIN_CANDIDATES)
    lexical = engines.lexical(filters, terms, wanted)
    embedder = get_embedder()
    vector_error = ""
    try:
        query_vector = embedder.embed([query], purpose="query")[0]
        vector = engines.vector(filters, query_vector, model=embedder.model, limit=wanted)
    except EmbeddingError as exc:
        # The words still find what they can: a search is never an error because a model server is down.
        vector, vector_error = [], str(exc)
    # Found by meaning alone, an item must be close enough to count: without a floor every search
    # (and every recall) returns `limit` items, however unrelated.
    found_by_words = {item_id for item_id, _ in lexical}
    floor = settings.SEARCH_VECTOR_MIN_SIMILARITY
    vector = [(item_id, sim) for item_id, sim in vector if sim >= floor or item_id in found_by_words]
    hits = _hits(fusion.fuse(lexical, vector), terms, limit)
    pending = SearchItem.objects.filter(team_id=filters.team_id, state=SearchItem.State.PENDING).count()
    return SearchResult(
        query=query,
        hits=hits,
        lexical_engine=engines.lexical_engine_name(),
        vector_engine=engines.vector_engine_name(),
        model=embedder.model,
        pending=pending,
        vector_error=vector_error,
        terms=terms,
    )


def _hits(ranked: list[fusion.Ranked], terms: list[str], limit: int) -> list[Hit]:
    if not ranked:
        return []
    fields = (
        "id kind source_key chunk session_id message_id compaction_run_id fact_id record_entry_id shared_memory_id "
        "attachment_id agent role seq text occurred_at invalidated_at valid_from state"
    ).split()
    items = {item.pk: item for item in SearchItem.objects.filter(pk__in=[r.item_id for r in ranked]).only(*fields)}
    now = timezone.now()
    scored = [
        fusion.score(
            r,
            kind=items[r.item_id].kind,
            occurred_at=items[r.item_id].occurred_at,
            live=items[r.item_id].invalidated_at is None,
            now=now,
            half_life_days=settings.SEARCH_RECENCY_HALF_LIFE_DAYS,
            lexical_weight=fusion.coverage(items[r.item_id].text, terms) ** 2,
        )
        for r in ranked
        if r.item_id in items  # deleted between the engines' read and this one
    ]
    best = fusion.order(scored)[:limit]
    return [
        Hit(item=items[s.ranked.item_id], scored=s, snippet=fusion.snippet(items[s.ranked.item_id].text, terms))
        for s in best
    ]
