"""The agent memory's row lock: one writer at a time per agent memory document."""

from __future__ import annotations

import uuid

from memory_app.agent_records.models import AgentMemory


def agent_memory_lock(*, session_id: uuid.UUID, agent: str) -> AgentMemory | None:
    """The agent's memory in the session, row-locked until the transaction ends; None if it has none.

    Every write to a memory document (a whole replace, an entry, an attempt's update, the
    context) reads it (ids taken, positions, the stored context) and writes on that: the lock
    makes writers of the same memory take turns, so two appends never take the same id or
    position, and the archiver never moves entries a writer is reading.
    """
    return AgentMemory.objects.select_for_update().filter(session_id=session_id, agent=agent).first()


def agent_memory_lock_by_id(*, memory_id: int) -> AgentMemory | None:
    """`agent_memory_lock` for a memory known by its id (the archiver); None when it is gone."""
    return AgentMemory.objects.select_for_update().filter(pk=memory_id).first()
