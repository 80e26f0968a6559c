"""The compaction run's row lock: who may still write a run's outcome."""

from __future__ import annotations

import uuid

from memory_app.compaction.models import CompactionRun


def compaction_run_lock(*, run_id: uuid.UUID) -> CompactionRun:
    """The run, row-locked until the transaction ends.

    A worker writes a summary only while the run is still its own (running, same attempt): the
    lock keeps the sweeper from re-queueing it, and a second attempt from finishing it, between
    that check and the write. Take the session's lock first (conversations.locks) when holding
    both. Raises CompactionRun.DoesNotExist when the run is gone.
    """
    return CompactionRun.objects.select_for_update().get(pk=run_id)
