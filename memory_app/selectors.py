"""Reads of conversation memory that are more than a one-line filter."""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import BooleanField, Count, Exists, F, Max, Min, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models import Field as ModelField
from django.db.models.base import Model
from django.db.models.functions import Coalesce

from memory_app import context as ctx
from memory_app import counting, memory_config, tokens
from memory_app.models import (
    CompactionRun,
    FactExtractionRun,
    MemoryEvent,
    MemoryType,
    Message,
    Session,
    Team,
    TeamMembership,
)
from memory_client.vocabulary.messages import MESSAGE_FIELDS, to_openai_message
from memsite.errors import InvalidInput, NotFound

EXPORT_FIELDS = MESSAGE_FIELDS
_CONTEXT_FIELDS = ("seq", "role", "content", "name", "tool_calls", "tool_call_id", "images", "token_count")


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


def latest_done_run(session_id: Any) -> CompactionRun | None:
    """The compaction whose summary the active context starts from (reverted ones excluded)."""
    return (
        CompactionRun.objects.filter(session_id=session_id, status=CompactionRun.Status.DONE)
        .order_by("-covered_to_seq")
        .first()
    )


@functools.cache
def _newest_sql() -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(quote(column(concrete_field(Message, name))) for name in _CONTEXT_FIELDS)
    return (
        f"SELECT {columns} FROM {quote(Message._meta.db_table)} "  # noqa: S608
        "WHERE session_id = %s AND seq > %s ORDER BY seq DESC LIMIT %s"
    )


