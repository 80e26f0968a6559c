"""Reads of conversation memory that are more than a one-line filter."""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Count, F, Max, Min, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models import Field as ModelField
from django.db.models.base import Model
from django.db.models.functions import Coalesce

from memory_app.compaction import config as memory_config
from memory_app.compaction import processors as ctx
from memory_app.compaction.models import CompactionRun
from memory_app.compaction.selectors import latest_done_run
from memory_app.conversations import counting, tokens
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.tenancy.models import Team
from memory_client.vocabulary.messages import MESSAGE_FIELDS, to_openai_message
from memsite.errors import InvalidInput, NotFound

EXPORT_FIELDS = MESSAGE_FIELDS


def concrete_field(model: type[Model], name: str) -> ModelField:
    """The field `name` of `model`, which hand-written SQL reads: a field, not a reverse relation."""
    field = model._meta.get_field(name)
    if not isinstance(field, ModelField):
        raise TypeError(f"{model.__name__}.{name} is a relation, not a field with a column")
    return field


def column(field: ModelField) -> str:
    """A concrete field's column: Django sets one on every concrete field (the stub says `str | None`)."""
    if field.column is None:
        raise TypeError(f"{field} has no column")
    return field.column


# What a context (and a compaction reading the same messages) needs of a message row.
CONTEXT_FIELDS = ("seq", "role", "content", "name", "tool_calls", "tool_call_id", "images", "token_count")


def _select(sql: str, params: Sequence[Any], fields: Sequence[ModelField]) -> list[list[Any]]:
    """The rows of a hand-written SELECT of `fields`, converted as the ORM converts them.

    For the small reads every context or session request makes: building those queries
    through the ORM took longer than PostgreSQL takes to run them.
    """
    converters = [
        (
            index,
            field.cached_col,
            connection.ops.get_db_converters(field.cached_col) + field.get_db_converters(connection),
        )
        for index, field in enumerate(fields)
    ]
    converters = [entry for entry in converters if entry[2]]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = [list(row) for row in cursor.fetchall()]
    for row in rows:
        for index, column, functions in converters:
            for convert in functions:
                row[index] = convert(row[index], column, connection)
    return rows


@functools.cache
def _session_sql() -> str:
    columns = ", ".join(connection.ops.quote_name(column(field)) for field in Session._meta.concrete_fields)
    return f"SELECT {columns} FROM {connection.ops.quote_name(Session._meta.db_table)} WHERE id = %s AND team_id = %s"  # noqa: S608


def session_get(*, team: Team, session_id: uuid.UUID | str) -> Session:
    """The team's session, or NotFound: another team's id is indistinguishable from none."""
    try:
        pk = Session._meta.pk.get_db_prep_value(session_id, connection)
    except (ValueError, TypeError) as exc:
        raise NotFound("Session not found.") from exc
    fields = Session._meta.concrete_fields
    rows = _select(_session_sql(), [pk, team.pk], fields)
    if not rows:
        raise NotFound("Session not found.")
    return Session.from_db(connection.alias, [field.attname for field in fields], rows[0])


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


@functools.cache
def _newest_sql() -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(quote(column(concrete_field(Message, name))) for name in CONTEXT_FIELDS)
    return (
        f"SELECT {columns} FROM {quote(Message._meta.db_table)} "  # noqa: S608
        "WHERE session_id = %s AND seq > %s ORDER BY seq DESC LIMIT %s"
    )


