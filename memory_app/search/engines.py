"""The two search engines, each returning a team's best candidates for a query as (item id, score)
lists, best first, over the same filtered set of items.

Lexical: PostgreSQL full-text search (the generated tsvector, GIN index, ts_rank_cd) or SQLite
FTS5 (BM25). A query's words are OR-ed: a question shares only some words with its answer.
Vector: pgvector's HNSW index (iterative scans, so a team filter cannot starve the result) when
the database has the extension, else exact cosine in numpy over the filtered items' vectors,
newest SEARCH_EXACT_MAX_ITEMS at most. Only vectors of the configured model are compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import FloatField, Q, QuerySet
from django.db.models.expressions import RawSQL

from memory_app.search import schema
from memory_app.search.models import SearchItem


@dataclass(frozen=True)
class Filters:
    """What a search may return: always one team's items, narrowed by the rest."""

    team_id: int
    kinds: tuple[str, ...] = ()
    session_id: Any = None
    agent: str | None = None
    role: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    as_of: datetime | None = None
    include_invalidated: bool = False


def candidates(filters: Filters) -> QuerySet[SearchItem]:
    items = SearchItem.objects.filter(team_id=filters.team_id)
    if filters.kinds:
        items = items.filter(kind__in=filters.kinds)
    if filters.session_id is not None:
        items = items.filter(session_id=filters.session_id)
    if filters.agent:
        items = items.filter(agent=filters.agent)
    if filters.role:
        items = items.filter(role=filters.role)
    if filters.since is not None:
        items = items.filter(occurred_at__gte=filters.since)
    if filters.until is not None:
        items = items.filter(occurred_at__lte=filters.until)
    if filters.as_of is not None:
        # What was known and live at that moment, whatever happened since.
        moment = filters.as_of
        items = items.filter(occurred_at__lte=moment).filter(Q(valid_from__isnull=True) | Q(valid_from__lte=moment))
        if not filters.include_invalidated:
            items = items.filter(Q(invalidated_at__isnull=True) | Q(invalidated_at__gt=moment))
    elif not filters.include_invalidated:
        items = items.filter(invalidated_at__isnull=True)
    return items


# --- lexical --------------------------------------------------------------------------------------


def lexical_engine_name() -> str:
    return "postgres-fts" if connection.vendor == "postgresql" else "sqlite-fts5"


