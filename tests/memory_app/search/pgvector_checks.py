"""Checks that only mean something on a database with pgvector: run by test_pgvector_engine.py in
its own process against the bundled pgvector server (this file's name keeps pytest from
collecting it on the CI legs, whose PostgreSQL has no pgvector)."""

from __future__ import annotations

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memory_app.search import engines, schema
from memory_app.search.embeddings.fake import FakeEmbeddings
from memory_app.search.engines import Filters
from tests.memory_app.search.test_indexing import run_index
from tests.memory_app.search.test_search_api import new_session, say, user


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
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        # A 600-item team is small enough to read and sort whole: forbid the sort to see the index used.
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert len(found) == 10
    assert schema.vector_index_name(FakeEmbeddings.dimension) in plan, plan


def test_reindex_embeds_again_what_was_indexed_before_pgvector_was_enabled(api, tenant):
    from memory_app.search import services as index
    from memory_app.search.models import SearchItem

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