def _newest(session: Session, *, after: int, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` newest messages with seq > after, oldest first (reads the window only,
    backwards along the (session, seq) index)."""
    fields = [concrete_field(Message, name) for name in CONTEXT_FIELDS]
    session_pk = Session._meta.pk.get_db_prep_value(session.pk, connection)
    rows = _select(_newest_sql(), [session_pk, after, limit], fields)
    return [dict(zip(CONTEXT_FIELDS, row, strict=True)) for row in reversed(rows)]


def _first_user(session: Session) -> dict[str, Any] | None:
    return (
        Message.objects.filter(session=session, role=Message.Role.USER).order_by("seq").values(*CONTEXT_FIELDS).first()
    )


def _has_user(messages: Sequence[dict[str, Any]]) -> bool:
    return any(m["role"] == Message.Role.USER for m in messages)


def _latest_user(session: Session) -> dict[str, Any] | None:
    return (
        Message.objects.filter(session=session, role=Message.Role.USER).order_by("-seq").values(*CONTEXT_FIELDS).first()
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
    (the managed context, derived: stored messages are never rewritten). Either is
    packed newest-first into `max_tokens`, keeps tool calls with their results, and holds
    at least one user message. Only the window is read, so the cost follows the window,
    not the history.
    """
    head: list[dict[str, Any]] = []
    policy_budget: int | None = None
    grace = 0
    # Only a managed session's context depends on its settings (parsing them is not free).
    managed = session.memory_type == MemoryType.MANAGED_CONVERSATION
    config = memory_config.parse_config(session.memory_config or {}) if managed else None
    if config is not None and config.active_context.enabled:
        head, tail, policy_budget = _managed_pieces(session, config, last or settings.MAX_CONTEXT_MESSAGES)
        grace = config.active_context.backward_packing.grace_recent_messages
    else:
        tail = _newest(session, after=0, limit=last or settings.DEFAULT_CONTEXT_WINDOW)
    system_tokens = session.system_prompt_tokens
    fixed = system_tokens + sum(m["token_count"] for m in head) + tokens.REPLY_PRIMING_TOKENS
    if policy_budget is not None:
        # The session's own packing never drops its newest rounds (the managed memory's backward
        # packing grace): the model must see what it is answering.
        kept = ctx.complete_tool_turns(tail[ctx.protected_tail_start(tail, grace) :])
        packed = ctx.pack_backward(tail, max(policy_budget - fixed, 0))
        tail = packed if len(packed) >= len(kept) else kept
    fallback: dict[str, Any] | None = None
    if max_tokens is not None:
        room = max(max_tokens - fixed, 0)
        packed = ctx.pack_backward(tail, room)
        if not _has_user(head + packed) and (fallback := _latest_user(session)) is not None:
            # Leave room for the user message borrowed below.
            packed = ctx.pack_backward(tail, max(room - fallback["token_count"], 0))
        tail = packed
    else:
        tail = ctx.complete_tool_turns(tail)
    body = head + tail
    if not _has_user(body):
        body = ctx.ensure_user_message(body, fallback or _latest_user(session))
    total = tokens.count_request([system_tokens, *(m["token_count"] for m in body)])
    if max_tokens is not None and total > max_tokens:
        # The caller's budget is a hard limit (an answer over it fails at the model). Only the
        # fixed part can overflow it, so `total` is the smallest budget that works.
        raise InvalidInput.for_field(
            "max_tokens",
            f"{max_tokens} is below the {total} tokens the system prompt, the summary and the "
            "latest user message need.",
        )

    out: list[dict[str, Any]] = []
    if session.system_prompt:
        out.append({"role": "system", "content": session.system_prompt})
    out.extend(to_openai_message(message) for message in body)
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


# --- dashboard: a session's active context and compaction ledger ----------------------------


@dataclass(frozen=True)
class ContextEntry:
    """One message of the active context as an LLM receives it, and where it comes from."""

    kind: str  # "system" | "instruction" | "summary" | "message"
    message: dict[str, Any]
    seq: int | None = None  # the raw message it is (None for the system prompt and summaries)
    token_count: int | None = None
    truncated: bool = False  # a tool output shortened by tool_truncation


@dataclass(frozen=True)
class ActiveContext:
    head: list[ContextEntry]  # the system prompt, the original instruction and the summary
    messages: list[ContextEntry]  # the newest `show_last` messages after them
    hidden: int  # older messages of the context left out of `messages`
    token_count: int  # as counted for the request by context_build
    run: CompactionRun | None  # the compaction whose summary it starts from


def _find_block(body: list[dict[str, Any]], block: list[dict[str, Any]]) -> int | None:
    for start in range(len(body) - len(block) + 1):
        if body[start : start + len(block)] == block:
            return start
    return None


def _same_message(entry: dict[str, Any], row: dict[str, Any]) -> tuple[bool, bool]:
    """(is this raw row the entry, was its content shortened on the way)."""
    if to_openai_message(row) == entry:
        return True, False
    is_tool = entry.get("role") == row["role"] == Message.Role.TOOL
    return is_tool and entry.get("tool_call_id") == row["tool_call_id"], is_tool


def _label_messages(session: Session, shown: list[dict[str, Any]], after: int) -> list[ContextEntry]:
    """Pair the shown context messages with the raw rows they come from, newest first.

    The context is a subsequence of the messages after `after` (packing and tool-turn
    repair only drop messages), plus at most one borrowed user message in front, so a
    backward walk finds every row; a message it cannot pair keeps seq None.
    """
    rows = list(
        Message.objects.filter(session=session, seq__gt=after)
        .order_by("-seq")
        .values(*CONTEXT_FIELDS)[: len(shown) + 20]
    )
    labelled: list[ContextEntry] = []
    position = 0
    for entry in reversed(shown):
        found = None
        for index in range(position, len(rows)):
            same, truncated = _same_message(entry, rows[index])
            if same:
                found, position = (rows[index], truncated), index + 1
                break
        if found is None and entry.get("role") == Message.Role.USER and entry is shown[0]:
            borrowed = _latest_user(session)  # ensure_user_message's fallback
            if borrowed is not None and to_openai_message(borrowed) == entry:
                found = (borrowed, False)
        if found is None:
            labelled.append(ContextEntry("message", entry))
            continue
        row, truncated = found
        tokens_used = None if truncated else row["token_count"]
        labelled.append(ContextEntry("message", entry, seq=row["seq"], token_count=tokens_used, truncated=truncated))
    return labelled[::-1]


def active_context_view(*, session: Session, show_last: int) -> ActiveContext:
    """context_build's output for a person to read: each message labelled with its origin.

    The messages are context_build's own (so the page shows exactly what an agent gets);
    this only works out which are the system prompt, the original instruction, the
    summary and which raw message (seq) each of the others is.
    """
    built = context_build(session=session)
    config = memory_config.parse_config(session.memory_config or {})
    policy = config.active_context
    summarizing = session.memory_type == MemoryType.MANAGED_CONVERSATION and policy.enabled
    run = latest_done_run(session.pk) if summarizing and policy.mode == "compaction" else None
    body = list(built.messages)
    head: list[ContextEntry] = []
    if session.system_prompt and body and body[0].get("role") == "system":
        head.append(ContextEntry("system", body.pop(0), token_count=session.system_prompt_tokens))
    summary = list(run.summary or []) if run is not None else []
    start = _find_block(body, [to_openai_message(m) for m in summary]) if summary else None
    if start is not None:
        first_user = _first_user(session) if start else None
        for message in body[:start]:
            if first_user is not None and to_openai_message(first_user) == message:
                head.append(
                    ContextEntry("instruction", message, seq=first_user["seq"], token_count=first_user["token_count"])
                )
            else:  # the latest user message, borrowed because the context had none
                head.extend(_label_messages(session, [message], after=0))
        head.extend(
            ContextEntry("summary", message, token_count=stored.get("token_count"))
            for message, stored in zip(body[start : start + len(summary)], summary, strict=True)
        )
        body = body[start + len(summary) :]
    shown = body[-show_last:] if show_last > 0 else []
    after = (run.covered_to_seq or 0) if run is not None else 0
    return ActiveContext(
        head=head,
        messages=_label_messages(session, shown, after),
        hidden=len(body) - len(shown),
        token_count=built.token_count,
        run=run,
    )


# --- ops: background job queues, across every team (staff only) -------------------------------


# Fields a message row takes from validated input (everything but the server's own).
# A tool result must answer a call made by one of this many most recent tool-calling
# assistant messages; older calls are long closed in any real agent loop.
TOOL_CALL_LOOKBACK = 50
