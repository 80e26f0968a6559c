"""Reading a team's event feed."""

from __future__ import annotations

from django.db.models import QuerySet

from memory_app.conversations.models import Session
from memory_app.events.models import MemoryEvent
from memory_app.tenancy.models import Team


def event_page(*, team: Team, session: Session | None, after: int | None, limit: int) -> list[MemoryEvent]:
    """The team's events oldest first (optionally one session's), from cursor `after`."""
    events = MemoryEvent.objects.filter(team=team)
    if session is not None:
        events = events.filter(session=session)
    if after is not None:
        events = events.filter(pk__gt=after)
    return list(events.order_by("pk")[:limit])


def event_feed(*, team: Team, session: Session | None = None, kind: str | None = None) -> QuerySet[MemoryEvent]:
    """The team's events newest first, for reading page by page (the dashboard's feed)."""
    events = MemoryEvent.objects.filter(team=team).select_related("session")
    if session is not None:
        events = events.filter(session=session)
    if kind:
        events = events.filter(kind=kind)
    return events.order_by("-pk")
