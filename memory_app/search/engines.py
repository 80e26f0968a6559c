"""The two search engines, each returning a team's best candidates for a query as (item id, score)
lists, best first, over the same filtered set of items.

Lexical: Okapi BM25 over PostgreSQL full-text search (the generated tsvector, GIN index) or SQLite
FTS5. A query's words are OR-ed: a question shares only some words with its answer. At most
LEXICAL_RANKED_MATCHES matching items are ranked, the newest, with every match of a rare word;
PostgreSQL reads a word's newest matches from its postings (schema.POSTINGS_TABLE: newest first per
team and word) or, for a search filtered by a column of the item, among the team's newest items in
the full-text index (a window widened until it holds enough), so it does not read every match of a
common word in a large team.
Vector: pgvector's HNSW index (iterative scans, so a team filter cannot starve the result) when
the database has the extension; else the team's in-process IVF index (ann.py) for candidates,
read back through the filters and scored exactly, plus the vectors indexed since it was brought
up to date; exact cosine in numpy over every filtered vector while a team has no index. Only
vectors of the configured model are compared.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np
import psycopg
from django.db import connection, transaction
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
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
# SQLite: the newest LEXICAL_RANKED_MATCHES matches of any word, plus the rare words' older ones;
# FTS5 stops reading at the bound.
LEXICAL_RANKED_MATCHES = 2000
# PostgreSQL looks for a word's newest matches among the team's newest items only, its window (the
# items at or after a time of the team's timeline, below): the GIN index's matches of the word and
# the team-time index's items of the window meet in a bitmap, and only the matches inside the window
# are read from the table (a GIN index yields no order: without the window every match of the word
# in the team was read, 8,000 rows a word on average at the search bench's 200k team). A window is
# sized to hold LEXICAL_WINDOW_MARGIN times the matches wanted at the word's share of the items it
# searched before (or, for a word not searched yet, its share of the whole table in PostgreSQL's
# statistics); one that held fewer is widened and the search run again, until it holds enough or
# spans the team: the items ranked are always each word's newest matches. 1.25: a word used evenly
# over time fills its window with 5 standard deviations to spare at 500 matches wanted (3 at 200,
# a ten-word query's share); 2 cost a quarter to a third more time at the 200k team, 1.5 up to a tenth.
LEXICAL_WINDOW_MARGIN = 1.25
# The team's timeline: the time of its every TIMELINE_STEP-th newest item, up to half the team.
TIMELINE_STEP = 500
# What a window's item costs (an entry of the team-time index in the bitmap) against a match read
# from the table (its row, its place in the sort): ~0.1 us against ~1.4 us at the search bench's
# 200k team. A word is searched over the whole team when reading all its matches costs less than
# its window's items and its matches in them: there, a word matching 3,300 items is read whole (its
# window would span 39,000 items), one matching 12,000 gets a window of 11,000.
WINDOW_ITEM_COST = 0.1
# A team's item count, mean item length (BM25's N and avgdl) and timeline change slowly: asked once a
# while. So does a word's share of the items a search reads, which sizes its window and gives its idf.
TEAM_STATISTICS_TTL_SECONDS = 300.0
WORD_SHARES_KEPT = 10_000  # past this many (search, word) shares remembered, they are all forgotten


@dataclass(frozen=True)
class TeamStatistics:
    count: int  # BM25's N: the team's items
    average_length: float  # BM25's avgdl: their mean number of distinct words
    timeline: tuple[datetime, ...]  # [j]: the time of the team's ((j + 1) * TIMELINE_STEP)-th newest item


_team_statistics: dict[tuple[str, int], tuple[TeamStatistics, float]] = {}  # (db, team) -> (statistics, when)
_word_shares: dict[tuple[str, Filters, str], tuple[float, float]] = {}  # (db, filters, lexeme) -> (share, when)
_table_shares: dict[str, tuple[dict[str, float], float | None, float]] = {}  # db -> (shares, least, when)
_word_counts: dict[tuple[str, int, str], tuple[int, float]] = {}  # (db, team, lexeme) -> (live items, when)


def _postgres_lexical(filters: Filters, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """Okapi BM25 over the team's items (as SQLite's FTS5 computes it), context words weighted
    CONTEXT_WEIGHT: PostgreSQL's own ts_rank_cd rewards words standing close together, which
    ranks a question's answer below texts that merely repeat one of its words. Each word's newest
    matches are looked for in its window; a search whose windows held too few is run again with
    those windows widened (rare once a word was searched: its window is sized from what it matched).

    A word's document frequency n: its matches among the items searched when its window spans the
    team (as counted before windows), else its share of them times N, the share remembered (so a
    search ranks alike until it is forgotten) or, for a word not searched lately, counted in this
    window: n is estimated from the team's newest items."""
    lexemes = _postgres_lexemes(terms)
    if not lexemes:
        return []
    team = _postgres_team_statistics(filters.team_id)
    per_word = max(1, LEXICAL_RANKED_MATCHES // len(lexemes))
    if _postings_hold(filters):
        return _postgres_postings(filters, lexemes, team, per_word, limit)
    known = [_remembered_share(filters, lexeme) for lexeme in lexemes]
    # A search up to a past moment (until, as of) would find nothing among the newest items: no window.
    bounded = filters.until is not None or filters.as_of is not None
    windows = [
        None if bounded else _window(team, per_word, share if share is not None else _table_share(lexeme))
        for lexeme, share in zip(lexemes, known, strict=True)
    ]
    while True:
        ranked, matched = _postgres_ranked(filters, lexemes, windows, known, team, per_word, limit)
        wider = list(windows)
        for word, (lexeme, steps, count) in enumerate(zip(lexemes, windows, matched, strict=True)):
            if steps is not None and count < per_word:  # too narrow: its share was less than thought
                known[word] = None
                wider[word] = _wider_window(team, steps, count, per_word)
            if known[word] is None or steps is None:
                _remember_share(filters, lexeme, count / _window_items(team, steps))
        if wider == windows:
            return ranked
        windows = wider


def _postings_hold(filters: Filters) -> bool:
    """Whether the postings hold every item the search may return: they hold the live items, with
    their team, kind and time (schema.POSTINGS_TABLE)."""
    return (
        filters.session_id is None
        and not filters.agent
        and not filters.role
        and filters.as_of is None
        and not filters.include_invalidated
    )


def _postgres_postings(
    filters: Filters, lexemes: Sequence[str], team: TeamStatistics, per_word: int, limit: int
) -> list[tuple[int, float]]:
    """The best `limit` of each word's newest `per_word` matches, read from the postings' index
    alone (a word's matches of a team are its entries newest first: nothing else is read), and
    ranked by Okapi BM25 as _postgres_ranked ranks them: tf = the word's places in the text plus
    CONTEXT_WEIGHT times its places in the context, the item's length its number of distinct words.

    n, a word's live items in the team (whatever kinds or times are searched, as SQLite's FTS5
    counts n over its whole table): the matches read when they are all of them; for a word with
    more, its share of the team's items its newest matches span (the timeline) times N, as a
    search ranks the newest matches of such a word; counted, when the search narrows what it reads
    (kinds, times) or the span reaches past the timeline."""
    narrowing: list[Any] = []
    conditions = "team_id = %s AND lexeme = %s"
    if filters.kinds:
        conditions += " AND kind = ANY(%s)"
        narrowing.append(list(filters.kinds))
    if filters.since is not None:
        conditions += " AND occurred_at >= %s"
        narrowing.append(filters.since)
    if filters.until is not None:
        conditions += " AND occurred_at <= %s"
        narrowing.append(filters.until)
    # The SQL is this module's text (a word's number is an int); every value is a parameter.
    sql = " UNION ALL ".join(
        f"(SELECT {word}::int AS word, item_id, own, context, length, occurred_at "  # noqa: S608
        f"FROM {schema.POSTINGS_TABLE} WHERE {conditions} ORDER BY occurred_at DESC, item_id DESC LIMIT %s)"
        for word in range(len(lexemes))
    )
    params = [value for lexeme in lexemes for value in (filters.team_id, lexeme, *narrowing, per_word)]
    # Binary results: 2,000 rows' times parse in a tenth of the time.
    with _binary_results_cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if not rows:
        return []
    words, item_ids, own, context, length, moments = zip(*rows, strict=True)
    word = np.fromiter(words, dtype=np.int64, count=len(rows))
    matched = np.bincount(word, minlength=len(lexemes))
    oldest = {int(w): moment for w, moment in zip(words, moments, strict=True)}  # rows come newest first
    n = _document_frequencies(filters, lexemes, team, per_word, matched, oldest, narrowed=bool(narrowing))
    total = float(team.count)
    idf = np.log(1 + (np.maximum(total, n) - n + 0.5) / (n + 0.5))
    tf = np.fromiter(own, dtype=np.float64, count=len(rows)) + CONTEXT_WEIGHT * np.fromiter(
        context, dtype=np.float64, count=len(rows)
    )
    norm = BM25_K1 * (
        1 - BM25_B + BM25_B * np.fromiter(length, dtype=np.float64, count=len(rows)) / max(team.average_length, 1.0)
    )
    ids = np.fromiter(item_ids, dtype=np.int64, count=len(rows))
    unique, place = np.unique(ids, return_inverse=True)
    scores = np.bincount(place, weights=idf[word] * tf / (tf + norm), minlength=len(unique)) * (BM25_K1 + 1)
    best = np.lexsort((-unique, -scores))[:limit]  # best score first, then the newer id
    return [(int(unique[i]), float(scores[i])) for i in best]


def _document_frequencies(
    filters: Filters,
    lexemes: Sequence[str],
    team: TeamStatistics,
    per_word: int,
    matched: np.ndarray,
    oldest: dict[int, datetime],
    *,
    narrowed: bool,
) -> np.ndarray:
    """Each word's n for _postgres_postings: from what was read where it tells, else counted."""
    n = matched.astype(np.float64)
    uncounted: list[int] = []
    for word in range(len(lexemes)):
        if narrowed:
            uncounted.append(word)
        elif matched[word] >= per_word:
            spanned = _items_since(team, oldest[word])
            if spanned is None:
                uncounted.append(word)
            else:
                n[word] = min(float(team.count), max(float(matched[word]), matched[word] * team.count / spanned))
    if uncounted:
        counts = _postgres_word_counts(filters.team_id, [lexemes[word] for word in uncounted])
        for word, count in zip(uncounted, counts, strict=True):
            n[word] = float(count)
    return n


def _items_since(team: TeamStatistics, moment: datetime) -> float | None:
    """About how many of the team's items are at or after `moment`, from its timeline (the time of
    its every TIMELINE_STEP-th newest item: between two of them, the midpoint), or None when it is
    older than the timeline reaches."""
    reached = sum(1 for point in team.timeline if point >= moment)
    if reached == len(team.timeline):
        return None
    return (reached + 0.5) * TIMELINE_STEP


def _postgres_word_counts(team_id: int, lexemes: Sequence[str]) -> list[int]:
    """Each word's live items in the team (BM25's n), counted from the postings' index and
    remembered TEAM_STATISTICS_TTL_SECONDS: a common word's count reads its every entry."""
    database = str(connection.settings_dict["NAME"])
    now = time.monotonic()
    counts: dict[str, int] = {}
    for lexeme in lexemes:
        known = _word_counts.get((database, team_id, lexeme))
        if known is not None and now - known[1] < TEAM_STATISTICS_TTL_SECONDS:
            counts[lexeme] = known[0]
    missing = [lexeme for lexeme in lexemes if lexeme not in counts]
    if missing:
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT lexeme, count(*) FROM {schema.POSTINGS_TABLE} "  # noqa: S608
                "WHERE team_id = %s AND lexeme = ANY(%s) GROUP BY lexeme",
                [team_id, missing],
            )
            found = dict(cursor.fetchall())
        if len(_word_counts) + len(missing) > WORD_SHARES_KEPT:
            _word_counts.clear()
        for lexeme in missing:
            counts[lexeme] = int(found.get(lexeme, 0))
            _word_counts[(database, team_id, lexeme)] = (counts[lexeme], now)
    return [counts[lexeme] for lexeme in lexemes]


