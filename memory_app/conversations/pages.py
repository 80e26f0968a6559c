"""The sessions pages (server-rendered): the current team's sessions, and each session's page:
its timeline, its active context, and what other domains show about it (compaction's gauge, panel
and ledger, recall, facts, served contexts), read from their panels and selectors, never their pages.

Every page is scoped to a team the logged-in user belongs to (TeamMembership); the chosen team
lives in the Django session and is re-checked against the memberships on each request. Stored
text reaches templates as plain strings, so autoescaping covers all of it.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any, TypedDict

from django import forms
from django.contrib import messages as flash
from django.core.paginator import Paginator
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from memory_app.compaction import panels as compaction_panels
from memory_app.conversations import context, selectors
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.dashboard.decorators import get_or_404, non_negative_int, team_page
from memory_app.dashboard.links import agent_url
from memory_app.dashboard.message_content import (
    CompactMessage,
    Piece,
    ToolCallView,
    compact_message,
    content_pieces,
    pretty_json,
    tool_call_view,
)
from memory_app.facts import selectors as fact_selectors
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.search import panels as search_panels
from memory_app.tenancy.models import Team
from memory_app.usage import selectors as usage_selectors
from memsite import csp

SESSIONS_PER_PAGE = 25
# A page of a long session stays a few screens tall: tool output is folded, and 25 messages.
MESSAGES_PER_PAGE = 25
# A call near the end of a page still shows its result if it comes this many seqs later.
TOOL_RESULT_LOOKAHEAD = 200


# --- sessions list ------------------------------------------------------------------------


class SessionFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    memory_type = forms.ChoiceField(required=False, choices=[("", "Any type"), *MemoryType.choices], label="Type")
    agent = forms.CharField(required=False, max_length=200, label="Agent")
    created_after = forms.DateField(
        required=False, label="Created from", widget=forms.DateInput(attrs={"type": "date"})
    )
    created_before = forms.DateField(required=False, label="to", widget=forms.DateInput(attrs={"type": "date"}))
    compaction_failed = forms.BooleanField(required=False, label="Latest compaction failed")
    order = forms.ChoiceField(
        required=False,
        choices=[(key, label) for key, (label, _ordering) in selectors.SESSION_ORDERS.items()],
        label="Sort",
    )

    FILTER_NAMES = ("q", "memory_type", "agent", "created_after", "created_before", "compaction_failed")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("created_after"), data.get("created_before")
        if start and end and start > end:
            self.add_error("created_before", "Must not be before the start date.")
        return data

    def filters(self) -> dict[str, Any]:
        """Selector arguments from the fields that validated (invalid ones are ignored, and shown)."""
        self.is_valid()
        data = self.cleaned_data
        start: date | None = data.get("created_after")
        end: date | None = data.get("created_before")
        return {
            "search": (data.get("q") or "").strip() or None,
            "memory_type": data.get("memory_type") or None,
            "agent": (data.get("agent") or "").strip() or None,
            "compaction_failed": bool(data.get("compaction_failed")),
            "created_after": _start_of(start) if start else None,
            # The end date is inclusive: everything before the next midnight.
            "created_before": _start_of(end + timedelta(days=1))
            if end and "created_before" not in self.errors
            else None,
            "order": data.get("order") or "created",
        }


def _start_of(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


@team_page
def session_list(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    form = SessionFilterForm(request.GET)
    sessions = selectors.session_list_with_activity(team=team, **form.filters())
    page = Paginator(sessions, SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
    agents = selectors.session_agents(sessions=list(page))
    rows = [(session, [(name, agent_url(name)) for name in agents[session.pk]]) for session in page]
    filtered = any(request.GET.get(name) for name in SessionFilterForm.FILTER_NAMES)
    return render(
        request,
        "memory_app/session_list.html",
        {"team": team, "teams": teams, "form": form, "page": page, "rows": rows, "filtered": filtered},
    )


# --- session timeline ---------------------------------------------------------------------


# A remote image would tell its host who reads the conversation and when: the session page shows
# a placeholder until the reader asks for remote images with this query parameter.
REMOTE_IMAGES_PARAM = "remote_images"


def wants_remote_images(request: HttpRequest) -> bool:
    return request.GET.get(REMOTE_IMAGES_PARAM) == "1"


def remote_images_url(request: HttpRequest, *, show: bool) -> str:
    """This page with remote images on or off, the rest of its query (`after`, `latest`) kept."""
    query = request.GET.copy()
    query.pop(REMOTE_IMAGES_PARAM, None)
    if show:
        query[REMOTE_IMAGES_PARAM] = "1"
    return f"?{query.urlencode()}" if query else request.path


@dataclass
class MessageView:
    message: Message
    pieces: list[Piece]
    tool_calls: list[ToolCallView]
    extras: list[tuple[str, str]]
    answers: selectors.ToolCallRef | None = None  # for a tool result shown on its own: its call
    answers_name: str = ""


_EXTRA_FIELDS = (
    ("agent_calls", "Agent calls"),
    ("structured_data", "Structured data"),
    ("reasoning_details", "Reasoning"),
    ("meta", "Meta"),
)


def _attach(call: ToolCallView, result: Message) -> None:
    call.result = result
    call.result_pieces = content_pieces(result.content, result.images, role=result.role)


def build_timeline(*, session: Session, messages: list[Message], filtered: bool = False) -> list[MessageView]:
    """Messages in seq order, each tool result nested under the call it answers.

    A result pairs with the latest earlier call carrying its tool_call_id. Results that come
    after the page are fetched for the page's open calls; results whose call is on an
    earlier page stay in the timeline and say which call they answer. On a `filtered` page
    (a search) that call may also sit between the page's messages, left out by the filter.
    """
    if not messages:
        return []
    views: list[MessageView] = []
    open_calls: dict[str, ToolCallView] = {}
    for message in messages:
        if message.role == Message.Role.TOOL and message.tool_call_id in open_calls:
            _attach(open_calls.pop(message.tool_call_id), message)
            continue
        calls = [view for view in map(tool_call_view, message.tool_calls or []) if view is not None]
        open_calls.update((call.call_id, call) for call in calls)
        views.append(
            MessageView(
                message=message,
                pieces=content_pieces(message.content, message.images, role=message.role),
                tool_calls=calls,
                extras=[
                    (label, pretty_json(getattr(message, name)))
                    for name, label in _EXTRA_FIELDS
                    if getattr(message, name) not in (None, [], {})
                ],
            )
        )
    last_seq = messages[-1].seq
    later = selectors.tool_results_for_calls(
        session=session, call_ids=open_calls, after_seq=last_seq, through_seq=last_seq + TOOL_RESULT_LOOKAHEAD
    )
    for call_id, result in later.items():
        _attach(open_calls[call_id], result)

    orphans = [view for view in views if view.message.role == Message.Role.TOOL and view.message.tool_call_id]
    if orphans:
        refs = selectors.tool_calls_before(
            session=session,
            before_seq=messages[-1].seq if filtered else messages[0].seq,
            call_ids={view.message.tool_call_id for view in orphans if view.message.tool_call_id},
        )
        for view in orphans:
            view.answers = refs.get(view.message.tool_call_id or "")
            if view.answers is not None:
                function = view.answers.call.get("function")
                view.answers_name = str(function.get("name") or "?") if isinstance(function, dict) else "?"
    return views


def _team_session(team: Team, session_id: uuid.UUID) -> Session:
    return get_or_404(selectors.session_get, team=team, session_id=session_id)


class TimelineFilters(TypedDict):
    """`timeline_messages`'s filters, as the timeline's search sets them."""

    role: str | None
    tool: str | None
    text: str | None


class TimelineFilterForm(forms.Form):
    """The timeline's search: one role, the calls to and results of one tool, and text."""

    role = forms.ChoiceField(required=False, choices=[("", "Any role"), *Message.Role.choices], label="Role")
    tool = forms.CharField(required=False, max_length=200, label="Tool")
    q = forms.CharField(required=False, max_length=200, label="Text")

    def filters(self) -> TimelineFilters:
        """`timeline_messages` arguments from the fields that validated (an invalid one is ignored)."""
        self.is_valid()
        data = self.cleaned_data
        return {
            "role": data.get("role") or None,
            "tool": (data.get("tool") or "").strip() or None,
            "text": (data.get("q") or "").strip() or None,
        }


