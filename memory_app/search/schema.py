"""The parts of the search index that Django's schema editor cannot describe, created by the
migration and checked by the system check: the full-text index of each engine, and pgvector's
column and HNSW indexes where the database has the extension.

PostgreSQL: a generated `tsvector` column with a GIN index, so the text and its lexemes can never
disagree. SQLite: an FTS5 table over the item table's text (external content), kept by triggers,
so an item's full-text row goes with it whatever deletes it (a CASCADE from its session included).
pgvector: one untyped `vector` column, and one HNSW index per embedding dimension on the column
cast to that dimension, limited to the rows of that dimension: vectors of two models never meet
in one index or one search.
"""

from __future__ import annotations

import logging
import time

from django.db import connection as default_connection
from django.db.backends.base.base import BaseDatabaseWrapper

log = logging.getLogger(__name__)

TABLE = "memory_app_searchitem"
FTS_TABLE = f"{TABLE}_fts"
TS_CONFIG = "english"

# The lexical document of an item is two fields: its own `text`, and its `context` (who said it and
# the turn it answers: words that help find it, worth less than its own; see engines.CONTEXT_WEIGHT).
# PostgreSQL tells them apart by tsvector weight (A: text, D: context), SQLite by FTS5 column.
_POSTGRES_LEXICAL = [
    f"ALTER TABLE {TABLE} ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS "
    f"(setweight(to_tsvector('{TS_CONFIG}', text), 'A') || setweight(to_tsvector('{TS_CONFIG}', context), 'D')) "
    "STORED",
    f"CREATE INDEX search_item_tsv ON {TABLE} USING gin (search_tsv)",
]
_POSTGRES_LEXICAL_DROP = [f"ALTER TABLE {TABLE} DROP COLUMN IF EXISTS search_tsv"]
# Table names are this module's constants; no value comes from outside.
_SQLITE_LEXICAL = [
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(text, context, content='{TABLE}', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER {TABLE}_fts_insert AFTER INSERT ON {TABLE} BEGIN "  # noqa: S608
    f"INSERT INTO {FTS_TABLE}(rowid, text, context) VALUES (new.id, new.text, new.context); END",
    f"CREATE TRIGGER {TABLE}_fts_delete AFTER DELETE ON {TABLE} BEGIN "  # noqa: S608
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, text, context) VALUES ('delete', old.id, old.text, old.context); END",
    f"CREATE TRIGGER {TABLE}_fts_update AFTER UPDATE OF text, context ON {TABLE} BEGIN "  # noqa: S608
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, text, context) VALUES ('delete', old.id, old.text, old.context); "
    f"INSERT INTO {FTS_TABLE}(rowid, text, context) VALUES (new.id, new.text, new.context); END",
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('rebuild')",  # noqa: S608 (rows already in the table)
]
_SQLITE_LEXICAL_DROP = [
    f"DROP TRIGGER IF EXISTS {TABLE}_fts_insert",
    f"DROP TRIGGER IF EXISTS {TABLE}_fts_delete",
    f"DROP TRIGGER IF EXISTS {TABLE}_fts_update",
    f"DROP TABLE IF EXISTS {FTS_TABLE}",
]
# The first full-text index (text only), as the migration that created the table installed it: the
# migration that added `context` replaces it with the one above.
_POSTGRES_LEXICAL_TEXT_ONLY = [
    f"ALTER TABLE {TABLE} ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (to_tsvector('{TS_CONFIG}', text)) STORED",
    f"CREATE INDEX search_item_tsv ON {TABLE} USING gin (search_tsv)",
]
_SQLITE_LEXICAL_TEXT_ONLY = [
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(text, content='{TABLE}', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER {TABLE}_fts_insert AFTER INSERT ON {TABLE} BEGIN "  # noqa: S608
    f"INSERT INTO {FTS_TABLE}(rowid, text) VALUES (new.id, new.text); END",
    f"CREATE TRIGGER {TABLE}_fts_delete AFTER DELETE ON {TABLE} BEGIN "  # noqa: S608
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, text) VALUES ('delete', old.id, old.text); END",
    f"CREATE TRIGGER {TABLE}_fts_update AFTER UPDATE OF text ON {TABLE} BEGIN "  # noqa: S608
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, text) VALUES ('delete', old.id, old.text); "
    f"INSERT INTO {FTS_TABLE}(rowid, text) VALUES (new.id, new.text); END",
]


