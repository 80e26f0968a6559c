"""The MemoryEvent feed: the one function that writes an event, and the cursor a live stream reads
with (`GET /api/v1/events/stream/`).

Writing through `event_record` is what lets the feed fan out: the same call queues the team's
webhook deliveries for the kinds they subscribe to (sent when the transaction commits).
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.utils import timezone

from memory_app.conversations.models import Session
from memory_app.events.models import EventStreamLease, MemoryEvent
from memory_app.events.payload import event_payload
from memory_app.tenancy.models import ApiKey, Team
from memsite.errors import StreamsUnavailable, TooManyStreams


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


def event_stream(*, cursor: EventCursor, renew: Callable[[], bool] = lambda: True) -> Generator[str, None, None]:
    """The body of a text/event-stream response: events as they commit, heartbeats in between,
    and an end after SSE_MAX_SECONDS. `renew` is called every heartbeat interval; the stream ends
    when it answers False (its lease is gone).

    The first and last messages carry `id:` with no data: EventSource keeps that as the id it
    resumes from without firing an event, so a reconnect after a quiet stream misses nothing."""
    started = last_sent = last_renewed = time.monotonic()
    # A first line at once lets the client (and any proxy) see the stream is open.
    opened_after = cursor.last_own_event_id()
    yield f"retry: 1000\n{_resume_id(opened_after)}: stream open after event {opened_after}\n\n"
    while True:
        events = cursor.poll()
        now = time.monotonic()
        if events:
            yield "".join(sse_message(event) for event in events)
            last_sent = now
        elif now - last_sent >= settings.SSE_HEARTBEAT_SECONDS:
            yield ": heartbeat\n\n"
            last_sent = now
        if now - last_renewed >= settings.SSE_HEARTBEAT_SECONDS:
            if not renew():
                break
            last_renewed = now
        if now - started >= settings.SSE_MAX_SECONDS:
            break
        time.sleep(settings.SSE_POLL_SECONDS)
    resume_after = cursor.last_own_event_id()
    yield f"{_resume_id(resume_after)}: stream ends; reconnect with Last-Event-ID {resume_after}\n\n"


def _resume_id(event_id: int) -> str:
    """An `id:` line for the team's event `event_id`; none before the team's first event, since
    resuming from 0 would re-read every team's events (the client then starts at the newest)."""
    return f"id: {event_id}\n" if event_id else ""


# --- caps on open streams ----------------------------------------------------------------------


def stream_lease_seconds() -> float:
    """A lease not renewed for this long stops counting: its stream's process is gone. Streams
    renew every heartbeat interval, so three intervals leave room for a slow database."""
    return 3 * settings.SSE_HEARTBEAT_SECONDS


def stream_retry_after() -> int:
    """When a refused client should try again: by then a client that left has been noticed
    (its stream's next heartbeat write fails) or its lease has lapsed."""
    return max(1, math.ceil(settings.SSE_HEARTBEAT_SECONDS))


def stream_lease_open(*, api_key: ApiKey) -> EventStreamLease:
    """Take a slot for a new stream of `api_key`, or raise TooManyStreams (the key's cap) or
    StreamsUnavailable (the deployment's).

    The row is written before counting, outside any transaction: two streams opening at once
    each see the other, so together they can be refused at the edge but never exceed a cap.
    """
    now = timezone.now()
    fresh_since = now - timedelta(seconds=stream_lease_seconds())
    EventStreamLease.objects.filter(renewed_at__lt=fresh_since).delete()
    lease = EventStreamLease.objects.create(team_id=api_key.team_id, api_key=api_key, renewed_at=now)
    live = EventStreamLease.objects.filter(renewed_at__gte=fresh_since)
    retry_after = stream_retry_after()
    if live.filter(api_key=api_key).count() > settings.SSE_MAX_STREAMS_PER_KEY:
        lease.delete()
        raise TooManyStreams(
            f"This API key already has {settings.SSE_MAX_STREAMS_PER_KEY} event streams open, the most one key "
            f"may hold (MEMSITE_SSE_MAX_STREAMS_PER_KEY): close one, or retry after {retry_after} s.",
            retry_after=retry_after,
        )
    if live.count() > settings.SSE_MAX_STREAMS:
        lease.delete()
        raise StreamsUnavailable(
            f"The server has {settings.SSE_MAX_STREAMS} event streams open, the most it serves at once "
            f"(MEMSITE_SSE_MAX_STREAMS): retry after {retry_after} s, or read GET /api/v1/events/?after= meanwhile.",
            retry_after=retry_after,
        )
    return lease


def stream_lease_renew(*, lease: EventStreamLease) -> bool:
    """Keep the lease counting; False when it is gone (lapsed and removed by another opener)."""
    return EventStreamLease.objects.filter(pk=lease.pk).update(renewed_at=timezone.now()) == 1


def stream_lease_release(*, lease: EventStreamLease) -> None:
    EventStreamLease.objects.filter(pk=lease.pk).delete()


class LeasedEventStream:
    """A stream's response body holding its lease: Django calls `close()` when the response
    ends, whether the stream ran out, the client went away (a write failed) or the body was
    never read, and the slot is given back at once."""

    def __init__(self, *, cursor: EventCursor, lease: EventStreamLease) -> None:
        self._lease = lease
        self._chunks: Generator[str, None, None] = event_stream(
            cursor=cursor, renew=lambda: stream_lease_renew(lease=lease)
        )

    def __iter__(self) -> Iterator[str]:
        return self._chunks

    def close(self) -> None:
        self._chunks.close()
        stream_lease_release(lease=self._lease)