@dataclass(frozen=True)
class SessionFacts:
    """A kg session's latest facts and fact-extraction runs, with how many there are in all."""

    facts: list[Fact]
    fact_count: int
    runs: list[FactExtractionRun]
    run_count: int


FACTS_SHOWN = 10
EXTRACTION_RUNS_SHOWN = 5


def session_facts(*, team: Team, session: Session) -> SessionFacts:
    facts = fact_selectors.fact_list(team=team, session=session)
    runs = fact_selectors.fact_extraction_list(team=team, session=session)
    return SessionFacts(
        facts=list(facts.annotate(source_seq=F("source_message__seq"))[:FACTS_SHOWN]),
        fact_count=facts.count(),
        runs=list(runs[:EXTRACTION_RUNS_SHOWN]),
        run_count=runs.count(),
    )


_JUMP_TO_NUMBER = re.compile(r"^#?\s*(\d{1,12})$")


def jump_target(session: Session, at: str) -> int | str:
    """The message a reader asked to go to ("#1234", "1234", "2026-11-27 14:03" or a date): its
    seq, or why there is none."""
    if number := _JUMP_TO_NUMBER.match(at):
        return max(int(number.group(1)), 1)
    try:
        day = parse_date(at)
        moment = datetime.combine(day, time.min) if day else parse_datetime(at.replace(" ", "T", 1))
    except ValueError:  # well formed, but no such day or hour
        moment = None
    if moment is None:
        return f"“{at}” is neither a message number (#1234) nor a time (2026-11-27 14:03)."
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment)
    seq = selectors.message_seq_at(session=session, moment=moment)
    return seq if seq is not None else f"No message of this session was said at or after {at}."


