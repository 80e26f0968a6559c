"""Checks that only mean something on PostgreSQL with pgvector enabled, or with pgvector offered
by the server but not enabled: run by test_pgvector_engine.py in processes of their own, on the
databases of tests/pgvector_server.py (this file's name keeps pytest from collecting it on the CI
legs, whose databases are one or the other, or SQLite)."""

from __future__ import annotations

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memory_app.search import engines, schema
from memory_app.search.embeddings.fake import FakeEmbeddings
from memory_app.search.engines import Filters
from memory_app.search.models import SearchItem
from tests.memory_app.search.test_indexing import run_index
from tests.memory_app.search.test_search_api import new_session, say, user


def test_pgvector_is_the_vector_engine_with_iterative_scans(db):
    assert schema.pgvector_installed()
    assert engines.vector_engine_name() == "pgvector"
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        version = tuple(int(part) for part in cursor.fetchone()[0].split("."))
    assert version >= schema.MINIMUM_PGVECTOR  # engines.set_pgvector_scan sets hnsw.iterative_scan


def test_pgvector_searches_through_its_hnsw_index(api, tenant):
    assert schema.pgvector_installed()
    # The job makes the index once per process, maybe in an earlier test's rolled-back transaction:
    # made here, before the rows (an index built in the transaction that updated them is not
    # usable until that transaction ends). CREATE INDEX refuses pending deferred checks.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    schema.ensure_vector_index(FakeEmbeddings.dimension)
    session = new_session(tenant)
    say(session, *[user(f"note {n} on topic {n % 37} of the otter project") for n in range(600)])
    run_index(tenant.team.pk)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {schema.TABLE}")
    query_vector = FakeEmbeddings().embed(["otter topic 5"], purpose="query")[0]

    with CaptureQueriesContext(connection) as queries:
        found = engines.vector(Filters(team_id=tenant.team.pk), query_vector, model=FakeEmbeddings.model, limit=10)
    (sql,) = [q["sql"] for q in queries.captured_queries if "<=>" in q["sql"]]
    with transaction.atomic(), connection.cursor() as cursor:
        engines.set_pgvector_scan(cursor, 10)
        # A 600-item team is small enough to read and sort whole: forbid the sort to see the index used.
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert len(found) == 10
    assert schema.vector_index_name(FakeEmbeddings.dimension) in plan, plan


def test_reindex_embeds_again_what_was_indexed_before_pgvector_was_enabled(api, tenant):
    from memory_app.search import services as index

    session = new_session(tenant)
    say(session, user("the kestrels moved to the north tower"))
    run_index(tenant.team.pk)
    with connection.cursor() as cursor:  # as if embedded while the column did not exist yet
        cursor.execute(f"UPDATE {schema.TABLE} SET embedding_vec = NULL")  # noqa: S608

    counts = index.search_reindex(team_id=tenant.team.pk)
    run_index(tenant.team.pk)

    assert counts["reembed"] == 1
    assert SearchItem.objects.get(team=tenant.team).state == "indexed"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {schema.TABLE} WHERE embedding_vec IS NOT NULL")  # noqa: S608
        assert cursor.fetchone()[0] == 1


def test_without_pgvector_postgresql_searches_by_exact_cosine(api, tenant):
    # The server offers pgvector, but this database's role may not create it: the migration left
    # the in-process engine (exact cosine for a team this small), and enabling it again fails
    # without spoiling the transaction.
    assert connection.vendor == "postgresql"
    assert schema.pgvector_available()
    assert not schema.install_pgvector()
    assert not schema.pgvector_installed()
    assert engines.vector_engine_name() == "faiss-ivf"
    session = new_session(tenant)
    say(session, user("relocating the kestrels"), user("an unrelated note about taxes"))
    run_index(tenant.team.pk)
    query_vector = FakeEmbeddings().embed(["relocated kestrel"], purpose="query")[0]

    found = engines.vector(Filters(team_id=tenant.team.pk), query_vector, model=FakeEmbeddings.model, limit=2)

    assert [SearchItem.objects.get(pk=item_id).text for item_id, _ in found] == [
        "relocating the kestrels",
        "an unrelated note about taxes",
    ]