def _newest(session: Session, *, after: int, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` newest messages with seq > after, oldest first (reads the window only,
    backwards along the (session, seq) index)."""
    fields = [concrete_field(Message, name) for name in _CONTEXT_FIELDS]
    session_pk = Session._meta.pk.get_db_prep_value(session.pk, connection)
    rows = _select(_newest_sql(), [session_pk, after, limit], fields)
    return [dict(zip(_CONTEXT_FIELDS, row, strict=True)) for row in reversed(rows)]


def _first_user(session: Session) -> dict[str, Any] | None:
    return (
        Message.objects.filter(session=session, role=Message.Role.USER).order_by("seq").values(*_CONTEXT_FIELDS).first()
    )


def _has_user(messages: Sequence[dict[str, Any]]) -> bool:
    return any(m["role"] == Message.Role.USER for m in messages)


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


def team_list_for_user(*, user: Any) -> QuerySet[Team]:
    """The teams a browser user belongs to: the only teams the dashboard may show them, each
    with `user_is_admin` (the user's role in it), in the same query."""
    admin = TeamMembership.objects.filter(team=OuterRef("pk"), user=user, is_admin=True)
    return Team.objects.filter(members=user).annotate(user_is_admin=Exists(admin)).order_by("name")


def user_is_team_admin(*, user: Any, team: Team) -> bool:
    """Whether the user may curate `team` (approve, edit, invalidate, retry): an admin member of
    that team, or a superuser. The global staff flag gives no right over any team's data.
    A team from `team_list_for_user` already knows the answer; any other team costs a query."""
    if user.is_superuser:
        return True
    known = getattr(team, "user_is_admin", None)
    if known is not None:
        return bool(known)
    return TeamMembership.objects.filter(team=team, user=user, is_admin=True).exists()


def admin_team_ids_for_user(*, user: Any) -> list[int] | None:
    """The teams whose background jobs the user may watch and retry; None means every team
    (superusers only)."""
    if user.is_superuser:
        return None
    return list(TeamMembership.objects.filter(user=user, is_admin=True).values_list("team_id", flat=True))


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
        .values(*_CONTEXT_FIELDS)[: len(shown) + 20]
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


@dataclass(frozen=True)
class LedgerRun:
    run: CompactionRun
    covered: list[Message]  # the first raw messages of its range, seq order
    more_covered: bool  # the range holds more than `covered`


@dataclass(frozen=True)
class CompactionLedger:
    runs: list[LedgerRun]  # newest first
    more_runs: bool


def compaction_ledger(*, session: Session, limit: int, messages_per_run: int) -> CompactionLedger:
    """The session's latest compactions, each with the raw messages its summary stands in for.

    One query for the runs and one per run that covers a range (at most `limit`), each
    reading at most `messages_per_run` + 1 rows.
    """
    runs = list(compaction_runs(session=session)[: limit + 1])
    ledger: list[LedgerRun] = []
    for run in runs[:limit]:
        covered: list[Message] = []
        if run.covered_to_seq is not None:
            covered = list(
                Message.objects.filter(
                    session=session, seq__gt=run.covered_from_seq, seq__lte=run.covered_to_seq
                ).order_by("seq")[: messages_per_run + 1]
            )
        ledger.append(
            LedgerRun(run=run, covered=covered[:messages_per_run], more_covered=len(covered) > messages_per_run)
        )
    return CompactionLedger(runs=ledger, more_runs=len(runs) > limit)


# --- ops: background job queues, across every team (staff only) -------------------------------


@dataclass(frozen=True)
class JobSource:
    """A kind of durable background job the ops page watches.

    Its model has team and (nullable) session foreign keys, `status` with the values
    pending, running, done and failed, `error`, `attempts`, `trigger`, `created_at` and
    `finished_at` (CompactionRun's shape, which FactExtractionRun shares).
    """

    kind: str  # url-safe key
    label: str
    queue: str  # the Celery queue its tasks are sent to
    model: type[CompactionRun] | type[FactExtractionRun]
    # Jobs whose output was unusable and wait for staff (fact extraction's "quarantined").
    quarantines: bool = False
    # Its retry service re-queues the failed job itself rather than queueing a new one,
    # so a failed job is never "retried" while it is still listed as failed.
    retries_in_place: bool = False


def job_sources() -> list[JobSource]:
    """Every job kind, in the order the ops page shows them. A new kind adds one entry."""
    return [
        JobSource(kind="compaction", label="Context compaction", queue=settings.COMPACTION_QUEUE, model=CompactionRun),
        JobSource(
            kind="facts",
            label="Fact extraction",
            queue=settings.FACTS_QUEUE,
            model=FactExtractionRun,
            quarantines=True,
            retries_in_place=True,
        ),
    ]


def job_source_get(*, kind: str) -> JobSource:
    for source in job_sources():
        if source.kind == kind:
            return source
    raise NotFound("No such job kind.")


@dataclass(frozen=True)
class TeamJobCounts:
    team_id: int
    team_name: str
    pending: int = 0
    running: int = 0
    failed: int = 0
    quarantined: int = 0


@dataclass(frozen=True)
class QueueStats:
    pending: int
    running: int
    failed: int
    failed_recently: int  # failed since the `since` given
    oldest_pending_at: datetime | None
    by_team: list[TeamJobCounts]  # teams with any pending, running, failed (or quarantined) job, busiest first
    quarantined: int = 0


_WATCHED_STATUSES = ("pending", "running", "failed")


def _jobs_of(source: JobSource, team_ids: list[int] | None) -> QuerySet[Any]:
    jobs = source.model.objects.all()
    return jobs if team_ids is None else jobs.filter(team_id__in=team_ids)


def job_queue_stats(*, source: JobSource, since: datetime, team_ids: list[int] | None) -> QueueStats:
    """Counts per status (and per team) in one grouped query on the status index.

    The age of the oldest pending job runs from its creation: the sweeper moves
    `queued_at` forward each time it re-sends a job, which would hide a stuck queue.
    """
    watched = (*_WATCHED_STATUSES, "quarantined") if source.quarantines else _WATCHED_STATUSES
    rows = (
        _jobs_of(source, team_ids)
        .filter(status__in=watched)
        .order_by()
        .values("team_id", "team__name", "status")
        .annotate(n=Count("pk"), oldest=Min("created_at"), recent=Count("pk", filter=Q(finished_at__gte=since)))
    )
    totals = dict.fromkeys(watched, 0)
    teams: dict[int, dict[str, Any]] = {}
    oldest: datetime | None = None
    recent = 0
    for row in rows:
        totals[row["status"]] += row["n"]
        team = teams.setdefault(row["team_id"], {"team_id": row["team_id"], "team_name": row["team__name"]})
        team[row["status"]] = row["n"]
        if row["status"] == "pending" and (oldest is None or row["oldest"] < oldest):
            oldest = row["oldest"]
        if row["status"] == "failed":
            recent += row["recent"]
    by_team = sorted(
        (TeamJobCounts(**team) for team in teams.values()),
        key=lambda t: (-(t.pending + t.running), -(t.failed + t.quarantined), t.team_name),
    )
    return QueueStats(
        pending=totals["pending"],
        running=totals["running"],
        failed=totals["failed"],
        failed_recently=recent,
        oldest_pending_at=oldest,
        by_team=by_team,
        quarantined=totals.get("quarantined", 0),
    )


def job_failures(
    *, source: JobSource, limit: int, team_ids: list[int] | None
) -> list[CompactionRun | FactExtractionRun]:
    """The latest failed jobs with their team and session; `retried` marks those whose
    session has had a job queued since (a retry, or a later automatic run). A job retried
    in place is pending again, so it is simply no longer listed."""
    model = source.model
    if source.retries_in_place:
        retried: Any = Value(False, output_field=BooleanField())
    else:
        retried = Exists(model.objects.filter(session_id=OuterRef("session_id"), created_at__gt=OuterRef("created_at")))
    return list(
        _jobs_of(source, team_ids)
        .filter(status="failed")
        .select_related("team", "session")
        .annotate(retried=retried)
        .order_by(F("finished_at").desc(nulls_last=True), "-created_at")[:limit]
    )


def job_get(
    *, source: JobSource, job_id: uuid.UUID | str, team_ids: list[int] | None
) -> CompactionRun | FactExtractionRun:
    """A job of one of `team_ids` (None: any team); another team's job is not found."""
    try:
        return _jobs_of(source, team_ids).select_related("session").get(pk=job_id)
    except (source.model.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound("Job not found.") from exc


@dataclass(frozen=True)
class WorkerSeen:
    name: str
    seconds_ago: int  # since its latest answer; 0 = it answered the ping just made


@dataclass(frozen=True)
class WorkersSeen:
    known: bool  # False: no answer lately, so nothing can be said (not even "none")
    workers: list[WorkerSeen]
    detail: str = ""  # why the ping just made got no answer, if it got none

    @property
    def names(self) -> list[str]:
        return [worker.name for worker in self.workers]


# One ping at a time per process: a ping stuck on an unreachable broker must not pile up
# threads while the ops page keeps polling.
_PING_IN_FLIGHT = threading.Lock()
# Worker name -> time.monotonic() of its latest answer, in this process. A broadcast reply
# can miss a short window (the filesystem broker polls once a second), so a worker counts
# as alive for a while after its last answer instead of flickering to "unknown".
_WORKERS_LAST_ANSWER: dict[str, float] = {}


def _ping_workers(timeout: float, deadline: float) -> str:
    """Ping in a daemon thread and record who answers; "" or why nobody did.

    A broker that is down makes kombu retry its connection for seconds: the caller waits
    `deadline` at most, and an answer that comes later still counts for the next call.
    """
    from memsite.celery import app as celery_app

    if not _PING_IN_FLIGHT.acquire(blocking=False):
        return "the previous ping has not returned yet"
    outcome: dict[str, Any] = {}

    def ping() -> None:
        try:
            replies = celery_app.control.ping(timeout=timeout)
            assert replies is not None  # ping broadcasts with reply=True: a list, maybe empty
            answered = time.monotonic()
            names = [name for reply in replies if isinstance(reply, dict) for name in reply]
            _WORKERS_LAST_ANSWER.update(dict.fromkeys(names, answered))
            outcome["names"] = names
        except Exception as exc:  # broker unreachable, broadcast unsupported...
            outcome["error"] = f"{type(exc).__name__}: {exc}"[:200]
        finally:
            _PING_IN_FLIGHT.release()

    thread = threading.Thread(target=ping, name="ops-worker-ping", daemon=True)
    thread.start()
    thread.join(deadline)
    if "error" in outcome:
        return f"the ping failed ({outcome['error']})"
    if "names" not in outcome:
        return f"the broker did not answer within {deadline:g} s"
    return "" if outcome["names"] else f"no worker answered the ping within {timeout:g} s"


def workers_seen(*, timeout: float = 0.5, deadline: float = 2.0, remember: float = 30.0) -> WorkersSeen:
    """Workers that answered a broadcast ping (celery's control ping) in the last `remember` s."""
    detail = _ping_workers(timeout, deadline)
    now = time.monotonic()
    for name, answered in list(_WORKERS_LAST_ANSWER.items()):
        if now - answered > remember:
            _WORKERS_LAST_ANSWER.pop(name, None)
    workers = sorted(
        (WorkerSeen(name=name, seconds_ago=int(now - answered)) for name, answered in _WORKERS_LAST_ANSWER.items()),
        key=lambda worker: worker.name,
    )
    return WorkersSeen(known=bool(workers), workers=workers, detail=detail)


def team_row_counts(*, team_ids: Sequence[int]) -> dict[str, int]:
    """How many rows of each kind the teams own (models with a `team` foreign key, plus
    messages), by plural verbose name, leaving out kinds with none: the admin's summary of
    what deleting the teams removes."""
    from django.apps import apps

    counts: dict[str, int] = {}
    models = [m for m in apps.get_models() if any(f.name == "team" and f.is_relation for f in m._meta.fields)]
    for model in models:
        counts[str(model._meta.verbose_name_plural)] = model._base_manager.filter(team_id__in=team_ids).count()
    counts[str(Message._meta.verbose_name_plural)] = Message.objects.filter(session__team_id__in=team_ids).count()
    return {name: count for name, count in sorted(counts.items()) if count}
