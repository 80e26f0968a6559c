"""An event as the live stream and webhooks send it (the events list's shape): one definition both read."""

from __future__ import annotations

from typing import Any

from memory_app.events.models import MemoryEvent


def event_payload(event: MemoryEvent) -> dict[str, Any]:
    """An event as the stream and webhooks send it (the shape of the events list API)."""
    return {
        "id": event.pk,
        "session_id": str(event.session_id) if event.session_id else None,
        "kind": event.kind,
        "data": event.data,
        "created_at": event.created_at.isoformat().replace("+00:00", "Z"),
    }