# SQLite: every full-text match is checked against the search's filters by looking its item up by
# id. An item row is wide (its vector, its text), so each lookup reads a page of its own (~4 us at
# a 200k team, most of a search's time); this index holds the id and every column engines.candidates
# filters on, so the lookups read a narrow b-tree instead. PostgreSQL filters from its bitmap scan.
LEXICAL_LOOKUP_INDEX = "search_item_lexical_lookup"
_SQLITE_LEXICAL_LOOKUP = [
    f"CREATE INDEX IF NOT EXISTS {LEXICAL_LOOKUP_INDEX} ON {TABLE} "
    "(id, team_id, invalidated_at, kind, occurred_at, valid_from, session_id, agent, role)",
]
_SQLITE_LEXICAL_LOOKUP_DROP = [f"DROP INDEX IF EXISTS {LEXICAL_LOOKUP_INDEX}"]


# PostgreSQL: the postings, one row per (live item, word of its tsvector), kept by triggers from the
# item table, so they can never disagree with it: an item's rows go with its delete (a CASCADE from
# its session included), its invalidation, a TRUNCATE; an edit of its text, time or kind rewrites
# them. The GIN index answers "which items hold this word" in no order: for a word matching 12,000
# items of a team, finding its newest few hundred built two bitmaps of ~12,000 entries and read the
# matches' rows. The postings' b-tree holds each word's items of a team newest first, with what BM25
# needs of each (the word's places in the text and in the context, the item's length, its kind and
# time for the filters), so the lexical engine reads the newest matches of a word and nothing more,
# from the index alone (engines._postgres_postings). Only live items: a search for invalidated or
# as-of items, or one filtered by a column of the item (session, agent, role), uses the GIN index.
POSTINGS_TABLE = "search_posting"
_POSTING_COLUMNS = "item_id, team_id, lexeme, occurred_at, kind, own, context, length"


def _posting_values(item: str) -> str:
    """The postings of `item` (a row of the item table: NEW in the trigger, each row when the
    migration posts the items already there), the SELECT list and FROM of the INSERT. own /
    context: the word's places in the text (weight A) and in the context (weight D); a tsvector
    keeps at most 256 places of a word."""
    return (
        f"SELECT {item}.id, {item}.team_id, w.lexeme, {item}.occurred_at, {item}.kind, "  # noqa: S608 (item: this module's NEW or i)
        "coalesce(cardinality(array_positions(w.weights, 'A')), 0), "
        f"coalesce(cardinality(array_positions(w.weights, 'D')), 0), length({item}.search_tsv) "
        f"FROM unnest({item}.search_tsv) AS w"
    )


