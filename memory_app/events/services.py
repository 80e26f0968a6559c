"""The MemoryEvent feed: the one function that writes an event, and the cursor a live stream reads
with (`GET /api/v1/events/stream/`).

Writing through `event_record` is what lets the feed fan out: the same call queues the team's
webhook deliveries for the kinds they subscribe to (sent when the transaction commits).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder

from memory_app.conversations.models import Session
from memory_app.events.models import MemoryEvent
from memory_app.events.payload import event_payload
from memory_app.tenancy.models import Team


def event_record(
    *,
    team_id: int,
    kind: str,
    data: dict[str, Any],
    session: Session | None = None,
    session_id: uuid.UUID | str | None = None,
) -> MemoryEvent:
    """Append one event; webhook deliveries for it are recorded in the same transaction."""
    from memory_app.webhooks import services as webhooks

    event = MemoryEvent.objects.create(
        team_id=team_id, session=session, session_id=session.pk if session else session_id, kind=kind, data=data
    )
    webhooks.webhook_deliveries_enqueue(event=event)
    return event


# --- the live stream -------------------------------------------------------------------------


def latest_event_id() -> int:
    """Where a stream without a resume point starts: after every event already written."""
    return MemoryEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


@dataclass
class EventCursor:
    """Reads a team's events in id order without losing one that commits late.

    Ids come from one sequence shared by all teams, and on PostgreSQL a transaction can commit
    id N+1 before id N. So the cursor walks the ids of every team: a hole in them is held (the
    events after it wait) until it fills or SSE_GAP_GRACE_SECONDS pass, when it is taken to be a
    rolled-back or deleted row. Resuming from an event id therefore neither repeats nor skips.
    """

    team: Team
    session: Session | None
    position: int
    scan_limit: int = 500
    _gaps_seen: dict[int, float] = field(default_factory=dict)

    def poll(self) -> list[MemoryEvent]:
        """The team's (or session's) events that became readable since the last poll."""
        rows = list(
            MemoryEvent.objects.filter(pk__gt=self.position)
            .order_by("pk")
            .values_list("pk", "team_id", "session_id")[: self.scan_limit]
        )
        now = time.monotonic()
        wanted: list[int] = []
        expected = self.position + 1
        for pk, team_id, session_id in rows:
            if pk > expected and not self._gap_expired(expected, now):
                break
            if team_id == self.team.pk and (self.session is None or session_id == self.session.pk):
                wanted.append(pk)
            self.position, expected = pk, pk + 1
        self._gaps_seen = {start: seen for start, seen in self._gaps_seen.items() if start > self.position}
        if not wanted:
            return []
        return list(MemoryEvent.objects.filter(pk__in=wanted).order_by("pk"))

    def last_own_event_id(self) -> int:
        """The team's latest event at or before the position (0: none): what a stream may tell
        its reader, since the position itself counts every team's events."""
        own = MemoryEvent.objects.filter(team=self.team, pk__lte=self.position).order_by("-pk")
        return own.values_list("pk", flat=True).first() or 0

    def _gap_expired(self, start: int, now: float) -> bool:
        first_seen = self._gaps_seen.setdefault(start, now)
        return now - first_seen >= settings.SSE_GAP_GRACE_SECONDS


def sse_message(event: MemoryEvent) -> str:
    body = json.dumps(event_payload(event), cls=DjangoJSONEncoder, separators=(",", ":"))
    return f"id: {event.pk}\nevent: {event.kind}\ndata: {body}\n\n"


def event_stream(*, cursor: EventCursor) -> Iterator[str]:
    """The body of a text/event-stream response: events as they commit, heartbeats in between,
    and an end after SSE_MAX_SECONDS so a sync worker is freed (clients reconnect with Last-Event-ID)."""
    started = last_sent = time.monotonic()
    # A first line at once lets the client (and any proxy) see the stream is open.
    yield f"retry: 1000\n: stream open after event {cursor.last_own_event_id()}\n\n"
    while True:
        events = cursor.poll()
        now = time.monotonic()
        if events:
            yield "".join(sse_message(event) for event in events)
            last_sent = now
        elif now - last_sent >= settings.SSE_HEARTBEAT_SECONDS:
            yield ": heartbeat\n\n"
            last_sent = now
        if now - started >= settings.SSE_MAX_SECONDS:
            return
        time.sleep(settings.SSE_POLL_SECONDS)
