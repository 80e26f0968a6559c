"""The dashboard's event feed: the team's MemoryEvents newest first, filtered by kind and session,
each linked to what it is about (its session, compaction, extraction run, fact or experience)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django import forms
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from memory_app.conversations import selectors as session_selectors
from memory_app.conversations.models import Session
from memory_app.dashboard.decorators import team_page
from memory_app.events import selectors as event_selectors
from memory_app.events.models import MemoryEvent
from memory_app.tenancy.models import Team

EVENTS_PER_PAGE = 50
Kind = MemoryEvent.Kind
COMPACTION_KINDS = {
    Kind.COMPACTION_STARTED,
    Kind.COMPACTION_COMPLETED,
    Kind.COMPACTION_FAILED,
    Kind.COMPACTION_REVERTED,
}
EXTRACTION_KINDS = {Kind.FACTS_EXTRACTED, Kind.FACT_EXTRACTION_FAILED, Kind.FACT_EXTRACTION_QUARANTINED}


class EventFilterForm(forms.Form):
    kind = forms.ChoiceField(label="Event type", required=False, choices=[("", "All types"), *Kind.choices])
    session = forms.CharField(
        label="Session",
        required=False,
        max_length=200,
        widget=forms.TextInput(attrs={"placeholder": "session id or external id", "spellcheck": "false"}),
    )

    def session_filter(self, team: Team) -> tuple[bool, Session | None]:
        """(whether anything can match, the session named): a session that is not one of the
        team's matches nothing, and says so on the field."""
        self.is_valid()
        wanted = (self.cleaned_data.get("session") or "").strip()
        if not wanted:
            return True, None
        session = session_selectors.session_named(team=team, name=wanted)
        if session is None:
            self.add_error("session", "No session of this team has that id or external id.")
            return False, None
        return True, session


@dataclass(frozen=True)
class EventRow:
    event: MemoryEvent
    links: list[tuple[str, str]]
    data: str


def _uuid(value: Any) -> uuid.UUID | None:
    """An id read from an event's data, if it is one (the data is free-form JSON)."""
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


def _links(event: MemoryEvent) -> list[tuple[str, str]]:
    """(label, URL) of what the event is about, from the ids in its data (its session is shown apart)."""
    data = event.data if isinstance(event.data, dict) else {}
    found: list[tuple[str, str]] = []
    run_id, fact_id = _uuid(data.get("run_id")), _uuid(data.get("fact_id"))
    if event.session_id and run_id and event.kind in COMPACTION_KINDS:
        found.append(("Compaction run", reverse("dashboard:session", args=[event.session_id]) + f"#run-{run_id}"))
    if run_id and event.kind in EXTRACTION_KINDS:
        found.append(("Extraction run", reverse("dashboard:fact_extraction", args=[run_id])))
    if fact_id:
        found.append(("Fact", reverse("dashboard:fact", args=[fact_id])))
    if isinstance(data.get("exp_id"), str) and event.kind == Kind.EXPERIENCE_APPROVED:
        found.append(("Experience", reverse("experiences:detail", args=[data["exp_id"]])))
    return found


@team_page
def event_list(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    form = EventFilterForm(request.GET)
    can_match, session = form.session_filter(team)
    kind = form.cleaned_data.get("kind") or None
    feed = (
        event_selectors.event_feed(team=team, session=session, kind=kind) if can_match else MemoryEvent.objects.none()
    )
    page = Paginator(feed, EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    rows = [EventRow(event, _links(event), json.dumps(event.data, indent=2, sort_keys=True)) for event in page]
    context: dict[str, Any] = {
        "team": team,
        "teams": teams,
        "form": form,
        "page": page,
        "rows": rows,
        "session": session,
        "filtered": bool(kind or session or not can_match),
    }
    return render(request, "memory_app/events.html", context)