_POSTGRES_POSTINGS = [
    f"CREATE TABLE IF NOT EXISTS {POSTINGS_TABLE} ("
    "item_id bigint NOT NULL, team_id bigint NOT NULL, lexeme text NOT NULL, occurred_at timestamptz NOT NULL, "
    "kind varchar(16) NOT NULL, own smallint NOT NULL, context smallint NOT NULL, length integer NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS search_posting_word ON {POSTINGS_TABLE} "
    "(team_id, lexeme, occurred_at DESC, item_id DESC) INCLUDE (kind, own, context, length)",
    f"CREATE INDEX IF NOT EXISTS search_posting_item ON {POSTINGS_TABLE} (item_id)",
    "CREATE OR REPLACE FUNCTION search_posting_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "  # noqa: S608
    f"IF TG_OP <> 'INSERT' THEN DELETE FROM {POSTINGS_TABLE} WHERE item_id = OLD.id; END IF; "
    "IF TG_OP <> 'DELETE' AND NEW.invalidated_at IS NULL THEN "
    f"INSERT INTO {POSTINGS_TABLE} ({_POSTING_COLUMNS}) {_posting_values('NEW')}; "
    "END IF; RETURN NULL; END $$",
    "CREATE OR REPLACE FUNCTION search_posting_truncate() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
    f"TRUNCATE {POSTINGS_TABLE}; RETURN NULL; END $$",
    f"CREATE TRIGGER search_posting_insert AFTER INSERT ON {TABLE} FOR EACH ROW "
    "EXECUTE FUNCTION search_posting_write()",
    # Only what the postings hold: the indexer's writes (state, vector) leave them alone.
    f"CREATE TRIGGER search_posting_update AFTER UPDATE ON {TABLE} FOR EACH ROW WHEN ("
    "OLD.search_tsv IS DISTINCT FROM NEW.search_tsv OR OLD.occurred_at IS DISTINCT FROM NEW.occurred_at "
    "OR OLD.team_id IS DISTINCT FROM NEW.team_id OR OLD.kind IS DISTINCT FROM NEW.kind "
    "OR (OLD.invalidated_at IS NULL) <> (NEW.invalidated_at IS NULL)) EXECUTE FUNCTION search_posting_write()",
    f"CREATE TRIGGER search_posting_delete AFTER DELETE ON {TABLE} FOR EACH ROW "
    "EXECUTE FUNCTION search_posting_write()",
    f"CREATE TRIGGER search_posting_truncate AFTER TRUNCATE ON {TABLE} FOR EACH STATEMENT "
    "EXECUTE FUNCTION search_posting_truncate()",
    # The items already there, in one statement.
    f"INSERT INTO {POSTINGS_TABLE} ({_POSTING_COLUMNS}) SELECT p.* FROM {TABLE} AS i "  # noqa: S608
    f"CROSS JOIN LATERAL ({_posting_values('i')}) AS p WHERE i.invalidated_at IS NULL",
    f"ANALYZE {POSTINGS_TABLE}",
]
_POSTGRES_POSTINGS_DROP = [
    f"DROP TRIGGER IF EXISTS search_posting_insert ON {TABLE}",
    f"DROP TRIGGER IF EXISTS search_posting_update ON {TABLE}",
    f"DROP TRIGGER IF EXISTS search_posting_delete ON {TABLE}",
    f"DROP TRIGGER IF EXISTS search_posting_truncate ON {TABLE}",
    "DROP FUNCTION IF EXISTS search_posting_write()",
    "DROP FUNCTION IF EXISTS search_posting_truncate()",
    f"DROP TABLE IF EXISTS {POSTINGS_TABLE}",
]


def install_postings(connection: BaseDatabaseWrapper) -> None:
    if connection.vendor == "postgresql":
        _execute(connection, _POSTGRES_POSTINGS)


def uninstall_postings(connection: BaseDatabaseWrapper) -> None:
    if connection.vendor == "postgresql":
        _execute(connection, _POSTGRES_POSTINGS_DROP)


def install_lexical_lookup(connection: BaseDatabaseWrapper) -> None:
    if connection.vendor == "sqlite":
        _execute(connection, _SQLITE_LEXICAL_LOOKUP)


def uninstall_lexical_lookup(connection: BaseDatabaseWrapper) -> None:
    if connection.vendor == "sqlite":
        _execute(connection, _SQLITE_LEXICAL_LOOKUP_DROP)


def _execute(connection: BaseDatabaseWrapper, statements: list[str]) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def install_lexical(connection: BaseDatabaseWrapper, *, text_only: bool = False) -> None:
    """The full-text index; `text_only`: the first one, for the migration that created the table."""
    if connection.vendor == "postgresql":
        _execute(connection, _POSTGRES_LEXICAL_TEXT_ONLY if text_only else _POSTGRES_LEXICAL)
    else:
        _execute(connection, _SQLITE_LEXICAL_TEXT_ONLY if text_only else _SQLITE_LEXICAL)


def uninstall_lexical(connection: BaseDatabaseWrapper) -> None:
    _execute(connection, _POSTGRES_LEXICAL_DROP if connection.vendor == "postgresql" else _SQLITE_LEXICAL_DROP)


def reinstall_lexical(connection: BaseDatabaseWrapper, *, text_only: bool = False) -> None:
    """Replace the full-text index with the current (or the first) one, over the rows already there."""
    uninstall_lexical(connection)
    install_lexical(connection, text_only=text_only)


# The vector engine sets hnsw.iterative_scan (engines.set_pgvector_scan), which pgvector has from 0.8
# on: an older pgvector refuses the setting, so such a server keeps exact cosine.
MINIMUM_PGVECTOR = (0, 8)


