"""marsys 0.2.1's memory events, and turning the server's event feed into them.

The classes have marsys's names and fields, so an EventBus that routes by class name
(marsys's does: `type(event).__name__`) delivers them to the same listeners. marsys is not
imported: the client depends on httpx only.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from datetime import datetime
from typing import Any, Protocol

logger = logging.getLogger(__name__)

COMPACTION_KINDS = {
    "compaction_started": "started",
    "compaction_completed": "completed",
    "compaction_failed": "failed",
    "compaction_reverted": "reverted",
}


class EventSink(Protocol):
    """What set_event_context needs of an event bus (marsys's EventBus has it)."""

    def emit_nowait(self, event: Any) -> None: ...


@dataclasses.dataclass
class MemoryResetEvent:
    """Emitted by reset_memory() when an event context is set."""

    agent_name: str
    timestamp: float = dataclasses.field(default_factory=time.time)


@dataclasses.dataclass
class CompactionEvent:
    """marsys's CompactionEvent (a StatusEvent): one step of a compaction's lifecycle.

    `status` is "started", "completed", "failed", or (memsite only) "reverted". `metadata`
    carries the server's side: memsite_session_id, run_id, trigger, event_id, and error.
    """

    session_id: str
    agent_name: str
    status: str
    pre_tokens: int = 0
    post_tokens: int = 0
    pre_messages: int = 0
    post_messages: int = 0
    duration: float | None = None
    stages_run: list[str] | None = None
    event_id: str = dataclasses.field(default_factory=lambda: str(uuid.uuid4()), kw_only=True)
    timestamp: float = dataclasses.field(default_factory=time.time, kw_only=True)
    branch_id: str | None = dataclasses.field(default=None, kw_only=True)
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict, kw_only=True)

    @property
    def event_type(self) -> str:
        return "compaction"


def _timestamp(created_at: Any) -> float:
    try:
        return datetime.fromisoformat(str(created_at)).timestamp()
    except ValueError:
        return time.time()


def compaction_event_from(record: dict[str, Any], *, session_id: str, agent_name: str) -> CompactionEvent | None:
    """A CompactionEvent for one record of GET /api/v1/events/, or None for other kinds."""
    status = COMPACTION_KINDS.get(record.get("kind", ""))
    if status is None:
        return None
    data = record.get("data") or {}
    return CompactionEvent(
        session_id=session_id,
        agent_name=agent_name,
        status=status,
        pre_tokens=data.get("pre_tokens") or 0,
        post_tokens=data.get("post_tokens") or 0,
        pre_messages=data.get("pre_messages") or 0,
        post_messages=data.get("post_messages") or 0,
        duration=data.get("duration"),
        stages_run=data.get("stages_run"),
        timestamp=_timestamp(record.get("created_at")),
        metadata={
            "memsite_session_id": record.get("session_id"),
            "run_id": data.get("run_id"),
            "trigger": data.get("trigger"),
            "event_id": record.get("id"),
            "error": data.get("error"),
        },
    )


def emit(sink: EventSink, event: Any) -> None:
    """Hand an event to the bus; a failing bus is logged, never the caller's problem (as in marsys)."""
    try:
        sink.emit_nowait(event)
    except Exception:
        logger.exception("Could not emit %s", type(event).__name__)
