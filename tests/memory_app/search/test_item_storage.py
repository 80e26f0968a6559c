"""PostgreSQL keeps an item's vector in its row (a search reads its candidates' vectors back: one
place per item, not the row and the TOAST table), for a row of an ordinary size."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from memory_app.conversations import services
from memory_app.search import schema
from memory_app.search.models import SearchItem
from tests.conftest import Tenant
from tests.memory_app.search.test_indexing import run_index

pytestmark = [pytest.mark.usefixtures("job_outbox"), pytest.mark.postgresql]


def values_moved_out() -> int:
    """How many values of the item table (this transaction sees) lie in its TOAST table."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltoastrelid::regclass::text FROM pg_class WHERE relname = %s", [schema.TABLE])
        (toast,) = cursor.fetchone()
        cursor.execute(f"SELECT count(DISTINCT chunk_id) FROM {toast}")  # noqa: S608 (the catalog's name)
        return int(cursor.fetchone()[0])


def test_an_items_vector_stays_in_its_row(tenant: Tenant) -> None:
    session = services.session_create(team=tenant.team)
    text = " ".join(f"the deploy of service {n} went out after review" for n in range(14))  # ~650 characters
    services.message_append(session=session, messages=[{"role": "user", "content": text}])
    run_index(tenant.team.pk)
    before = values_moved_out()

    # A 384-dimension vector (the offline model's), as the indexer writes it.
    vector = np.random.default_rng(7).standard_normal(384).astype("<f4")
    SearchItem.objects.filter(team=tenant.team).update(embedding=vector.tobytes(), embedding_dim=384)

    assert values_moved_out() == before
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_column_size(embedding) FROM {schema.TABLE} WHERE team_id = %s", [tenant.team.pk])  # noqa: S608
        assert cursor.fetchone()[0] >= 1536  # kept whole: random floats do not compress
