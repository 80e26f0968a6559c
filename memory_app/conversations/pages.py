"""Dashboard pages (server-rendered): the current team's sessions, each session's timeline,
active context and compactions, and the ops page.

Every session page is scoped to a team the logged-in user belongs to (TeamMembership); the
chosen team lives in the Django session and is re-checked against the memberships on each
request. The ops page shows the jobs of the teams the user administers (every team for a
superuser); curation rests on the same per-team admin role, never on the global staff flag,
which only opens the Django admin. Stored text reaches
templates as plain strings, so autoescaping covers all of it.
"""

from __future__ import annotations

import functools
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any, TypedDict
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.contrib import messages as flash
from django.core.paginator import Paginator
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from memory_app.agent_records.pages import agent_url
from memory_app.compaction import pages as compaction_pages
from memory_app.compaction import selectors as compaction_selectors
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import context, selectors
from memory_app.conversations.images import MAX_URL_LENGTH
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.dashboard.decorators import get_or_404, non_negative_int, team_page
from memory_app.dashboard.markdown import render_markdown
from memory_app.facts import selectors as fact_selectors
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.search import pages as search_pages
from memory_app.tenancy.models import Team
from memory_app.usage import selectors as usage_selectors
from memsite import csp
from memsite.errors import Conflict

SESSIONS_PER_PAGE = 25
# A page of a long session stays a few screens tall: tool output is folded, and 25 messages.
MESSAGES_PER_PAGE = 25
# A call near the end of a page still shows its result if it comes this many seqs later.
TOOL_RESULT_LOOKAHEAD = 200
# Strings longer than this are shown as they are rather than parsed as JSON for pretty-printing.
MAX_PRETTY_JSON_CHARS = 200_000


# --- the current team ---------------------------------------------------------------------


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


# Output longer than this is folded: a preview, and the whole of it one click away.
FOLD_LINES = 14
FOLD_CHARS = 1_500
PREVIEW_LINES = 8
PREVIEW_CHARS = 700
# Prose folds later than console output: an answer is read, a log is skimmed.
FOLD_MARKDOWN_LINES = 40
FOLD_MARKDOWN_CHARS = 5_000


@dataclass(frozen=True)
class Piece:
    """One renderable bit of message content. `kind` picks the template branch: "markdown" (a
    user's or assistant's text), "console" (a tool's text output, monospace as printed), "text"
    (other text), "json", "image", "note" or "refusal"."""

    kind: str
    text: str = ""
    src: str = ""

    @property
    def is_remote(self) -> bool:
        return self.src.startswith(("http://", "https://"))

    @property
    def host(self) -> str:
        """Who serves a remote image, for its placeholder (never the userinfo part of the URL)."""
        return (urlsplit(self.src).hostname or "") if self.is_remote else ""

    @functools.cached_property
    def line_count(self) -> int:
        return self.text.count("\n") + 1 if self.text else 0

    @property
    def is_long(self) -> bool:
        """Folded on the page: only a preview shows until the reader opens it."""
        if self.kind == "markdown":
            return self.line_count > FOLD_MARKDOWN_LINES or len(self.text) > FOLD_MARKDOWN_CHARS
        return self.kind in ("console", "json", "text") and (
            self.line_count > FOLD_LINES or len(self.text) > FOLD_CHARS
        )

    @property
    def preview(self) -> str:
        head = "\n".join(self.text.split("\n", PREVIEW_LINES)[:PREVIEW_LINES])
        return head[:PREVIEW_CHARS]

    @property
    def size_label(self) -> str:
        """What the fold hides, as read: "240 lines, 12.3 kB"."""
        size = len(self.text.encode())
        size_text = f"{size / 1000:.1f} kB" if size >= 1000 else f"{size} bytes"
        return f"{self.line_count:,} line{'s' if self.line_count != 1 else ''}, {size_text}"

    @functools.cached_property
    def html(self) -> SafeString:
        """A markdown piece rendered (escaped first: memory_app/dashboard/markdown.py)."""
        return render_markdown(self.text)

    @property
    def preview_html(self) -> SafeString:
        return render_markdown(self.preview)


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
class ToolCallView:
    call_id: str
    name: str
    arguments: str
    arguments_are_json: bool = True
    result: Message | None = None
    result_pieces: list[Piece] = field(default_factory=list)

    @property
    def argument_pieces(self) -> list[Piece]:
        """The arguments as one piece: indented JSON, or the raw text when it was not JSON."""
        if not self.arguments:
            return []
        return [Piece("json" if self.arguments_are_json else "console", text=self.arguments)]


@dataclass
class MessageView:
    message: Message
    pieces: list[Piece]
    tool_calls: list[ToolCallView]
    extras: list[tuple[str, str]]
    answers: selectors.ToolCallRef | None = None  # for a tool result shown on its own: its call
    answers_name: str = ""


_DATA_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*")
_UNSAFE_URL_CHARS = re.compile(r"[\x00-\x20\x7f]")


