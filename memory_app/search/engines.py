"""The two search engines, each returning a team's best candidates for a query as (item id, score)
lists, best first, over the same filtered set of items.

Lexical: Okapi BM25 over PostgreSQL full-text search (the generated tsvector, GIN index) or SQLite
FTS5. A query's words are OR-ed: a question shares only some words with its answer. At most
LEXICAL_RANKED_MATCHES matching items are ranked, the newest, with every match of a rare word.
Vector: pgvector's HNSW index (iterative scans, so a team filter cannot starve the result) when
the database has the extension; else the team's in-process IVF index (ann.py) for candidates,
read back through the filters and scored exactly, plus the vectors indexed since it was brought
up to date; exact cosine in numpy over every filtered vector while a team has no index. Only
vectors of the configured model are compared.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import FloatField, Q, QuerySet
from django.db.models.expressions import RawSQL

from memory_app.search import ann, schema
from memory_app.search.models import SearchItem, SearchKind


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


# How much a word of an item's context (its speaker, the turn it answers) counts against a word of
# its own text: enough that a reply is found by its question's words, never above a turn that holds
# them itself. Fitted with the fusion on the development set (docs/recall.md).
CONTEXT_WEIGHT = 0.35
# Okapi BM25's usual constants: k1 saturates a word's repeats, b normalises by length. SQLite's FTS5
# uses the same values, so both databases rank words alike.
BM25_K1 = 1.2
BM25_B = 0.75
# Both engines rank at most this many matching items, so ranking costs the same in any team (the
# words are OR-ed: a common one matches much of it), while a rare word's matches all stay in.
# PostgreSQL: each query word brings its newest LEXICAL_RANKED_MATCHES // len(terms) matches;
# finding them still reads each word's matches in the team (a bitmap heap scan, a few us each).
# SQLite: the newest LEXICAL_RANKED_MATCHES matches of any word, plus the rare words' older ones;
# FTS5 stops reading at the bound.
LEXICAL_RANKED_MATCHES = 2000
# A team's item count and mean item length (BM25's N and avgdl) change slowly: asked once a while.
TEAM_STATISTICS_TTL_SECONDS = 300.0
_team_statistics: dict[tuple[str, int], tuple[int, float, float]] = {}  # (db, team) -> (N, avgdl, when)


def _postgres_lexical(filters: Filters, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """Okapi BM25 over the team's items (as SQLite's FTS5 computes it), context words weighted
    CONTEXT_WEIGHT: PostgreSQL's own ts_rank_cd rewards words standing close together, which
    ranks a question's answer below texts that merely repeat one of its words. One statement:
    each word's newest matches and its number of matches (its idf) come from the same scan."""
    lexemes = _postgres_lexemes(terms)
    if not lexemes:
        return []
    count, average_length = _postgres_team_statistics(filters.team_id)
    where, where_params = _item_conditions(candidates(filters))
    per_word = max(1, LEXICAL_RANKED_MATCHES // len(lexemes))
    # Lexemes are what to_tsvector made of the user's words, matched as they are (quoted, not
    # stemmed again); the SQL is this module's text and every value travels as a parameter.
    # A word's document frequency n is counted among the items searched (the window count, before
    # the LIMIT); idf = ln(1 + (N - n + 0.5) / (n + 0.5)) with N the team's items. tf: a word's
    # places in the item, a context place (weight D) counting CONTEXT_WEIGHT; the item's length is
    # its number of distinct words (the tsvector's length: no need to unnest it). The arithmetic
    # is float8 (PostgreSQL's numeric, which the literals would make of it, is several times slower).
    sql = (
        "WITH matches AS (SELECT w.lexeme, m.id, m.n FROM unnest(%s::text[], %s::tsquery[]) AS w(lexeme, q) "  # noqa: S608
        f"CROSS JOIN LATERAL (SELECT id, (count(*) OVER ())::float8 AS n FROM {schema.TABLE} "
        f"WHERE {where} AND search_tsv @@ w.q ORDER BY occurred_at DESC, id DESC LIMIT %s) AS m), "
        "weights AS (SELECT DISTINCT lexeme, ln(1 + (greatest(%s::float8, n) - n + 0.5) / (n + 0.5)) AS idf "
        "FROM matches) "
        "SELECT c.id, SUM(w.idf * u.tf * %s / (u.tf + %s * (1 - %s + %s * length(c.search_tsv) / %s))) AS score "
        f"FROM (SELECT DISTINCT id FROM matches) AS found JOIN {schema.TABLE} c ON c.id = found.id, "
        "LATERAL (SELECT lexeme, cardinality(weights) - %s * cardinality(array_positions(weights, 'D')) AS tf "
        "FROM unnest(c.search_tsv) WHERE lexeme = ANY(%s::text[])) u JOIN weights w ON w.lexeme = u.lexeme "
        "GROUP BY c.id ORDER BY score DESC, c.id DESC LIMIT %s"
    )
    params: list[Any] = [
        list(lexemes),
        [_tsquery_literal(lexeme) for lexeme in lexemes],
        *where_params,
        per_word,
        count,
        BM25_K1 + 1.0,
        BM25_K1,
        BM25_B,
        BM25_B,
        max(average_length, 1.0),
        1.0 - CONTEXT_WEIGHT,
        list(lexemes),
        limit,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(int(item_id), float(score)) for item_id, score in cursor.fetchall()]


def _postgres_lexemes(terms: Sequence[str]) -> list[str]:
    """The query's words as the full-text configuration stems them (its stopwords dropped), each once."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('{schema.TS_CONFIG}', %s)))",
            [" ".join(terms)],
        )
        found = {row[0] for row in cursor.fetchall()}
    return sorted(found)


def _postgres_team_statistics(team_id: int) -> tuple[int, float]:
    key = (str(connection.settings_dict["NAME"]), team_id)
    known = _team_statistics.get(key)
    if known is not None and time.monotonic() - known[2] < TEAM_STATISTICS_TTL_SECONDS:
        return known[0], known[1]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), coalesce(avg(length(search_tsv)), 1) FROM {schema.TABLE} WHERE team_id = %s",  # noqa: S608
            [team_id],
        )
        count, average = cursor.fetchone()
    _team_statistics[key] = (int(count), float(average), time.monotonic())
    return int(count), float(average)


def _tsquery_literal(lexeme: str) -> str:
    """A lexeme as a tsquery operand, quoted (it came from to_tsvector: it may hold any character)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _sqlite_lexical(filters: Filters, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """FTS5's BM25 (column weights: text 1, context CONTEXT_WEIGHT) over the newest
    LEXICAL_RANKED_MATCHES filtered items matching any word, plus, when there were more, the
    older matches of the query's rare words (those matching at most their share of that bound):
    a rare word's matches all stay in, however many newer items a common word matches."""
    where, params = _item_conditions(candidates(filters))
    newest, oldest_ranked = _sqlite_ranked(terms, filters.team_id, where, params, limit, before=None)
    if oldest_ranked is None:
        return newest
    rare = _sqlite_rare_terms(terms, max(1, LEXICAL_RANKED_MATCHES // len(terms)))
    if not rare:
        return newest
    # Their older items are scored by the rare words alone (with the same idf as above): a common
    # word would add at most its small idf to them.
    older, _ = _sqlite_ranked(rare, filters.team_id, where, params, limit, before=oldest_ranked)
    return sorted([*newest, *older], key=lambda pair: (-pair[1], -pair[0]))[:limit]


def _sqlite_ranked(
    terms: Sequence[str], team_id: int, where: str, params: list[Any], limit: int, *, before: int | None
) -> tuple[list[tuple[int, float]], int | None]:
    """The best `limit` of the newest LEXICAL_RANKED_MATCHES filtered items (with an id below
    `before`, if given) matching any of `terms`, and the oldest id ranked when there may be more
    (None when every match was ranked)."""
    fts, table = schema.FTS_TABLE, schema.TABLE
    older = f" AND {fts}.rowid < %s" if before is not None else ""
    # The full-text table drives (CROSS JOIN), newest first: FTS5 walks its doclists backwards by
    # rowid and stops after the bound, so bm25() (~1.3 us an item) and the filters run on the
    # ranked items only. Each hit's filters are read from the narrow lookup index, not the row.
    # The full-text table holds every team's items: FTS5 reads only those between the team's first
    # and last id (two seeks in the team index), so a small team does not walk a large one's matches.
    team_span = (
        f" AND {fts}.rowid >= (SELECT min(id) FROM {table} WHERE team_id = %s)"  # noqa: S608
        f" AND {fts}.rowid <= (SELECT max(id) FROM {table} WHERE team_id = %s)"
    )
    sql = (
        "SELECT id, score, count(*) OVER (), min(id) OVER () FROM ("  # noqa: S608
        f"SELECT {fts}.rowid AS id, -bm25({fts}, 1.0, %s) AS score FROM {fts} "
        f"CROSS JOIN {table} INDEXED BY {schema.LEXICAL_LOOKUP_INDEX} ON {table}.id = {fts}.rowid "
        f"WHERE {fts} MATCH %s{team_span} AND {where}{older} ORDER BY {fts}.rowid DESC LIMIT %s"
        ") ORDER BY score DESC, id DESC LIMIT %s"
    )
    bound = [before] if before is not None else []
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [CONTEXT_WEIGHT, _fts_match(terms), team_id, team_id, *params, *bound, LEXICAL_RANKED_MATCHES, limit],
        )
        rows = cursor.fetchall()
    if not rows or rows[0][2] < LEXICAL_RANKED_MATCHES:
        return [(int(item_id), float(score)) for item_id, score, _, _ in rows], None
    return [(int(item_id), float(score)) for item_id, score, _, _ in rows], int(rows[0][3])


def _sqlite_rare_terms(terms: Sequence[str], most: int) -> list[str]:
    """The terms matching at most `most` items of the whole full-text table: all their matches
    can be ranked. Counted from FTS5's doclists alone, and only up to `most` + 1."""
    counts = " UNION ALL ".join(
        f"SELECT %s, (SELECT count(*) FROM (SELECT 1 FROM {schema.FTS_TABLE} "  # noqa: S608
        f"WHERE {schema.FTS_TABLE} MATCH %s LIMIT %s))"
        for _ in terms
    )
    with connection.cursor() as cursor:
        cursor.execute(counts, [value for term in terms for value in (term, _fts_match([term]), most + 1)])
        return [term for term, count in cursor.fetchall() if count <= most]


def _fts_match(terms: Sequence[str]) -> str:
    """An FTS5 query matching any of the terms (each quoted: a word never reads as an operator)."""
    return " OR ".join(f'"{term}"' for term in terms)


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
    return "pgvector" if schema.pgvector_installed() else "faiss-ivf"


def vector(filters: Filters, query_vector: np.ndarray, *, model: str, limit: int) -> list[tuple[int, float]]:
    if schema.pgvector_installed():
        dimension = int(query_vector.shape[0])
        return _pgvector(_vectors(filters, model, dimension), query_vector, dimension, limit)
    return in_process_vector(filters, query_vector, model=model, limit=limit)


def _vectors(filters: Filters, model: str, dimension: int) -> QuerySet[SearchItem]:
    """The filtered items that have a vector of this model and dimension."""
    return candidates(filters).filter(embedding_model=model, embedding_dim=dimension, state=SearchItem.State.INDEXED)


def in_process_vector(filters: Filters, query_vector: np.ndarray, *, model: str, limit: int) -> list[tuple[int, float]]:
    """The vector engine of a database without pgvector (it reads only the item table, so tests
    run it on one with pgvector too): the team's in-process index, else exact cosine."""
    dimension = int(query_vector.shape[0])
    items = _vectors(filters, model, dimension)
    index = ann.open_index(ann.IndexKey(team_id=filters.team_id, model=model, dimension=dimension))
    if index is None:  # a team too small for one (or its first build is under way)
        return _exact_cosine(items, query_vector, dimension, limit)
    return _approximate(items, index, query_vector, dimension, limit)


# pgvector's HNSW candidate list (hnsw.ef_search). Recall@10 against exact cosine at the search
# bench's largest team (20,000 of 103,040 items, scale 0.1): 0.79 at pgvector's default of 40, 0.95
# at 100, 0.98 at 150 for about 2 ms more (docs/testing.md). At least twice the limit, so the 40
# candidates of a search keep the same margin.
HNSW_EF_SEARCH = 150


def set_pgvector_scan(cursor: CursorWrapper, limit: int) -> None:
    """How this transaction scans the HNSW index (SET LOCAL; the search bench's EXPLAIN sets the
    same): pgvector 0.8's iterative scan, which keeps searching the graph until `limit` rows pass
    the team's filters, and the candidate list."""
    cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    cursor.execute("SET LOCAL hnsw.ef_search = %s", [max(HNSW_EF_SEARCH, limit * 2)])


def _pgvector(
    items: QuerySet[SearchItem], query_vector: np.ndarray, dimension: int, limit: int
) -> list[tuple[int, float]]:
    literal = "[" + ",".join(f"{value:.7g}" for value in query_vector.tolist()) + "]"
    # The cast matches the per-dimension index expression, so the planner can use the index.
    distance = RawSQL(  # noqa: S611 (the vector is a parameter; the dimension an int)
        f"(embedding_vec::vector({dimension})) <=> %s::vector({dimension})", [literal], output_field=FloatField()
    )
    with transaction.atomic(), connection.cursor() as cursor:
        set_pgvector_scan(cursor, limit)
        rows = list(items.annotate(distance=distance).order_by("distance").values_list("id", "distance")[:limit])
    # relaxed_order may return near-ties slightly out of order: sort what came back.
    return sorted(((item_id, 1.0 - float(d)) for item_id, d in rows), key=lambda row: -row[1])


# The in-process index is asked for this many times the candidates wanted (at least
# ANN_MIN_CANDIDATES): they are read back through the filters, which drop some, and re-scored
# exactly, so the ones that rank first by exact cosine are kept. Recall@10 against exact at the
# bench's 200k team: docs/recall.md.
ANN_OVERSAMPLE = 4
ANN_MIN_CANDIDATES = 100
# When the filters leave fewer than twice the candidates wanted, the index is asked for 4x more,
# up to this many; past it the filters pass so few of the team's vectors (a session, an agent, a
# week) that comparing them all is cheaper and exact.
ANN_MAX_CANDIDATES = 6400


def _approximate(
    items: QuerySet[SearchItem], index: ann.OpenIndex, query_vector: np.ndarray, dimension: int, limit: int
) -> list[tuple[int, float]]:
    """The index's nearest candidates and the vectors indexed after it (its tail), both read back
    through the filters (which also drops deleted items) and scored by their stored vectors: a
    re-embedded item is scored by its new vector, whatever the index holds for it."""
    tail = dict(items.filter(indexed_at__gt=index.tail_after).values_list("id", "embedding"))
    wanted = max(limit * ANN_OVERSAMPLE, ANN_MIN_CANDIDATES)
    while True:
        proposed = index.nearest(query_vector, min(wanted, index.size))
        found = dict(items.filter(id__in=proposed).values_list("id", "embedding")) if proposed else {}
        passed = len(found)
        found.update(tail)
        if len(found) >= 2 * limit:
            break
        # At the share of candidates the filters let through, how many would it take?
        needed = 2 * limit * len(proposed) / max(passed, 1)
        if wanted >= min(ANN_MAX_CANDIDATES, index.size) or needed > ANN_MAX_CANDIDATES:
            return _exact_cosine(items, query_vector, dimension, limit)
        wanted = max(wanted * 4, int(needed))
    return _best(list(found.items()), query_vector, dimension, limit)


def _exact_cosine(
    items: QuerySet[SearchItem], query_vector: np.ndarray, dimension: int, limit: int
) -> list[tuple[int, float]]:
    """Every filtered vector compared: no vector is out of reach for being old."""
    return _best(list(items.values_list("id", "embedding").iterator(chunk_size=5000)), query_vector, dimension, limit)


def _best(
    rows: list[tuple[int, bytes | memoryview | None]], query_vector: np.ndarray, dimension: int, limit: int
) -> list[tuple[int, float]]:
    """The `limit` rows most similar to the query by cosine (vectors are stored L2-normalised)."""
    if not rows:
        return []
    ids = np.fromiter((item_id for item_id, _ in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(bytes(blob or b"") for _, blob in rows), dtype="<f4").reshape(len(rows), dimension)
    similarities = matrix @ query_vector.astype("<f4")
    take = min(limit, len(rows))
    best = np.argpartition(-similarities, take - 1)[:take]
    best = best[np.argsort(-similarities[best], kind="stable")]
    return [(int(ids[i]), float(similarities[i])) for i in best]


def latest_time(filters: Filters) -> datetime | None:
    """The latest time anything searched was said or written: what "now" means to the time a query
    names. One indexed read per kind (the team-kind-time index)."""
    kinds = filters.kinds or tuple(SearchKind.values)
    latest = [
        candidates(replace(filters, kinds=(kind,)))
        .order_by("-occurred_at")
        .values_list("occurred_at", flat=True)
        .first()
        for kind in kinds
    ]
    return max((moment for moment in latest if moment is not None), default=None)