def _postgres_ranked(
    filters: Filters,
    lexemes: Sequence[str],
    windows: Sequence[int | None],
    shares: Sequence[float | None],
    team: TeamStatistics,
    per_word: int,
    limit: int,
) -> tuple[list[tuple[int, float]], list[int]]:
    """The best `limit` of each word's newest `per_word` matches in its window (a number of steps
    of the team's timeline; None: the whole team), and how many filtered items each window matched.

    One statement, each word's matches and their number from one scan (the window count, before
    the LIMIT). n: that count for a window spanning the team, else the word's known share of the
    items times N, else the count times N / the window's items. idf = ln(1 + (N - n + 0.5) /
    (n + 0.5)) with N the team's items. tf: a word's places in the item, a context place (weight D)
    counting CONTEXT_WEIGHT: what ts_rank_cd sums for a single lexeme with weights
    {CONTEXT_WEIGHT, 0, 0, 1} (each place is a cover of its own: no proximity in it), without
    unnesting the item's whole tsvector. The item's length is its number of distinct words (the
    tsvector's length). The arithmetic is float8 (numeric, which literals make, is several times slower).
    """
    where, where_params = _item_conditions(candidates(filters))
    # Lexemes are what to_tsvector made of the user's words, matched as they are (quoted, not stemmed
    # again); the SQL is this module's text (a word's number is an int) and every value a parameter.
    branches: list[str] = []
    params: list[Any] = []
    for word, (lexeme, steps) in enumerate(zip(lexemes, windows, strict=True), start=1):
        since = "" if steps is None else " AND occurred_at >= %s"
        # The count in a subquery of its own: PostgreSQL 15 plans a window function under a LIMIT as
        # if it could stop early, and would walk the team-time index newest first, through every
        # item of the team, rather than take the word's matches from the full-text index.
        branches.append(
            f"(SELECT {word} AS word, id, search_tsv, matched FROM (SELECT id, occurred_at, search_tsv, "  # noqa: S608
            f"count(*) OVER () AS matched FROM {schema.TABLE} WHERE {where} AND search_tsv @@ %s::tsquery{since}) "
            "AS window_matches ORDER BY occurred_at DESC, id DESC LIMIT %s)"
        )
        params += [*where_params, _tsquery_literal(lexeme), *([] if steps is None else [team.timeline[steps - 1]])]
        params.append(per_word)
    words = range(1, len(lexemes) + 1)
    # ts_rank_cd only where the word is (a match test is cheaper); tsvector weights D, C, B, A: the
    # context, unused, unused, the text.
    frequencies = ", ".join(
        f"CASE WHEN search_tsv @@ %s::tsquery THEN ts_rank_cd(%s::float4[], search_tsv, %s::tsquery, 0)::float8 "
        f"ELSE 0 END AS tf{j}"
        for j in words
    )
    weights = [CONTEXT_WEIGHT, 0.0, 0.0, 1.0]
    for lexeme in lexemes:
        params += [_tsquery_literal(lexeme), weights, _tsquery_literal(lexeme)]
    params += [BM25_K1, BM25_B, BM25_B, max(team.average_length, 1.0)]
    params += [
        float(team.count),
        [
            None if steps is None or share is None else share * team.count
            for steps, share in zip(windows, shares, strict=True)
        ],
        [team.count / _window_items(team, steps) for steps in windows],
    ]
    scores = " + ".join(f"w.idf[{j}] * i.tf{j} / (i.tf{j} + i.norm)" for j in words)
    params += [BM25_K1 + 1.0, limit]
    sql = (
        "WITH found AS (" + " UNION ALL ".join(branches) + "), "  # noqa: S608
        f"items AS MATERIALIZED (SELECT id, {frequencies}, "
        "%s::float8 * (1 - %s::float8 + %s::float8 * length(search_tsv) / %s::float8) AS norm "
        "FROM (SELECT DISTINCT ON (id) id, search_tsv FROM found ORDER BY id) AS distinct_found), "
        "weights AS MATERIALIZED (SELECT array_agg(x.matched ORDER BY s.word) AS matched, "
        "array_agg(ln(1 + (greatest(%s::float8, x.n) - x.n + 0.5) / (x.n + 0.5)) ORDER BY s.word) AS idf "
        "FROM unnest(%s::float8[], %s::float8[]) WITH ORDINALITY AS s(known, scale, word) "
        "LEFT JOIN (SELECT word, max(matched) AS matched FROM found GROUP BY word) AS c USING (word) "
        "CROSS JOIN LATERAL (SELECT coalesce(c.matched, 0) AS matched, "
        "coalesce(s.known, coalesce(c.matched, 0) * s.scale) AS n) AS x) "
        f"SELECT i.id, ({scores}) * %s::float8 AS score, w.matched FROM items AS i CROSS JOIN weights AS w "
        "ORDER BY score DESC, i.id DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    # No row: no word matched in its window.
    matched = [int(count) for count in rows[0][2]] if rows else [0] * len(lexemes)
    return [(int(item_id), float(score)) for item_id, score, _ in rows], matched


def _window_items(team: TeamStatistics, steps: int | None) -> int:
    """How many of the team's items a window spanned when the timeline was read."""
    return max(team.count, 1) if steps is None else steps * TIMELINE_STEP


def _window(team: TeamStatistics, per_word: int, share: float | None) -> int | None:
    """The steps of the timeline a window needs to hold LEXICAL_WINDOW_MARGIN times `per_word`
    matches of a word matching `share` of the items, or None (the whole team) for a word whose
    share is not known."""
    if not share:
        return None
    return _worth_it(team, math.ceil(per_word * LEXICAL_WINDOW_MARGIN / share / TIMELINE_STEP), share, per_word)


def _wider_window(team: TeamStatistics, steps: int, matched: int, per_word: int) -> int | None:
    """A window that held `matched` < `per_word` matches, widened to what would have held enough at
    the share it showed, and at least doubled (a few matches say little about a word's share)."""
    share = matched / _window_items(team, steps)
    needed = math.ceil(steps * per_word * LEXICAL_WINDOW_MARGIN / max(matched, 1))
    return _worth_it(team, max(2 * steps, needed), share, per_word)


def _worth_it(team: TeamStatistics, steps: int, share: float, per_word: int) -> int | None:
    """The window, if the timeline reaches it and it costs less than reading every match of the
    word in the team (at `share` of the team's items); else None, the whole team."""
    window_cost = steps * TIMELINE_STEP * WINDOW_ITEM_COST + per_word * LEXICAL_WINDOW_MARGIN
    return steps if steps <= len(team.timeline) and window_cost < share * team.count else None


def _remembered_share(filters: Filters, lexeme: str) -> float | None:
    """The share of the items this search reads that matched the word when it was last searched."""
    known = _word_shares.get((str(connection.settings_dict["NAME"]), filters, lexeme))
    if known is None or time.monotonic() - known[1] >= TEAM_STATISTICS_TTL_SECONDS:
        return None
    return known[0]


def _remember_share(filters: Filters, lexeme: str, share: float) -> None:
    if len(_word_shares) >= WORD_SHARES_KEPT:
        _word_shares.clear()
    _word_shares[(str(connection.settings_dict["NAME"]), filters, lexeme)] = (share, time.monotonic())


def _table_share(lexeme: str) -> float | None:
    """The share of the whole item table's rows holding the lexeme, as ANALYZE estimated it: it keeps
    the ~1,000 most common lexemes (the statistics target x 10), so a word not among them is taken
    to match as many as the least of them. None before the table's first ANALYZE."""
    database = str(connection.settings_dict["NAME"])
    known = _table_shares.get(database)
    if known is None or time.monotonic() - known[2] >= TEAM_STATISTICS_TTL_SECONDS:
        known = (*_postgres_common_lexemes(), time.monotonic())
        _table_shares[database] = known
    shares, least, _ = known
    return shares.get(lexeme, least)


def _postgres_common_lexemes() -> tuple[dict[str, float], float | None]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats "
            "WHERE schemaname = current_schema() AND tablename = %s AND attname = 'search_tsv'",
            [schema.TABLE],
        )
        row = cursor.fetchone()
    if row is None or not row[0] or not row[1]:
        return {}, None
    # The frequencies go on past the lexemes' with the least and the greatest of them.
    shares = {lexeme: float(share) for lexeme, share in zip(row[0], row[1], strict=False)}
    return shares, min(shares.values())