def _jump(request: HttpRequest, session: Session, at: str) -> HttpResponse:
    """To the page that starts with the asked-for message, scrolled to it."""
    target = jump_target(session, at)
    keep = "&remote_images=1" if wants_remote_images(request) else ""
    if isinstance(target, str):
        flash.error(request, target)
        return redirect(reverse("dashboard:session", args=[session.pk]) + (f"?{keep[1:]}" if keep else ""))
    return redirect(reverse("dashboard:session", args=[session.pk]) + f"?after={target - 1}{keep}#m{target}")


@team_page
def session_detail(request: HttpRequest, session_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    session = _team_session(team, session_id)
    if at := request.GET.get("at", "").strip():
        return _jump(request, session, at)
    search = TimelineFilterForm(request.GET)
    found = search.filters()
    if request.GET.get("latest"):
        page = selectors.message_page(session=session, last=MESSAGES_PER_PAGE, **found)
    else:
        page = selectors.message_page(
            session=session, after=non_negative_int(request.GET.get("after")) or 0, limit=MESSAGES_PER_PAGE, **found
        )
    previous = (
        selectors.message_cursor_before(session=session, seq=page.messages[0].seq, limit=MESSAGES_PER_PAGE, **found)
        if page.messages
        else None
    )
    searching = any(found.values())
    totals = selectors.session_totals(session=session)
    on_page = {message.seq for message in page.messages}
    active = context.active_context_view(session=session, show_last=ACTIVE_CONTEXT_SHOWN)
    ledger = compaction_panels.session_ledger(session=session)
    remote_images = wants_remote_images(request)
    response = render(
        request,
        "memory_app/session_detail.html",
        {
            "team": team,
            "teams": teams,
            "session": session,
            "page": page,
            "previous_after": previous,
            "paged": previous is not None or page.next_after is not None,
            "timeline": build_timeline(session=session, messages=page.messages, filtered=searching),
            "totals": totals,
            "history_tokens": totals.message_tokens + session.system_prompt_tokens,
            "metadata": pretty_json(session.metadata) if session.metadata else "",
            "is_managed": session.memory_type == MemoryType.MANAGED_CONVERSATION,
            **compaction_panels.session_compaction_context(session, newest=ledger.newest),
            "served_contexts": usage_selectors.served_contexts(session=session, limit=SERVED_CONTEXTS_SHOWN),
            "covered_to": active.run.covered_to_seq if active.run else None,
            "active_context": active,
            "context_head": [_context_entry_view(entry, on_page) for entry in active.head],
            "context_messages": [_context_entry_view(entry, on_page) for entry in active.messages],
            "runs": compaction_panels.run_views(ledger, latest=active.run, on_page=on_page),
            "more_runs": ledger.more_runs,
            "recalls": search_panels.session_recalls(team=team, session=session),
            "remote_images": remote_images,
            "show_remote_images_url": remote_images_url(request, show=True),
            "hide_remote_images_url": remote_images_url(request, show=False),
            "search": search,
            "searching": searching,
            "matches": selectors.timeline_messages(session=session, **found).count() if searching else None,
            "tool_names": selectors.session_tool_names(session=session),
            "session_facts": session_facts(team=team, session=session)
            if session.memory_type == MemoryType.KG
            else None,
        },
    )
    # The reader asked: this one response may load http(s) images (memsite/csp.py).
    return csp.allow_remote_images(response) if remote_images else response


# --- the active context beside the timeline ----------------------------------------------------

ACTIVE_CONTEXT_SHOWN = 60
SERVED_CONTEXTS_SHOWN = 5


def _context_entry_view(entry: context.ContextPart, on_page: set[int]) -> CompactMessage:
    return compact_message(
        entry.message,
        on_page=on_page,
        seq=entry.seq,
        tokens=entry.token_count,
        kind=entry.kind,
        truncated=entry.truncated,
    )