def pgvector_available(connection: BaseDatabaseWrapper = default_connection) -> bool:
    """Whether the database server has the extension to install, at MINIMUM_PGVECTOR or later
    (not whether it is installed)."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
        row = cursor.fetchone()
    if row is None:
        return False
    version = tuple(int(part) for part in str(row[0]).split(".") if part.isdigit())
    return version >= MINIMUM_PGVECTOR


# Whether the item table has its vector column, per database this process has asked: the
# information_schema query costs 1-2 ms and a search asks twice (the engine and its name). A "yes"
# stays: only dropping the table removes the column. A "no" is asked again after
# _NOT_INSTALLED_TTL seconds, so a process started before `manage.py reindex` enabled pgvector in
# another process moves to it without a restart. install_pgvector forgets the answer.
_installed: dict[tuple[str, str, str, str], tuple[bool, float]] = {}
_NOT_INSTALLED_TTL = 60.0


def _database_key(connection: BaseDatabaseWrapper) -> tuple[str, str, str, str]:
    config = connection.settings_dict
    # NAME too: the test runner points the same alias at a database of its own.
    return (connection.alias, str(config.get("HOST") or ""), str(config.get("PORT") or ""), str(config["NAME"]))


def pgvector_installed(connection: BaseDatabaseWrapper = default_connection) -> bool:
    """Whether the item table has its vector column: the vector engine is pgvector."""
    if connection.vendor != "postgresql":
        return False
    key = _database_key(connection)
    known = _installed.get(key)
    if known is not None and (known[0] or time.monotonic() - known[1] < _NOT_INSTALLED_TTL):
        return known[0]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = %s AND column_name = 'embedding_vec' "
            "AND table_schema = current_schema()",
            [TABLE],
        )
        installed = cursor.fetchone() is not None
    _installed[key] = (installed, time.monotonic())
    return installed


def install_pgvector(connection: BaseDatabaseWrapper = default_connection) -> bool:
    """Add the vector column when the server has pgvector; returns whether the column exists.

    Run by the migration (so a database with the extension gets it at migrate time) and by
    `manage.py reindex` (for an extension installed later). A server without the extension,
    or a role that may not create it, keeps the exact-cosine engine.
    """
    # Asked afresh, and the answer of this process forgotten: the column may have come or gone
    # since (a migration run, a rolled-back transaction).
    _installed.pop(_database_key(connection), None)
    try:
        return _install_pgvector(connection)
    finally:
        _installed.pop(_database_key(connection), None)


def _install_pgvector(connection: BaseDatabaseWrapper) -> bool:
    if pgvector_installed(connection):
        return True
    if not pgvector_available(connection):
        return False
    try:
        with connection.cursor() as cursor:
            cursor.execute("SAVEPOINT memsite_pgvector")
            cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
            cursor.execute(f"ALTER TABLE {TABLE} ADD COLUMN embedding_vec vector")
            cursor.execute("RELEASE SAVEPOINT memsite_pgvector")
    except Exception as exc:  # psycopg's InsufficientPrivilege and kin: stay on exact cosine
        with connection.cursor() as cursor:
            cursor.execute("ROLLBACK TO SAVEPOINT memsite_pgvector")
        log.warning("pgvector is available but could not be enabled (%s); search uses exact cosine", exc)
        return False
    return True


def vector_index_name(dimension: int) -> str:
    return f"search_item_vec_{int(dimension)}"


def ensure_vector_index(dimension: int, connection: BaseDatabaseWrapper = default_connection) -> None:
    """The HNSW index for vectors of `dimension`, created once, when the first ones are written.

    Outside a transaction (the worker) it is built CONCURRENTLY, so writes to the table go on
    meanwhile. Inside one (a test, a management command), PostgreSQL refuses CREATE INDEX while
    Django's deferred foreign-key checks are pending: they run first, then are deferred again.
    """
    dim = int(dimension)
    statement = (
        "CREATE INDEX {how} IF NOT EXISTS {name} ON {table} "
        "USING hnsw ((embedding_vec::vector({dim})) vector_cosine_ops) WHERE embedding_dim = {dim}"
    )
    with connection.cursor() as cursor:
        if not connection.in_atomic_block:
            cursor.execute(statement.format(how="CONCURRENTLY", name=vector_index_name(dim), table=TABLE, dim=dim))
            return
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        try:
            cursor.execute(statement.format(how="", name=vector_index_name(dim), table=TABLE, dim=dim))
        finally:
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def optimize_lexical(connection: BaseDatabaseWrapper = default_connection) -> None:
    """SQLite's FTS5 keeps a deleted row's terms in its segments until they merge: after a purge,
    merge them now, so no trace of purged text stays in the index."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")  # noqa: S608
