"""The locks of fact writes: a fact's row, an extraction run's row, a replaced (subject, predicate)."""

from __future__ import annotations

import hashlib
import uuid

from django.db import connection

from memory_app.facts.models import Fact, FactExtractionRun


def fact_lock(*, fact_id: uuid.UUID) -> Fact:
    """The fact, row-locked until the transaction ends.

    An edit, a restore and an invalidation each read the fact and write it back: the lock makes
    them take turns, so none is lost and a fact is invalidated (and its event written) once.
    Raises Fact.DoesNotExist when the fact is gone.
    """
    return Fact.objects.select_for_update().get(pk=fact_id)


def extraction_run_lock(*, run_id: uuid.UUID) -> FactExtractionRun:
    """The fact-extraction run, row-locked until the transaction ends.

    A worker fixes a run's range, or writes its facts, only while the run is still what it
    expects (its own running attempt, or a run staff may curate): the lock keeps the sweeper's
    re-queue and staff's retry, accept or discard from changing it between that check and the
    write. Take the session's lock first (conversations.locks) when holding both. Raises
    FactExtractionRun.DoesNotExist when the run is gone.
    """
    return FactExtractionRun.objects.select_for_update().get(pk=run_id)


def subject_predicate_lock(*, team_id: int, scope: str, subject_norm: str, predicate_norm: str) -> None:
    """Serialise writers replacing the same single-valued (subject, predicate) on PostgreSQL.

    Without it two workers adding "alice lives in Paris" and "alice lives in Oslo" at once
    could each miss the other's uncommitted row and leave both live. A transaction-scoped
    advisory lock, as the rows it guards may not exist yet. SQLite needs nothing: its IMMEDIATE
    transactions already run one writer at a time. Take several in sorted order.
    """
    if connection.vendor != "postgresql":
        return
    digest = hashlib.sha256(f"{team_id}\x1f{scope}\x1f{subject_norm}\x1f{predicate_norm}".encode()).digest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [int.from_bytes(digest[:8], "big", signed=True)])
