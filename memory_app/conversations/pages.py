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

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.contrib import messages as flash
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from memory_app.compaction import selectors as compaction_selectors
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import context, selectors
from memory_app.conversations.images import MAX_URL_LENGTH
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.dashboard.decorators import get_or_404, non_negative_int, team_page
from memory_app.search import pages as search_pages
from memory_app.tenancy.models import Team
from memsite import csp
from memsite.errors import Conflict

SESSIONS_PER_PAGE = 25
MESSAGES_PER_PAGE = 100
# A call near the end of a page still shows its result if it comes this many seqs later.
TOOL_RESULT_LOOKAHEAD = 200
# Strings longer than this are shown as they are rather than parsed as JSON for pretty-printing.
MAX_PRETTY_JSON_CHARS = 200_000


# --- the current team ---------------------------------------------------------------------


# --- sessions list ------------------------------------------------------------------------


class SessionFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    memory_type = forms.ChoiceField(required=False, choices=[("", "Any type"), *MemoryType.choices], label="Type")
    created_after = forms.DateField(
        required=False, label="Created from", widget=forms.DateInput(attrs={"type": "date"})
    )
    created_before = forms.DateField(required=False, label="to", widget=forms.DateInput(attrs={"type": "date"}))
    order = forms.ChoiceField(
        required=False, choices=[("created", "Newest first"), ("activity", "Recent activity")], label="Sort"
    )

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
    filtered = any(request.GET.get(name) for name in ("q", "memory_type", "created_after", "created_before"))
    return render(
        request,
        "memory_app/session_list.html",
        {"team": team, "teams": teams, "form": form, "page": page, "filtered": filtered},
    )


# --- session timeline ---------------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """One renderable bit of message content. `kind` picks the template branch."""

    kind: str  # "text" | "json" | "image" | "note" | "refusal"
    text: str = ""
    src: str = ""

    @property
    def is_remote(self) -> bool:
        return self.src.startswith(("http://", "https://"))

    @property
    def host(self) -> str:
        """Who serves a remote image, for its placeholder (never the userinfo part of the URL)."""
        return (urlsplit(self.src).hostname or "") if self.is_remote else ""


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
    result: Message | None = None
    result_pieces: list[Piece] = field(default_factory=list)


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


def _text_piece(text: str) -> Piece:
    """Text, or pretty JSON when the text is a JSON object/array (typical of tool results)."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and len(stripped) <= MAX_PRETTY_JSON_CHARS:
        try:
            return Piece("json", text=pretty_json(json.loads(stripped)))
        except ValueError:
            pass
    return Piece("text", text=text)


def _part_pieces(part: Any) -> list[Piece]:
    if not isinstance(part, dict):
        return [Piece("json", text=pretty_json(part))]
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return [_text_piece(part["text"])]
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


def content_pieces(content: Any, images: Any = None) -> list[Piece]:
    """A message's content (text, content parts or a JSON object) and its images, ready to render."""
    pieces: list[Piece] = []
    if isinstance(content, str):
        if content:
            pieces.append(_text_piece(content))
    elif isinstance(content, list):
        for part in content:
            pieces.extend(_part_pieces(part))
    elif content is not None:
        pieces.append(Piece("json", text=pretty_json(content)))
    if isinstance(images, list):
        pieces.extend(image_piece(ref) for ref in images)
    return pieces


def _pretty_arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            return pretty_json(json.loads(arguments))
        except ValueError:
            return arguments
    return pretty_json(arguments)


def _tool_call_view(call: Any) -> ToolCallView | None:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        return None
    function = call.get("function")
    function = function if isinstance(function, dict) else {}
    return ToolCallView(
        call_id=call["id"],
        name=str(function.get("name") or "?"),
        arguments=_pretty_arguments(function.get("arguments")),
    )


_EXTRA_FIELDS = (
    ("agent_calls", "Agent calls"),
    ("structured_data", "Structured data"),
    ("reasoning_details", "Reasoning"),
    ("meta", "Meta"),
)


def _attach(call: ToolCallView, result: Message) -> None:
    call.result = result
    call.result_pieces = content_pieces(result.content, result.images)


