"""Dashboard pages of agent names: every agent of the team, and everything one agent did.

An agent is a name, not a row: it is whatever the team's messages, sessions, work records, API
keys and experience selections call it (agent_records.selectors.agent_sightings). Selections
live in experiences_app, an app built on this one, so they are asked through its app config
and never imported (the import contract in pyproject.toml).

Both pages are scoped to the member's current team and read a fixed number of queries however
many agents, sessions and messages there are: every section pages on the server.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, cast
from urllib.parse import urlencode

from django import forms
from django.apps import apps
from django.core.paginator import Page, Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from memory_app.agent_records import selectors
from memory_app.agent_records.selectors import AgentSighting, AgentTally
from memory_app.conversations import selectors as session_selectors
from memory_app.conversations.models import Message, Session
from memory_app.dashboard.decorators import team_page
from memory_app.dashboard.links import agent_url, message_url
from memory_app.dashboard.role_colours import role_hue
from memory_app.tenancy.models import Team
from memory_app.usage import selectors as usage_selectors
from memory_client.vocabulary.messages import content_text

AGENTS_PER_PAGE = 25
SESSIONS_PER_PAGE = 10
MESSAGES_PER_PAGE = 20
RECORDS_PER_PAGE = 10
RECENT_ENTRIES = 8
SELECTIONS_PER_PAGE = 10
FACTS_PER_PAGE = 10
EXCERPT_CHARS = 240
# The usage ledger from its first row: the agent page totals all of it.
LEDGER_START = datetime(2000, 1, 1, tzinfo=UTC)
# An experience's page is e/<slug:exp_id>/: an id that is no slug has no page to link.
EXPERIENCE_SLUG = re.compile(r"[-a-zA-Z0-9_]+")


# --- experience selections, through experiences_app's app config ---------------------------------


class _Experiences(Protocol):
    def agent_selection_counts(
        self, *, team: Team, agent: str | None = None, search: str | None = None
    ) -> list[tuple[str, uuid.UUID | None, int, datetime | None]]: ...

    def agent_selections(self, *, team: Team, agent: str) -> QuerySet[Any]: ...


def _experiences() -> _Experiences | None:
    if not apps.is_installed("experiences_app"):
        return None
    return cast(_Experiences, apps.get_app_config("experiences_app"))  # its config defines the methods


def _selection_sightings(team: Team, *, agent: str | None = None, search: str | None = None) -> list[AgentSighting]:
    experiences = _experiences()
    if experiences is None:
        return []
    return [
        AgentSighting(role, session_id, selections=count, last_seen=last)
        for role, session_id, count, last in experiences.agent_selection_counts(team=team, agent=agent, search=search)
    ]


# --- paging several lists on one page ------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """One paged list of a page with several: its own query parameter, and links that keep the
    other lists where they are and land back on this one (`anchor`)."""

    page: Page
    items: list[Any]  # the page's rows, read once
    previous_url: str
    next_url: str


def _section(request: HttpRequest, items: Any, per_page: int, param: str, anchor: str) -> Section:
    page = Paginator(items, per_page).get_page(request.GET.get(param))

    def url(number: int) -> str:
        query = request.GET.copy()
        query[param] = str(number)
        return f"?{query.urlencode()}#{anchor}"

    return Section(
        page=page,
        items=list(page.object_list),
        previous_url=url(page.previous_page_number()) if page.has_previous() else "",
        next_url=url(page.next_page_number()) if page.has_next() else "",
    )


# --- the agents list ------------------------------------------------------------------------------


class AgentFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Name contains")
    order = forms.ChoiceField(
        required=False,
        label="Sort",
        choices=[
            ("recent", "Last seen"),
            ("name", "Name"),
            ("sessions", "Most sessions"),
            ("messages", "Most messages"),
            ("tokens", "Most message tokens"),
            ("records", "Most record entries"),
        ],
    )

    def filters(self) -> tuple[str | None, str]:
        """(name search, sort order); a field that did not validate counts as not given."""
        self.is_valid()
        data = self.cleaned_data
        return (data.get("q") or "").strip() or None, data.get("order") or "recent"


@dataclass(frozen=True)
class AgentRow:
    tally: AgentTally
    url: str
    hue: int


def _rows(tallies: Iterable[AgentTally]) -> list[AgentRow]:
    return [AgentRow(tally, agent_url(tally.key), role_hue(tally.key)) for tally in tallies]


@team_page
def agent_list(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    form = AgentFilterForm(request.GET)
    search, order = form.filters()
    sightings = selectors.agent_sightings(team=team, search=search, extra=_selection_sightings(team, search=search))
    page = Paginator(selectors.agent_directory(sightings=sightings, order=order), AGENTS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    return render(
        request,
        "memory_app/agents.html",
        {
            "team": team,
            "teams": teams,
            "form": form,
            "page": page,
            "rows": _rows(page.object_list),
            "filtered": search is not None,
        },
    )


# --- one agent ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionRow:
    tally: AgentTally
    session: Session | None  # None: deleted between the two queries


@dataclass(frozen=True)
class MessageRow:
    message: Message
    excerpt: str
    url: str


def _excerpt(message: Message) -> str:
    text = content_text(message.content).strip()
    if text:
        return text
    calls = message.tool_calls if isinstance(message.tool_calls, list) else []
    names = [str((call.get("function") or {}).get("name", "")) for call in calls if isinstance(call, dict)]
    return f"calls {', '.join(name for name in names if name)}" if any(names) else ""


@dataclass(frozen=True)
class SelectionRow:
    log: Any  # experiences_app's SelectionLog
    picked: list[tuple[str, str]]  # (exp_id, its page or "")
    candidates: int


def _selection_row(log: Any) -> SelectionRow:
    picked = [
        (str(exp_id), reverse("experiences:detail", args=[exp_id]) if EXPERIENCE_SLUG.fullmatch(str(exp_id)) else "")
        for exp_id in log.selected or []
    ]
    return SelectionRow(log=log, picked=picked, candidates=len(log.candidates or []))


def _usage(team: Team, agent: str) -> usage_selectors.UsageFigures:
    scope = usage_selectors.UsageFilter(
        team=team, since=LEDGER_START, until=timezone.now() + timedelta(seconds=1), agent=agent
    )
    return usage_selectors.usage_totals(scope=scope)


@team_page
def agent_detail(request: HttpRequest, agent: str, *, team: Team, teams: list[Team]) -> HttpResponse:
    sightings = selectors.agent_sightings(team=team, agent=agent, extra=_selection_sightings(team, agent=agent))
    if not sightings:
        raise Http404("No agent of this team has that name.")
    summary = selectors.agent_directory(sightings=sightings)[0]

    sessions = _section(
        request, selectors.agent_session_tallies(sightings=sightings), SESSIONS_PER_PAGE, "sessions_page", "sessions"
    )
    found = session_selectors.session_list(team=team).in_bulk([tally.key for tally in sessions.items])
    session_rows = [SessionRow(tally, found.get(tally.key)) for tally in sessions.items]

    messages = _section(
        request, selectors.agent_messages(team=team, agent=agent), MESSAGES_PER_PAGE, "page", "messages"
    )
    message_rows = [
        MessageRow(m, _excerpt(m)[:EXCERPT_CHARS], message_url(m.session_id, m.seq)) for m in messages.items
    ]

    records = _section(
        request, selectors.agent_record_list(team=team, agent=agent), RECORDS_PER_PAGE, "records_page", "records"
    )
    recent_entries = (
        selectors.agent_recent_entries(team=team, agent=agent, limit=RECENT_ENTRIES) if summary.records else []
    )

    experiences = _experiences()
    selections = (
        _section(
            request,
            experiences.agent_selections(team=team, agent=agent),
            SELECTIONS_PER_PAGE,
            "selections_page",
            "selections",
        )
        if experiences is not None and summary.selections
        else None
    )

    facts = _section(
        request,
        selectors.agent_facts(team=team, agent=agent, session_ids=summary.session_ids),
        FACTS_PER_PAGE,
        "facts_page",
        "facts",
    )
    return render(
        request,
        "memory_app/agent_detail.html",
        {
            "team": team,
            "teams": teams,
            "agent": agent,
            "hue": role_hue(agent),
            "summary": summary,
            "usage": _usage(team, agent),
            "usage_query": urlencode({"agent": agent, "days": max(usage_selectors.DAY_RANGES, key=int)}),
            "sessions": sessions,
            "session_rows": session_rows,
            "message_list": messages,
            "message_rows": message_rows,
            "records": records,
            "recent_entries": recent_entries,
            "selections": selections,
            "selection_rows": [_selection_row(log) for log in selections.items] if selections else [],
            "facts": facts,
        },
    )