def lexical(filters: Filters, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
    if not terms:
        return []
    if connection.vendor == "postgresql":
        return _postgres_lexical(filters, terms, limit)
    return _sqlite_lexical(filters, terms, limit)


# PostgreSQL ranks at most this many matching items: each query word brings its newest
# LEXICAL_RANKED_MATCHES // len(terms) matches. ts_rank_cd reads every ranked item's tsvector, so
# ranking all matches grows with the team (the words are OR-ed: a common one matches much of it);
# per word, a rare word's matches all stay in, however many newer items a common word matches.
# Finding the matches still reads each word's matches in the team (a bitmap heap scan, ~1 us each).
LEXICAL_RANKED_MATCHES = 2000


def _postgres_lexical(filters: Filters, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
    # Terms are letters and digits only (fusion.query_terms); the SQL is this module's text and the
    # user's words travel as parameters.
    query = f"to_tsquery('{schema.TS_CONFIG}', %s)"
    where, where_params = _item_conditions(candidates(filters))
    per_word = max(1, LEXICAL_RANKED_MATCHES // len(terms))
    newest = (
        f"(SELECT id FROM {schema.TABLE} WHERE {where} AND search_tsv @@ {query} "  # noqa: S608
        "ORDER BY occurred_at DESC, id DESC LIMIT %s)"
    )
    sql = (
        f"SELECT id, ts_rank_cd(search_tsv, {query}, 32) AS rank FROM {schema.TABLE} "  # noqa: S608
        f"WHERE id IN ({' UNION '.join([newest] * len(terms))}) ORDER BY rank DESC, id DESC LIMIT %s"
    )
    params: list[Any] = [" | ".join(terms)]
    for term in terms:
        params += [*where_params, term, per_word]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, limit])
        return [(int(item_id), float(rank)) for item_id, rank in cursor.fetchall()]


def _sqlite_lexical(filters: Filters, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
    match = " OR ".join(f'"{term}"' for term in terms)
    where, params = _item_conditions(candidates(filters))
    # CROSS JOIN keeps the full-text table outermost: FTS5 runs the MATCH once and each hit is
    # looked up by primary key. Left to the planner, it runs the MATCH once per item of the team.
    sql = (
        f"SELECT {schema.FTS_TABLE}.rowid, -bm25({schema.FTS_TABLE}) AS score "  # noqa: S608
        f"FROM {schema.FTS_TABLE} CROSS JOIN {schema.TABLE} ON {schema.TABLE}.id = {schema.FTS_TABLE}.rowid "
        f"WHERE {schema.FTS_TABLE} MATCH %s AND {where} ORDER BY score DESC, {schema.FTS_TABLE}.rowid DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [match, *params, limit])
        return [(int(item_id), float(value)) for item_id, value in cursor.fetchall()]


def _item_conditions(items: QuerySet[SearchItem]) -> tuple[str, list[Any]]:
    """The WHERE clause of `items` (its values as parameters), on the item table's own columns,
    to write into the engines' hand-written SQL.

    A filter that joins another table cannot be inlined: it is kept as an `id IN (...)` subquery
    (which SQLite reads into a list once per search: still one MATCH).
    """
    query = items.query
    # A filter on team_id registers the team table's join, unused (its refcount is 0): ignore it.
    joined = [alias for alias in query.alias_map if alias != schema.TABLE and query.alias_refcount[alias]]
    if not joined:
        where, params = query.get_compiler(connection=connection).compile(query.where)
        if where:
            return f"({where})", list(params)
    inner, inner_params = items.values("id").query.sql_with_params()
    return f"{schema.TABLE}.id IN ({inner})", list(inner_params)


# --- vector ---------------------------------------------------------------------------------------


def vector_engine_name() -> str:
    return "pgvector" if schema.pgvector_installed() else "exact-cosine"


def vector(filters: Filters, query_vector: np.ndarray, *, model: str, limit: int) -> list[tuple[int, float]]:
    dimension = int(query_vector.shape[0])
    items = candidates(filters).filter(embedding_model=model, embedding_dim=dimension, state=SearchItem.State.INDEXED)
    if schema.pgvector_installed():
        return _pgvector(items, query_vector, dimension, limit)
    return _exact_cosine(items, query_vector, dimension, limit)


def _pgvector(
    items: QuerySet[SearchItem], query_vector: np.ndarray, dimension: int, limit: int
) -> list[tuple[int, float]]:
    literal = "[" + ",".join(f"{value:.7g}" for value in query_vector.tolist()) + "]"
    # The cast matches the per-dimension index expression, so the planner can use the index.
    distance = RawSQL(  # noqa: S611 (the vector is a parameter; the dimension an int)
        f"(embedding_vec::vector({dimension})) <=> %s::vector({dimension})", [literal], output_field=FloatField()
    )
    with transaction.atomic(), connection.cursor() as cursor:
        # pgvector 0.8: keep scanning the index until `limit` rows pass the team's filters.
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute("SET LOCAL hnsw.ef_search = %s", [max(40, limit * 2)])
        rows = list(items.annotate(distance=distance).order_by("distance").values_list("id", "distance")[:limit])
    # relaxed_order may return near-ties slightly out of order: sort what came back.
    return sorted(((item_id, 1.0 - float(d)) for item_id, d in rows), key=lambda row: -row[1])


def _exact_cosine(
    items: QuerySet[SearchItem], query_vector: np.ndarray, dimension: int, limit: int
) -> list[tuple[int, float]]:
    rows = list(items.order_by("-occurred_at").values_list("id", "embedding")[: settings.SEARCH_EXACT_MAX_ITEMS])
    if not rows:
        return []
    ids = np.fromiter((item_id for item_id, _ in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(bytes(blob or b"") for _, blob in rows), dtype="<f4").reshape(len(rows), dimension)
    similarities = matrix @ query_vector.astype("<f4")
    take = min(limit, len(rows))
    best = np.argpartition(-similarities, take - 1)[:take]
    best = best[np.argsort(-similarities[best], kind="stable")]
    return [(int(ids[i]), float(similarities[i])) for i in best]