def build_timeline(*, session: Session, messages: list[Message]) -> list[MessageView]:
    """Messages in seq order, each tool result nested under the call it answers.

    A result pairs with the latest earlier call carrying its tool_call_id. Results that come
    after the page are fetched for the page's open calls; results whose call is on an
    earlier page stay in the timeline and say which call they answer.
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
                pieces=content_pieces(message.content, message.images),
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
            before_seq=messages[0].seq,
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


@team_page
def session_detail(request: HttpRequest, session_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    session = _team_session(team, session_id)
    if request.GET.get("latest"):
        page = selectors.message_page(session=session, last=MESSAGES_PER_PAGE)
    else:
        page = selectors.message_page(
            session=session, after=non_negative_int(request.GET.get("after")) or 0, limit=MESSAGES_PER_PAGE
        )
    previous = (
        selectors.message_cursor_before(session=session, seq=page.messages[0].seq, limit=MESSAGES_PER_PAGE)
        if page.messages
        else None
    )
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
            "timeline": build_timeline(session=session, messages=page.messages),
            "totals": totals,
            "history_tokens": totals.message_tokens + session.system_prompt_tokens,
            "metadata": pretty_json(session.metadata) if session.metadata else "",
            "is_managed": session.memory_type == MemoryType.MANAGED_CONVERSATION,
            "gauge": token_gauge(session),
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
        },
    )
    # The reader asked: this one response may load http(s) images (memsite/csp.py).
    return csp.allow_remote_images(response) if remote_images else response


# --- compaction: token gauge, active context, ledger, and the two actions ---------------------

ACTIVE_CONTEXT_SHOWN = 60
RUNS_SHOWN = 10
DIFF_MESSAGES_SHOWN = 40


@dataclass(frozen=True)
class TokenGauge:
    """The session's active context (Session.active_tokens) against its threshold."""

    tokens: int
    threshold: int | None
    target: int | None  # what a compaction aims to bring it down to
    # Why "Compact now" would do nothing (None: it is offered), and why no compaction is queued
    # automatically although one is due (a revert's hold, runs without progress).
    blocker: str | None = None
    hold: str | None = None

    @property
    def percent(self) -> float:
        return 100 * self.tokens / self.threshold if self.threshold else 0.0

    @property
    def bar_percent(self) -> float:
        return min(self.percent, 100.0)

    @property
    def target_percent(self) -> float:
        return 100 * self.target / self.threshold if self.threshold and self.target else 0.0

    @property
    def level(self) -> str:
        return "over" if self.percent >= 100 else "high" if self.percent >= 80 else "ok"

    @property
    def figures(self) -> dict[str, str]:
        """The numbers as read: 150,000 rather than 150000."""
        return {name: f"{value:,}" for name, value in vars(self).items() if isinstance(value, int)}


def token_gauge(session: Session) -> TokenGauge:
    if session.memory_type != MemoryType.MANAGED_CONVERSATION:
        return TokenGauge(tokens=session.active_tokens, threshold=None, target=None)
    config = compaction.session_config(session)
    if not config.active_context.enabled:
        return TokenGauge(tokens=session.active_tokens, threshold=None, target=None)
    blocker = compaction.compaction_blocker(session=session)
    over = session.active_tokens > config.threshold_tokens
    hold = compaction.auto_compaction_hold(session) if over and blocker is None else None
    return TokenGauge(
        tokens=session.active_tokens,
        threshold=config.threshold_tokens,
        target=config.compaction_target_tokens,
        blocker=blocker,
        hold=hold,
    )


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
    return CompactMessage(
        role=str(data.get("role") or "?"),
        pieces=content_pieces(data.get("content"), data.get("images")),
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
def session_compact(request: HttpRequest, session_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    """Queue a manual compaction now (the API's POST .../compact/)."""
    session = _team_session(team, session_id)
    try:
        run, created = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    except Conflict as exc:
        flash.error(request, exc.detail)
        return _back_to_compactions(session)
    if created:
        flash.success(request, "Compaction queued: a worker will summarise the older messages shortly.")
    else:
        flash.info(request, f"A compaction is already {run.status} for this session; nothing new was queued.")
    return _back_to_compactions(session)


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