def image_piece(ref: object) -> Piece:
    """A thumbnail for a data: image URL or an http(s) URL; a note for anything else."""
    if isinstance(ref, str) and ref.startswith("data:"):
        # Base64 is 4 characters per 3 bytes; bigger than the API ever accepts is not inlined.
        if len(ref) > settings.MAX_IMAGE_BYTES * 4 // 3 + 100:
            return Piece("note", text="image too large to preview")
        if _DATA_IMAGE.fullmatch(ref):
            return Piece("image", src=ref)
        return Piece("note", text="image not shown: not a png, jpeg, gif or webp data URL")
    if isinstance(ref, str) and len(ref) <= MAX_URL_LENGTH and not _UNSAFE_URL_CHARS.search(ref):
        parts = urlsplit(ref)
        if parts.scheme in ("http", "https") and parts.netloc:
            return Piece("image", src=ref)
    return Piece("note", text="image not shown: only data: images and http(s) URLs are displayed")


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


# How the text of a message of each role is shown; other roles (and callers that name none) get plain text.
TEXT_KIND_BY_ROLE = {
    Message.Role.USER: "markdown",
    Message.Role.ASSISTANT: "markdown",
    Message.Role.SYSTEM: "markdown",
    Message.Role.TOOL: "console",
}


def _text_piece(text: str, text_kind: str = "text") -> Piece:
    """Text, or pretty JSON when the text is a JSON object/array (typical of tool results)."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and len(stripped) <= MAX_PRETTY_JSON_CHARS:
        try:
            return Piece("json", text=pretty_json(json.loads(stripped)))
        except ValueError:
            pass
    return Piece(text_kind, text=text)


def _part_pieces(part: Any, text_kind: str = "text") -> list[Piece]:
    if not isinstance(part, dict):
        return [Piece("json", text=pretty_json(part))]
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return [_text_piece(part["text"], text_kind)]
    if kind == "refusal":
        return [Piece("refusal", text=str(part.get("refusal", "")))]
    if kind == "image_url":
        image = part.get("image_url")
        return [image_piece(image.get("url") if isinstance(image, dict) else image)]
    if kind == "input_audio":
        audio = part.get("input_audio")
        audio = audio if isinstance(audio, dict) else {}
        return [Piece("note", text=f"audio ({audio.get('format') or 'unknown format'})")]
    if kind == "file":
        file = part.get("file")
        file = file if isinstance(file, dict) else {}
        return [Piece("note", text=f"file: {file.get('filename') or file.get('file_id') or 'unnamed'}")]
    return [Piece("json", text=pretty_json(part))]


def content_pieces(content: Any, images: Any = None, *, role: str | None = None) -> list[Piece]:
    """A message's content (text, content parts or a JSON object) and its images, ready to render.

    With the message's `role`, text becomes markdown (people and models write it) or console
    output (a tool printed it); without one it stays plain text."""
    text_kind = TEXT_KIND_BY_ROLE.get(role, "text") if role else "text"  # type: ignore[call-overload]
    pieces: list[Piece] = []
    if isinstance(content, str):
        if content:
            pieces.append(_text_piece(content, text_kind))
    elif isinstance(content, list):
        for part in content:
            pieces.extend(_part_pieces(part, text_kind))
    elif content is not None:
        pieces.append(Piece("json", text=pretty_json(content)))
    if isinstance(images, list):
        pieces.extend(image_piece(ref) for ref in images)
    return pieces


def _pretty_arguments(arguments: Any) -> tuple[str, bool]:
    """A call's arguments as indented JSON, and whether they were JSON at all (OpenAI sends a
    JSON string; a model can write an invalid one, which is shown as written)."""
    if isinstance(arguments, str):
        if len(arguments) > MAX_PRETTY_JSON_CHARS:
            return arguments, False
        try:
            return pretty_json(json.loads(arguments)), True
        except ValueError:
            return arguments, False
    return pretty_json(arguments), True


def _tool_call_view(call: Any) -> ToolCallView | None:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        return None
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    arguments, is_json = _pretty_arguments(function.get("arguments"))
    return ToolCallView(
        call_id=call["id"],
        name=str(function.get("name") or "?"),
        arguments=arguments,
        arguments_are_json=is_json,
    )


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
        calls = [view for view in map(_tool_call_view, message.tool_calls or []) if view is not None]
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


@team_page
def session_detail(request: HttpRequest, session_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    session = _team_session(team, session_id)
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
    ledger = compaction_selectors.compaction_ledger(
        session=session, limit=RUNS_SHOWN, messages_per_run=DIFF_MESSAGES_SHOWN
    )
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
            **compaction_pages.session_compaction_context(session, newest=ledger.newest),
            "served_contexts": usage_selectors.served_contexts(session=session, limit=SERVED_CONTEXTS_SHOWN),
            "covered_to": active.run.covered_to_seq if active.run else None,
            "active_context": active,
            "context_head": [_context_entry_view(entry, on_page) for entry in active.head],
            "context_messages": [_context_entry_view(entry, on_page) for entry in active.messages],
            "runs": [_run_view(item, latest=active.run, on_page=on_page) for item in ledger.runs],
            "more_runs": ledger.more_runs,
            "recalls": search_pages.session_recalls(team=team, session=session),
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


# --- compaction: token gauge, active context, ledger, and the two actions ---------------------

ACTIVE_CONTEXT_SHOWN = 60
SERVED_CONTEXTS_SHOWN = 5
RUNS_SHOWN = 10
DIFF_MESSAGES_SHOWN = 40


@dataclass(frozen=True)
class CompactMessage:
    """A message in the short form of the active-context pane and the compaction diffs."""

    role: str
    pieces: list[Piece]
    calls: list[ToolCallView]
    name: str = ""
    tool_call_id: str = ""
    seq: int | None = None
    href: str = ""  # where the raw message is in the timeline
    tokens: int | None = None
    kind: str = "message"  # ContextEntry.kind, or "raw" in a diff
    truncated: bool = False


_COMPACT_FIELDS = ("role", "content", "images", "tool_calls", "tool_call_id", "name")


def _seq_href(seq: int, on_page: set[int]) -> str:
    return f"#m{seq}" if seq in on_page else f"?after={seq - 1}#m{seq}"


def compact_message(data: dict[str, Any], *, on_page: set[int], seq: int | None = None, **extra: Any) -> CompactMessage:
    role = str(data.get("role") or "?")
    return CompactMessage(
        role=role,
        # Rendered as the timeline renders it: markdown prose, console tool output, folded when long.
        pieces=content_pieces(data.get("content"), data.get("images"), role=role),
        calls=[view for view in map(_tool_call_view, data.get("tool_calls") or []) if view is not None],
        name=str(data.get("name") or ""),
        tool_call_id=str(data.get("tool_call_id") or ""),
        seq=seq,
        href=_seq_href(seq, on_page) if seq is not None else "",
        **extra,
    )


def _context_entry_view(entry: context.ContextPart, on_page: set[int]) -> CompactMessage:
    return compact_message(
        entry.message,
        on_page=on_page,
        seq=entry.seq,
        tokens=entry.token_count,
        kind=entry.kind,
        truncated=entry.truncated,
    )


@dataclass(frozen=True)
class Change:
    """A before -> after figure as a signed percentage (a summary of a small range can grow)."""

    percent: int

    @classmethod
    def between(cls, before: int, after: int) -> Change | None:
        return cls(round(100 * (after - before) / before)) if before else None

    @property
    def label(self) -> str:
        sign = "+" if self.percent > 0 else "\N{MINUS SIGN}" if self.percent < 0 else "\N{PLUS-MINUS SIGN}"
        return f"{sign}{abs(self.percent)}%"

    @property
    def kind(self) -> str:
        return "growth" if self.percent > 0 else "saving"


@dataclass(frozen=True)
class RunView:
    run: CompactionRun
    before: list[CompactMessage]  # raw messages of its range (the first DIFF_MESSAGES_SHOWN)
    more_before: bool
    after: list[CompactMessage]  # the summary that stands in for them
    revertable: bool  # the latest done run: the only one compaction_revert accepts
    first_seq: int | None

    @property
    def token_change(self) -> Change | None:
        return Change.between(self.run.pre_tokens, self.run.post_tokens)

    @property
    def byte_change(self) -> Change | None:
        return Change.between(self.run.pre_bytes, self.run.post_bytes)


def _run_view(item: compaction_selectors.LedgerRun, *, latest: CompactionRun | None, on_page: set[int]) -> RunView:
    run = item.run
    return RunView(
        run=run,
        before=[
            compact_message(
                {name: getattr(message, name) for name in _COMPACT_FIELDS},
                on_page=on_page,
                seq=message.seq,
                tokens=message.token_count,
                kind="raw",
            )
            for message in item.covered
        ],
        more_before=item.more_covered,
        after=[
            compact_message(
                message,
                on_page=on_page,
                seq=message.get("seq") if message.get("kind") == "instruction" else None,
                tokens=message.get("token_count"),
                kind="instruction" if message.get("kind") == "instruction" else "summary",
            )
            for message in run.summary or []
            if isinstance(message, dict)
        ],
        revertable=latest is not None and latest.pk == run.pk,
        first_seq=run.covered_from_seq + 1 if run.covered_to_seq is not None else None,
    )


def _back_to_compactions(session: Session) -> HttpResponse:
    return redirect(reverse("dashboard:session", args=[session.pk]) + "#compactions")


@team_page
@require_POST
def session_compaction_revert(
    request: HttpRequest, session_id: uuid.UUID, run_id: uuid.UUID, *, team: Team, teams: list[Team]
) -> HttpResponse:
    """Undo a compaction: the context goes back to the raw messages (or the previous summary)."""
    session = _team_session(team, session_id)
    run = get_or_404(compaction_selectors.compaction_run_get, session=session, run_id=run_id)
    try:
        compaction.compaction_revert(run=run)
    except Conflict as exc:
        flash.error(request, exc.detail)
    else:
        flash.success(
            request,
            "Compaction reverted: its summary no longer stands in for those messages. Automatic compaction "
            "waits for new messages (Compact now still works).",
        )
    return _back_to_compactions(session)


# --- ops: the job queues of the teams the user administers -----------------------------------------------
