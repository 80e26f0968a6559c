"""An event as the live stream and webhooks send it (the events list's shape): one definition both read."""

from __future__ import annotations

from memory_app.events.models import MemoryEvent
from memory_client.vocabulary.wire import EventPayload


def event_payload(event: MemoryEvent) -> EventPayload:
    """An event as the stream and webhooks send it (the shape of the events list API)."""
    return {
        "id": event.pk,
        "session_id": str(event.session_id) if event.session_id else None,
        "kind": event.kind,
        "data": event.data,
        "created_at": event.created_at.isoformat().replace("+00:00", "Z"),
    }
