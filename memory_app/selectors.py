"""Reads of conversation memory that are more than a one-line filter."""

from __future__ import annotations

import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, F, Max, Min, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from memory_app import context as ctx
from memory_app import counting, memory_config, tokens
from memory_app.models import CompactionRun, MemoryEvent, MemoryType, Message, Session, Team
from memory_client.openai_format import to_openai_message
from memsite.errors import NotFound

EXPORT_FIELDS = (
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "agent_calls",
    "structured_data",
    "reasoning_details",
    "images",
    "send_from",
    "send_to",
    "meta",
)
_CONTEXT_FIELDS = ("seq", "role", "content", "name", "tool_calls", "tool_call_id", "images", "token_count")


def session_get(*, team: Team, session_id: uuid.UUID | str) -> Session:
    """The team's session, or NotFound: another team's id is indistinguishable from none."""
    try:
        return Session.objects.get(team=team, pk=session_id)
    except (Session.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound("Session not found.") from exc


def session_list(
    *,
    team: Team,
    external_id: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    search: str | None = None,
    memory_type: str | None = None,
) -> QuerySet[Session]:
    sessions = Session.objects.filter(team=team)
    if external_id:
        sessions = sessions.filter(external_id=external_id)
    if created_after:
        sessions = sessions.filter(created_at__gte=created_after)
    if created_before:
        sessions = sessions.filter(created_at__lt=created_before)
    if memory_type:
        sessions = sessions.filter(memory_type=memory_type)
    if search:
        sessions = sessions.filter(Q(external_id__icontains=search) | Q(system_prompt__icontains=search))
    # A correlated count is evaluated only for the rows of the page, where a join + GROUP BY
    # would aggregate every message of the team before the LIMIT applies.
    counts = (
        Message.objects.filter(session=OuterRef("pk")).order_by().values("session").annotate(n=Count("pk")).values("n")
    )
    return sessions.annotate(message_count=Coalesce(Subquery(counts), 0)).order_by("-created_at", "-pk")


def message_get(*, session: Session, message_id: uuid.UUID | str) -> Message:
    try:
        return Message.objects.get(session=session, pk=message_id)
    except (Message.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound("Message not found.") from exc


@dataclass(frozen=True)
class MessagePage:
    messages: list[Message]
    next_after: int | None


def message_page(
    *,
    session: Session,
    role: str | None = None,
    after: int | None = None,
    limit: int = 100,
    last: int | None = None,
) -> MessagePage:
    """A page of messages in seq order: `last` N, or up to `limit` after seq `after`."""
    messages = Message.objects.filter(session=session)
    if role:
        messages = messages.filter(role=role)
    if last is not None:
        newest = list(messages.order_by("-seq")[:last])
        return MessagePage(messages=newest[::-1], next_after=None)
    if after is not None:
        messages = messages.filter(seq__gt=after)
    page = list(messages.order_by("seq")[: limit + 1])
    has_more = len(page) > limit
    page = page[:limit]
    return MessagePage(messages=page, next_after=page[-1].seq if has_more else None)


@dataclass(frozen=True)
class Context:
    messages: list[dict[str, Any]]
    token_count: int


def latest_done_run(session_id: Any) -> CompactionRun | None:
    """The compaction whose summary the active context starts from (reverted ones excluded)."""
    return (
        CompactionRun.objects.filter(session_id=session_id, status=CompactionRun.Status.DONE)
        .order_by("-covered_to_seq")
        .first()
    )


def _newest(session: Session, *, after: int, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` newest messages with seq > after, oldest first (reads the window only)."""
    rows = Message.objects.filter(session=session, seq__gt=after).order_by("-seq").values(*_CONTEXT_FIELDS)[:limit]
    return list(rows)[::-1]


def _first_user(session: Session) -> dict[str, Any] | None:
    return (
        Message.objects.filter(session=session, role=Message.Role.USER).order_by("seq").values(*_CONTEXT_FIELDS).first()
    )


def _latest_user(session: Session) -> dict[str, Any] | None:
    return (
        Message.objects.filter(session=session, role=Message.Role.USER)
        .order_by("-seq")
        .values(*_CONTEXT_FIELDS)
        .first()
    )


def _managed_pieces(
    session: Session, config: memory_config.ManagedMemoryConfig, limit: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int | None]:
    """(head, tail, budget) of a managed session's active context.

    head: the original instruction (when configured and covered) and the latest
    summary; tail: the messages after the summary, tool outputs truncated; budget:
    the token cap the tail is packed into, if any.
    """
    policy = config.active_context
    run = latest_done_run(session.pk) if policy.mode == "compaction" else None
    after = run.covered_to_seq or 0 if run else 0
    head: list[dict[str, Any]] = []
    if run is not None:
        instruction = _first_user(session) if policy.summarization.include_original_instruction else None
        if instruction is not None and instruction["seq"] <= after:
            head.append(instruction)
        head.extend(run.summary or [])
    tail = _newest(session, after=after, limit=limit)
    if policy.uses("tool_truncation") and policy.tool_truncation.enabled:
        truncation = policy.tool_truncation
        tail, _ = ctx.truncate_tool_outputs(
            tail,
            max_tokens=truncation.max_tool_message_tokens,
            grace_rounds=truncation.grace_recent_messages,
            marker=truncation.append_marker,
            truncate=counting.truncate,
            count=counting.message_tokens,
        )
    budget: int | None = None
    if policy.mode == "sliding_window":
        budget = int(config.threshold_tokens * (1 - policy.sliding_window.headroom_percent))
    elif policy.uses("backward_packing"):
        total = sum(m["token_count"] for m in head + tail) + session.system_prompt_tokens
        if total > config.threshold_tokens:
            budget = config.compaction_target_tokens
    return head, tail, budget


def context_build(*, session: Session, last: int | None = None, max_tokens: int | None = None) -> Context:
    """The message array for an LLM: system prompt, then the session's active context.

    A conversation_history session gives its `last` (default MEMSITE_CONTEXT_WINDOW)
    messages; a managed session gives its latest summary and the messages after it
    (seed 003's active context, derived: stored messages are never rewritten). Either is
    packed newest-first into `max_tokens`, keeps tool calls with their results, and holds
    at least one user message. Only the window is read, so the cost follows the window,
    not the history.
    """
    head: list[dict[str, Any]] = []
    budget: int | None = None
    config = memory_config.parse_config(session.memory_config or {})
    if session.memory_type == MemoryType.MANAGED_CONVERSATION and config.active_context.enabled:
        head, tail, budget = _managed_pieces(session, config, last or settings.MAX_CONTEXT_MESSAGES)
    else:
        tail = _newest(session, after=0, limit=last or settings.DEFAULT_CONTEXT_WINDOW)
    if max_tokens is not None:
        budget = max_tokens if budget is None else min(budget, max_tokens)
    system_tokens = session.system_prompt_tokens
    if budget is not None:
        fixed = system_tokens + sum(m["token_count"] for m in head) + tokens.REPLY_PRIMING_TOKENS
        tail = ctx.pack_backward(tail, max(budget - fixed, 0))
    else:
        tail = ctx.complete_tool_turns(tail)
    body = head + tail
    if not any(m["role"] == Message.Role.USER for m in body):
        body = ctx.ensure_user_message(body, _latest_user(session))

    out: list[dict[str, Any]] = []
    if session.system_prompt:
        out.append({"role": "system", "content": session.system_prompt})
    out.extend(to_openai_message(message) for message in body)
    total = tokens.count_request([system_tokens, *(m["token_count"] for m in body)])
    return Context(messages=out, token_count=total)


def message_export_dict(message: Message) -> dict[str, Any]:
    """A message in the export format: its stored fields, nulls omitted."""
    data: dict[str, Any] = {"message_id": str(message.pk)}
    for field in EXPORT_FIELDS:
        value = getattr(message, field)
        if value is not None:
            data[field] = value
    return data


def session_export(*, session: Session) -> dict[str, Any]:
    """MemoryManager.save_to_file's document, lossless: import(export(s)) == s."""
    messages: list[dict[str, Any]] = []
    if session.system_prompt:
        messages.append({"role": "system", "content": session.system_prompt})
    messages.extend(
        message_export_dict(m) for m in Message.objects.filter(session=session).order_by("seq").iterator(2000)
    )
    document: dict[str, Any] = {
        "memory_type": session.memory_type,
        "messages": messages,
        "timestamp": time.time(),
        "session": {"external_id": session.external_id, "metadata": session.metadata},
    }
    if session.additional_state:
        document["additional_state"] = session.additional_state
    return document


# --- dashboard reads ----------------------------------------------------------------------


def team_list_for_user(*, user: Any) -> QuerySet[Team]:
    """The teams a browser user belongs to: the only teams the dashboard may show them."""
    return Team.objects.filter(members=user).order_by("name")


def session_list_with_activity(*, team: Team, order: str = "created", **filters: Any) -> QuerySet[Session]:
    """`session_list` plus `last_activity`: every append bumps the session's `updated_at`."""
    sessions = session_list(team=team, **filters).annotate(last_activity=F("updated_at"))
    if order == "activity":
        return sessions.order_by("-last_activity", "-pk")
    return sessions


@dataclass(frozen=True)
class SessionTotals:
    message_count: int
    message_tokens: int
    first_seq: int | None
    last_seq: int | None


def session_totals(*, session: Session) -> SessionTotals:
    totals = Message.objects.filter(session=session).aggregate(
        count=Count("pk"), tokens=Sum("token_count"), first=Min("seq"), last=Max("seq")
    )
    return SessionTotals(
        message_count=totals["count"],
        message_tokens=totals["tokens"] or 0,
        first_seq=totals["first"],
        last_seq=totals["last"],
    )


def message_cursor_before(*, session: Session, seq: int, limit: int) -> int | None:
    """The `after` cursor of the page of `limit` messages that ends just before `seq`.

    None when nothing precedes `seq`; 0 when the previous page is the first one.
    """
    seqs = Message.objects.filter(session=session, seq__lt=seq).order_by("-seq").values_list("seq", flat=True)
    earlier = list(seqs[: limit + 1])
    if not earlier:
        return None
    if len(earlier) <= limit:
        return 0
    return earlier[limit]


def tool_results_for_calls(
    *, session: Session, call_ids: Collection[str], after_seq: int, through_seq: int
) -> dict[str, Message]:
    """Tool messages answering `call_ids` with a seq in (after_seq, through_seq], by call id."""
    if not call_ids:
        return {}
    results = Message.objects.filter(
        session=session,
        role=Message.Role.TOOL,
        tool_call_id__in=list(call_ids),
        seq__gt=after_seq,
        seq__lte=through_seq,
    ).order_by("seq")
    found: dict[str, Message] = {}
    for message in results:
        found.setdefault(message.tool_call_id or "", message)
    return found


@dataclass(frozen=True)
class ToolCallRef:
    """Where a tool call was made: the calling assistant message's seq and the call itself."""

    seq: int
    call: dict[str, Any]


def tool_calls_before(*, session: Session, before_seq: int, call_ids: Collection[str]) -> dict[str, ToolCallRef]:
    """The calls `call_ids` answer, looked up among the recent tool-calling messages before `before_seq`.

    Reads at most the same lookback the write path checks results against (partial index).
    """
    from memory_app.services import TOOL_CALL_LOOKBACK  # lazy: services may one day import selectors

    wanted = set(call_ids)
    if not wanted:
        return {}
    callers = (
        Message.objects.filter(
            session=session, role=Message.Role.ASSISTANT, tool_calls__isnull=False, seq__lt=before_seq
        )
        .order_by("-seq")
        .values_list("seq", "tool_calls")[:TOOL_CALL_LOOKBACK]
    )
    found: dict[str, ToolCallRef] = {}
    for seq, calls in callers:
        for call in calls or []:
            call_id = call.get("id") if isinstance(call, dict) else None
            if call_id in wanted and call_id not in found:
                found[call_id] = ToolCallRef(seq=seq, call=call)
    return found


def compaction_runs(*, session: Session) -> QuerySet[CompactionRun]:
    return CompactionRun.objects.filter(session=session).order_by("-created_at")


def compaction_run_get(*, session: Session, run_id: uuid.UUID | str) -> CompactionRun:
    try:
        return CompactionRun.objects.get(session=session, pk=run_id)
    except (CompactionRun.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound("Compaction run not found.") from exc


def event_page(*, team: Team, session: Session | None, after: int | None, limit: int) -> list[MemoryEvent]:
    """The team's events oldest first (optionally one session's), from cursor `after`."""
    events = MemoryEvent.objects.filter(team=team)
    if session is not None:
        events = events.filter(session=session)
    if after is not None:
        events = events.filter(pk__gt=after)
    return list(events.order_by("pk")[:limit])
