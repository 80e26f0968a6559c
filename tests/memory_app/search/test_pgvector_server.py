"""The machine's PostgreSQL has a pgvector that works here: the extension (built for generic x86-64
by .ci/run) loads, and a team-filtered nearest-neighbour query uses the HNSW index with pgvector
0.8's iterative scan, which keeps searching the graph until the LIMIT is filled with rows that pass
the filter."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import psycopg
import pytest

from tests.pgvector_server import MINIMUM_PGVECTOR, pgvector_database_url  # noqa: F401 (a fixture)

pytestmark = pytest.mark.pgvector

# The index is on an expression with the dimension, as the search engine's are (one per model dimension).
NEAREST = """
    SELECT id FROM item WHERE team = %(team)s
    ORDER BY embedding::vector(3) <=> %(query)s::vector(3) LIMIT %(limit)s
"""


def unit(x: float, y: float, z: float) -> str:
    norm = math.sqrt(x * x + y * y + z * z)
    return f"[{x / norm},{y / norm},{z / norm}]"


@pytest.fixture
def conn(pgvector_database_url: str) -> Iterator[psycopg.Connection]:  # noqa: F811
    with psycopg.connect(pgvector_database_url) as connection:
        yield connection


def test_team_filtered_nearest_neighbours_use_the_hnsw_index(conn: psycopg.Connection) -> None:
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    assert version is not None and tuple(int(part) for part in version[0].split(".")) >= MINIMUM_PGVECTOR
    conn.execute("CREATE TABLE item (id serial PRIMARY KEY, team text NOT NULL, embedding vector NOT NULL)")
    conn.execute("CREATE INDEX item_embedding_3 ON item USING hnsw ((embedding::vector(3)) vector_cosine_ops)")
    rng = random.Random(7)
    # A big team whose vectors all lie near the query, and a small one whose vectors point anywhere:
    # the graph's first candidates are all the big team's, which the filter then drops.
    rows = [("big", unit(1, rng.uniform(-0.1, 0.1), rng.uniform(-0.1, 0.1))) for _ in range(3000)]
    rows += [("small", unit(rng.gauss(0, 1), rng.gauss(0, 1), rng.gauss(0, 1))) for _ in range(60)]
    with conn.cursor().copy("COPY item (team, embedding) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    conn.execute("ANALYZE item")
    conn.commit()
    query = {"team": "small", "query": unit(1, 0, 0), "limit": 5}

    with conn.transaction():
        conn.execute("SET LOCAL enable_indexscan = off")
        exact = [row[0] for row in conn.execute(NEAREST, query)]
    assert len(exact) == 5

    # With so selective a filter the planner rightly prefers a scan of the table; the index is
    # forced here to show what it does when the team is large.
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + NEAREST, query))
        plain = [row[0] for row in conn.execute(NEAREST, query)]
    assert "Index Scan using item_embedding_3" in plan, plan
    # Without iterative scan, the filter empties the index's first (ef_search) candidates.
    assert len(plain) < 5, plain

    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + NEAREST, query))
        found = [row[0] for row in conn.execute(NEAREST, query)]
    assert "Index Scan using item_embedding_3" in plan, plan
    # relaxed_order may return neighbours slightly out of order, never another team's rows.
    assert sorted(found) == sorted(exact)
    teams = {row[0] for row in conn.execute("SELECT team FROM item WHERE id = ANY(%s)", (found,))}
    assert teams == {"small"}