def _postgres_lexemes(terms: Sequence[str]) -> list[str]:
    """The query's words as the full-text configuration stems them (its stopwords dropped), each once."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('{schema.TS_CONFIG}', %s)))",
            [" ".join(terms)],
        )
        found = {row[0] for row in cursor.fetchall()}
    return sorted(found)


def _postgres_team_statistics(team_id: int) -> TeamStatistics:
    key = (str(connection.settings_dict["NAME"]), team_id)
    known = _team_statistics.get(key)
    if known is not None and time.monotonic() - known[1] < TEAM_STATISTICS_TTL_SECONDS:
        return known[0]
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), coalesce(avg(length(search_tsv)), 1) FROM {schema.TABLE} WHERE team_id = %s",  # noqa: S608
            [team_id],
        )
        count, average = cursor.fetchone()
        # The newest half of the team, newest first, read from the team-time index alone.
        cursor.execute(
            "SELECT occurred_at FROM (SELECT occurred_at, row_number() OVER (ORDER BY occurred_at DESC) AS place "  # noqa: S608
            f"FROM {schema.TABLE} WHERE team_id = %s ORDER BY occurred_at DESC LIMIT %s) AS newest "
            "WHERE mod(place, %s) = 0 ORDER BY place",
            [team_id, int(count) // 2, TIMELINE_STEP],
        )
        timeline = tuple(moment for (moment,) in cursor.fetchall())
    statistics = TeamStatistics(count=int(count), average_length=float(average), timeline=timeline)
    _team_statistics[key] = (statistics, time.monotonic())
    return statistics


def _tsquery_literal(lexeme: str) -> str:
    """A lexeme as a tsquery operand, quoted (it came from to_tsvector: it may hold any character)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _sqlite_lexical(filters: Filters, terms: Sequence[str], limit: int) -> list[tuple[int, float]]:
    """FTS5's BM25 (column weights: text 1, context CONTEXT_WEIGHT) over the newest
    LEXICAL_RANKED_MATCHES filtered items matching any word, plus, when there were more, the
    older matches of the query's rare words (those matching at most their share of that bound):
    a rare word's matches all stay in, however many newer items a common word matches."""
    span = _sqlite_id_span(filters)
    if span is None:
        return []
    where, params = _item_conditions(candidates(filters))
    newest, oldest_ranked = _sqlite_ranked(terms, span, where, params, limit, before=None)
    if oldest_ranked is None:
        return newest
    rare = _sqlite_rare_terms(terms, max(1, LEXICAL_RANKED_MATCHES // len(terms)))
    if not rare:
        return newest
    # Their older items are scored by the rare words alone (with the same idf as above): a common
    # word would add at most its small idf to them.
    older, _ = _sqlite_ranked(rare, span, where, params, limit, before=oldest_ranked)
    return sorted([*newest, *older], key=lambda pair: (-pair[1], -pair[0]))[:limit]


def _sqlite_id_span(filters: Filters) -> tuple[int, int] | None:
    """The least and the greatest id a search can return (None: no item), so FTS5 reads only the
    matches between them: the full-text table holds every team's items, and a small team must not
    walk a large one's matches. Within a time (since, until), its items' ids, found through the
    team-kind-time index: a search for last Tuesday walked every newer match of its words first
    (the bench's 200k team written in time order, a day of 6,600 items: 20 -> 6 ms). Ids grow as
    items are written, not with their time: items written out of time order (an imported history,
    the bench's random times) widen the span, never hide an item."""
    items = SearchItem.objects.filter(team_id=filters.team_id)
    if filters.since is not None or filters.until is not None:
        items = items.filter(kind__in=filters.kinds or SearchKind.values)  # the index's second column
        if filters.since is not None:
            items = items.filter(occurred_at__gte=filters.since)
        if filters.until is not None:
            items = items.filter(occurred_at__lte=filters.until)
    # Two reads, the least and the greatest: each one end of an index (asked together, SQLite reads all).
    low = items.order_by("id").values_list("id", flat=True).first()
    high = items.order_by("-id").values_list("id", flat=True).first()
    return None if low is None or high is None else (low, high)


def _sqlite_ranked(
    terms: Sequence[str], span: tuple[int, int], where: str, params: list[Any], limit: int, *, before: int | None
) -> tuple[list[tuple[int, float]], int | None]:
    """The best `limit` of the newest LEXICAL_RANKED_MATCHES filtered items (with an id in `span`,
    and below `before` if given) matching any of `terms`, and the oldest id ranked when there may
    be more (None when every match was ranked)."""
    fts, table = schema.FTS_TABLE, schema.TABLE
    older = f" AND {fts}.rowid < %s" if before is not None else ""
    # The full-text table drives (CROSS JOIN), newest first: FTS5 walks its doclists backwards by
    # rowid and stops after the bound, so bm25() (~1.3 us an item) and the filters run on the
    # ranked items only. Each hit's filters are read from the narrow lookup index, not the row.
    sql = (
        "SELECT id, score, count(*) OVER (), min(id) OVER () FROM ("  # noqa: S608
        f"SELECT {fts}.rowid AS id, -bm25({fts}, 1.0, %s) AS score FROM {fts} "
        f"CROSS JOIN {table} INDEXED BY {schema.LEXICAL_LOOKUP_INDEX} ON {table}.id = {fts}.rowid "
        f"WHERE {fts} MATCH %s AND {fts}.rowid >= %s AND {fts}.rowid <= %s AND {where}{older} "
        f"ORDER BY {fts}.rowid DESC LIMIT %s"
        ") ORDER BY score DESC, id DESC LIMIT %s"
    )
    bound = [before] if before is not None else []
    with connection.cursor() as cursor:
        cursor.execute(sql, [CONTEXT_WEIGHT, _fts_match(terms), *span, *params, *bound, LEXICAL_RANKED_MATCHES, limit])
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
    if _passes_few(filters):
        return _exact_cosine(items, query_vector, dimension, limit)
    return _approximate(items, index, query_vector, dimension, limit)


def _passes_few(filters: Filters) -> bool:
    """Whether filters narrower than the team (a session, an agent, kinds, a week) pass at most
    ANN_MAX_CANDIDATES of its items, counted from the filters' index up to one more: comparing those
    all is exact and cheaper than asking the index again and again for candidates the filters drop
    (a day of the bench's 200k team, 1,100 items: 34 -> 10 ms)."""
    narrowed = (
        filters.kinds,
        filters.session_id,
        filters.agent,
        filters.role,
        filters.since,
        filters.until,
        filters.as_of,
    )
    if not any(narrowed):
        return False
    return candidates(filters)[: ANN_MAX_CANDIDATES + 1].count() <= ANN_MAX_CANDIDATES


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


def stored_vectors(items: QuerySet[SearchItem], ids: Sequence[int] | None = None) -> list[tuple[int, bytes]]:
    """(id, stored vector) of each item (of those among `ids`, if given). PostgreSQL sends them in
    its binary format: a vector's 1,536 bytes as they are, where the text format sends 3,072 hex
    digits to decode (about half of reading a search's 160 candidates back), and takes the ids as
    one array, not a parameter each."""
    where, params = _item_conditions(items)
    sql = f"SELECT id, embedding FROM {schema.TABLE} WHERE {where}"  # noqa: S608 (this module's text)
    if ids is not None and connection.vendor == "postgresql":
        sql, params = sql + " AND id = ANY(%s)", [*params, list(ids)]
    elif ids is not None:
        sql, params = sql + f" AND id IN ({', '.join(['%s'] * len(ids))})", [*params, *ids]
    with _binary_results_cursor() as cursor:
        cursor.execute(sql, params)
        return [(int(item_id), bytes(blob or b"")) for item_id, blob in cursor.fetchall()]


def rows_of(values: QuerySet[Any]) -> list[tuple[Any, ...]]:
    """A values_list() queryset's rows; on PostgreSQL in its binary format, which loads times
    (Django's text loader for them is Python code, ~5 us a value) and blobs several times faster.
    Only for columns psycopg loads as Django would: numbers, text, times, uuids, bytes (not JSON)."""
    if connection.vendor != "postgresql":
        return list(values)
    sql, params = values.query.sql_with_params()
    with _binary_results_cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _binary_results_cursor() -> CursorWrapper:
    """A cursor whose results come in PostgreSQL's binary format (Django's come in text), wrapped
    as Django wraps its own (so its queries are logged and counted alike); SQLite's own elsewhere."""
    if connection.vendor != "postgresql":
        return connection.cursor()
    connection.ensure_connection()
    # Parameters bound by the server (a binary result needs it), results in binary.
    raw = psycopg.Cursor(connection.connection)
    raw.format = psycopg.pq.Format.BINARY
    connection.validate_thread_sharing()
    return CursorDebugWrapper(raw, connection) if connection.queries_logged else CursorWrapper(raw, connection)


def _approximate(
    items: QuerySet[SearchItem], index: ann.OpenIndex, query_vector: np.ndarray, dimension: int, limit: int
) -> list[tuple[int, float]]:
    """The index's nearest candidates and the vectors indexed after it (its tail), both read back
    through the filters (which also drops deleted items) and scored by their stored vectors: a
    re-embedded item is scored by its new vector, whatever the index holds for it."""
    tail = dict(stored_vectors(items.filter(indexed_at__gt=index.tail_after)))
    wanted = max(limit * ANN_OVERSAMPLE, ANN_MIN_CANDIDATES)
    while True:
        proposed = index.nearest(query_vector, min(wanted, index.size))
        found = dict(stored_vectors(items, proposed)) if proposed else {}
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
    return _best(stored_vectors(items), query_vector, dimension, limit)


def _best(
    rows: list[tuple[int, bytes]], query_vector: np.ndarray, dimension: int, limit: int
) -> list[tuple[int, float]]:
    """The `limit` rows most similar to the query by cosine (vectors are stored L2-normalised)."""
    if not rows:
        return []
    ids = np.fromiter((item_id for item_id, _ in rows), dtype=np.int64, count=len(rows))
    matrix = np.frombuffer(b"".join(blob for _, blob in rows), dtype="<f4").reshape(len(rows), dimension)
    similarities = matrix @ query_vector.astype("<f4")
    take = min(limit, len(rows))
    best = np.argpartition(-similarities, take - 1)[:take]
    best = best[np.argsort(-similarities[best], kind="stable")]
    return [(int(ids[i]), float(similarities[i])) for i in best]


def latest_time(filters: Filters) -> datetime | None:
    """The latest time anything searched was said or written: what "now" means to the time a query
    names. PostgreSQL, every kind searched: the newest item of the team-time index (one row read);
    else one indexed read per kind (the team-kind-time index)."""
    if connection.vendor == "postgresql" and not filters.kinds:
        return _newest_time(candidates(filters))
    kinds = filters.kinds or tuple(SearchKind.values)
    latest = [_newest_time(candidates(replace(filters, kinds=(kind,)))) for kind in kinds]
    return max((moment for moment in latest if moment is not None), default=None)


def _newest_time(items: QuerySet[SearchItem]) -> datetime | None:
    return items.order_by("-occurred_at").values_list("occurred_at", flat=True).first()
