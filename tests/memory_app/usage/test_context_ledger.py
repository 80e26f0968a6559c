"""The context ledger's batched write path (memory_app/context_ledger.py): rows held per web
process and written in one INSERT, with the time each context was served; rows of deleted
sessions dropped, also when the deletion lands between the check and the insert; rows kept
through a database error; written by the flusher thread and by
gunicorn workers on a graceful stop."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from django.db import OperationalError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory_app.conversations import services
from memory_app.conversations.models import Session
from memory_app.models import ContextServe
from memory_app.usage import context_ledger
from tests.conftest import make_tenant
from tests.worker_process import process_env, start_gunicorn, stop, wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def batched(settings, db) -> Iterator[None]:
    settings.CONTEXT_LEDGER_FLUSH_SECONDS = 3600
    yield
    context_ledger.flush()  # nothing held leaks into the next test


def served(api, session_id: str, agent: str = "") -> int:
    response = api.get(f"/api/v1/sessions/{session_id}/context/", {"agent": agent} if agent else {})
    assert response.status_code == 200, response.content
    return response.json()["token_count"]


def test_reads_are_held_then_written_in_one_insert_per_table_with_the_time_each_was_served(
    api, session_id, batched
) -> None:
    tokens = [served(api, session_id) for _ in range(3)]
    assert ContextServe.objects.count() == 0
    assert context_ledger.pending() == 3

    flushed_at = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        assert context_ledger.flush() == 3
    # one INSERT for the ledger rows, one for their replay records
    assert sum(query["sql"].startswith("INSERT") for query in queries) == 2
    rows = list(ContextServe.objects.order_by("created_at"))
    assert [row.served_tokens for row in rows] == tokens
    assert all(row.created_at < flushed_at for row in rows)  # when served, not when written
    assert context_ledger.pending() == 0


def test_the_read_that_fills_a_batch_writes_it(api, session_id, batched, monkeypatch) -> None:
    monkeypatch.setattr(context_ledger, "BATCH_ROWS", 2)
    served(api, session_id)
    assert ContextServe.objects.count() == 0
    served(api, session_id)
    assert ContextServe.objects.count() == 2 and context_ledger.pending() == 0


def test_rows_of_a_session_deleted_before_the_flush_are_dropped(api, admin_api, batched) -> None:
    kept, deleted = (api.post("/api/v1/sessions/", {}, format="json").json()["id"] for _ in range(2))
    served(api, kept, agent="keeper")
    served(api, deleted, agent="CANARY-agent-7f1")
    assert admin_api.delete(f"/api/v1/sessions/{deleted}/").status_code == 204

    assert context_ledger.flush() == 1
    assert list(ContextServe.objects.values_list("session_id", "agent")) == [(uuid.UUID(kept), "keeper")]


def test_a_database_error_keeps_the_rows_for_the_next_flush(api, session_id, batched, monkeypatch) -> None:
    served(api, session_id)
    served(api, session_id)

    def refused(*args: object, **kwargs: object) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(ContextServe.objects, "bulk_create", refused)
    assert context_ledger.flush() == 0
    assert context_ledger.pending() == 2
    monkeypatch.undo()
    assert context_ledger.flush() == 2
    assert ContextServe.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_the_flusher_thread_writes_held_rows_within_the_interval(api, session_id, settings) -> None:
    settings.CONTEXT_LEDGER_FLUSH_SECONDS = 0.3
    served(api, session_id)
    served(api, session_id)
    wait_for(lambda: ContextServe.objects.count() == 2, timeout=10, what="the flusher thread")
    assert context_ledger.pending() == 0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_gunicorn_workers_stopping_gracefully_write_the_rows_they_hold(tmp_path: Path) -> None:
    tenant = make_tenant(f"ledger-{uuid.uuid4().hex[:6]}")
    session = services.session_create(team=tenant.team, system_prompt="You are terse.")
    env = process_env({"MEMSITE_CONTEXT_LEDGER_FLUSH_SECONDS": "3600", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)})
    process, url = start_gunicorn(env, workers=2)
    try:
        for _ in range(6):
            response = httpx.get(
                f"{url}/api/v1/sessions/{session.pk}/context/",
                headers={"Authorization": f"Bearer {tenant.key}"},
                timeout=30,
            )
            assert response.status_code == 200, response.text
        assert ContextServe.objects.count() == 0  # held by the workers
    finally:
        stop(process)
    assert process.returncode == 0
    assert ContextServe.objects.filter(session=session).count() == 6


@pytest.mark.django_db(transaction=True)
def test_a_session_deleted_between_the_check_and_the_insert_loses_only_its_rows(
    api, admin_api, batched, monkeypatch
) -> None:
    kept, deleted = (api.post("/api/v1/sessions/", {}, format="json").json()["id"] for _ in range(2))
    served(api, kept)
    served(api, deleted)
    real_filter = Session.objects.filter

    def deleted_right_after_the_check(*args: object, **kwargs: object) -> list[uuid.UUID]:
        monkeypatch.setattr(Session.objects, "filter", real_filter)  # the retry checks for real
        live = list(real_filter(*args, **kwargs).values_list("pk", flat=True))
        assert admin_api.delete(f"/api/v1/sessions/{deleted}/").status_code == 204
        return live

    monkeypatch.setattr(Session.objects, "filter", lambda *a, **k: Checked(deleted_right_after_the_check, a, k))
    assert context_ledger.flush() == 1  # the first insert failed on the foreign key; the retry dropped the row
    assert list(ContextServe.objects.values_list("session_id", flat=True)) == [uuid.UUID(kept)]


class Checked:
    """Stands in for the session check's queryset: `values_list` runs the given function."""

    def __init__(self, run: Callable[..., list[uuid.UUID]], args: tuple, kwargs: dict) -> None:
        self.run, self.args, self.kwargs = run, args, kwargs

    def values_list(self, *fields: str, flat: bool = False) -> list[uuid.UUID]:
        return self.run(*self.args, **self.kwargs)


def test_the_flusher_follows_a_longer_interval_from_its_next_tick(api, session_id, batched, settings) -> None:
    settings.CONTEXT_LEDGER_FLUSH_SECONDS = 1.0
    served(api, session_id)  # starts the flusher thread, ticking every second
    wait_for(lambda: context_ledger.pending() == 0, timeout=10, what="the flusher's first batch")
    time.sleep(0.3)  # its batch written, the flusher sleeps through its next second
    settings.CONTEXT_LEDGER_FLUSH_SECONDS = 3600
    served(api, session_id)
    # When it wakes, and for a tick more, the row stays held for the hour now asked for.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        assert context_ledger.pending() == 1
        time.sleep(0.05)
