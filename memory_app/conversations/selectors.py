"""Reads of conversation memory that are more than a one-line filter."""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models import Field as ModelField
from django.db.models.base import Model
from django.db.models.functions import Coalesce

from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Message, Session
from memory_app.tenancy.models import Team
from memory_client.vocabulary.messages import MESSAGE_FIELDS
from memsite.errors import NotFound

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


def select_rows(sql: str, params: Sequence[Any], fields: Sequence[ModelField]) -> list[list[Any]]:
    """The rows of a hand-written SELECT of `fields`, converted as the ORM converts them.

    For the small reads every context or session request makes: building those queries
    through the ORM took longer than PostgreSQL takes to run them.
    """
    # The connection itself, not django.db's proxy to it: the converters ask it for its vendor
    # once per value, and each question through the proxy is a context-local lookup.
    db = connections[DEFAULT_DB_ALIAS]
    converters = [
        (index, field.cached_col, db.ops.get_db_converters(field.cached_col) + field.get_db_converters(db))
        for index, field in enumerate(fields)
    ]
    converters = [entry for entry in converters if entry[2]]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        rows = [list(row) for row in cursor.fetchall()]
    for row in rows:
        for index, column, functions in converters:
            if row[index] is None:
                continue  # every converter Django and memsite define keeps NULL as None
            for convert in functions:
                row[index] = convert(row[index], column, db)
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
    rows = select_rows(_session_sql(), [pk, team.pk], fields)
    if not rows:
        raise NotFound("Session not found.")
    return Session.from_db(connection.alias, [field.attname for field in fields], rows[0])


def session_named(*, team: Team, name: str) -> Session | None:
    """The team's session with this id, or else this external id (what a page's filter box holds)."""
    try:
        return session_get(team=team, session_id=uuid.UUID(name))
    except (ValueError, NotFound):
        return session_list(team=team, external_id=name).first()


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


def tool_call_marker(tool: str) -> str:
    """How a call to `tool` reads in a message's stored tool_calls JSON (json.dumps spacing,
    which both databases keep): `"name": "<tool>"`. Inside the arguments string the quotes are
    escaped, so an argument naming the tool does not match."""
    return '"name": ' + json.dumps(tool)


def timeline_messages(
    *, session: Session, role: str | None = None, tool: str | None = None, text: str | None = None
) -> QuerySet[Message]:
    """The session's messages, optionally only one role's, the calls to (and results of) one
    tool, or those whose content, tool calls or name contain `text` (case-insensitive)."""
    messages = Message.objects.filter(session=session)
    if role:
        messages = messages.filter(role=role)
    if tool:
        messages = messages.filter(
            Q(role=Message.Role.ASSISTANT, tool_calls__icontains=tool_call_marker(tool))
            | Q(role=Message.Role.TOOL, name=tool)
        )
    if text:
        matches = Q(name__icontains=text)
        for spelled in _json_spellings(text):
            matches |= Q(content__icontains=spelled) | Q(tool_calls__icontains=spelled)
        messages = messages.filter(matches)
    return messages


def _json_spellings(text: str) -> set[str]:
    """`text` as stored JSON text may spell it. Content is JSON: quotes and newlines are escaped,
    and so is non-ASCII (\\u00e9), which the database's case folding cannot see through; the
    lower and upper case forms cover "Café" searched as "CAFÉ". The text as typed covers a
    database that keeps non-ASCII unescaped."""
    return {text, *(json.dumps(form)[1:-1] for form in (text, text.lower(), text.upper()))}


def message_page(
    *,
    session: Session,
    role: str | None = None,
    tool: str | None = None,
    text: str | None = None,
    after: int | None = None,
    limit: int = 100,
    last: int | None = None,
) -> MessagePage:
    """A page of messages in seq order: `last` N, or up to `limit` after seq `after`."""
    messages = timeline_messages(session=session, role=role, tool=tool, text=text)
    if last is not None:
        newest = list(messages.order_by("-seq")[:last])
        return MessagePage(messages=newest[::-1], next_after=None)
    if after is not None:
        messages = messages.filter(seq__gt=after)
    page = list(messages.order_by("seq")[: limit + 1])
    has_more = len(page) > limit
    page = page[:limit]
    return MessagePage(messages=page, next_after=page[-1].seq if has_more else None)


def message_export_dict(message: Message) -> dict[str, Any]:
    """A message in the export format: its stored fields, nulls omitted but the content's (every
    message of a marsys save_to_file file has a content, null for an assistant that only calls tools)."""
    data: dict[str, Any] = {"message_id": str(message.pk)}
    for field in EXPORT_FIELDS:
        value = getattr(message, field)
        if value is not None or field == "content":
            data[field] = value
    if message.occurred_at is not None:
        # ISO text, as the append accepts it: an export is imported again unchanged.
        data["occurred_at"] = message.occurred_at.isoformat()
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


# A message's agent: the post's sender, else its `name`. A tool result's `name` is the tool's
# (OpenAI's function-result shape), not an agent's, so tool messages count only by send_from.
MESSAGE_AGENT = Case(
    When(send_from__gt="", then=F("send_from")),
    When(Q(name__gt="") & ~Q(role=Message.Role.TOOL), then=F("name")),
    default=Value(None),
    output_field=CharField(),
)

# The sessions list's sort choices: the label, and the ordering (newest or largest first).
SESSION_ORDERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "created": ("Newest first", ("-created_at", "-pk")),
    "activity": ("Recent activity", ("-last_activity", "-pk")),
    "messages": ("Most messages", ("-message_count", "-created_at", "-pk")),
    "tokens": ("Most tokens", ("-raw_tokens", "-created_at", "-pk")),
}


def session_list_with_activity(
    *,
    team: Team,
    order: str = "created",
    agent: str | None = None,
    compaction_failed: bool = False,
    **filters: Any,
) -> QuerySet[Session]:
    """`session_list` plus what the dashboard's list shows of each session, all in the page's one query:
    `last_activity` (every append bumps `updated_at`), `raw_tokens` (every stored message plus the
    system prompt) and `latest_compaction_status` (null: never compacted).

    `agent` keeps the sessions it wrote a message in or that name it in metadata.agent_name;
    `compaction_failed` those whose latest compaction run failed.
    """
    latest_run = CompactionRun.objects.filter(session=OuterRef("pk")).order_by("-created_at").values("status")[:1]
    sessions = session_list(team=team, **filters).annotate(
        last_activity=F("updated_at"),
        raw_tokens=F("history_tokens") + F("system_prompt_tokens"),
        latest_compaction_status=Subquery(latest_run),
    )
    if agent:
        wrote = Message.objects.filter(session=OuterRef("pk")).alias(agent=MESSAGE_AGENT).filter(agent=agent)
        sessions = sessions.filter(Q(metadata__agent_name=agent) | Exists(wrote))
    if compaction_failed:
        sessions = sessions.filter(latest_compaction_status=CompactionRun.Status.FAILED)
    return sessions.order_by(*SESSION_ORDERS.get(order, SESSION_ORDERS["created"])[1])


def session_agents(*, sessions: Sequence[Session]) -> dict[uuid.UUID, list[str]]:
    """The agent names of each session (metadata.agent_name, then its messages' agents, sorted),
    in one query for the whole page of sessions."""
    found: dict[uuid.UUID, set[str]] = {session.pk: set() for session in sessions}
    rows = (
        Message.objects.filter(session__in=list(found))
        .annotate(agent=MESSAGE_AGENT)
        .filter(agent__isnull=False)
        .values_list("session_id", "agent")
        .distinct()
        .order_by()
    )
    for session_id, agent in rows:
        found[session_id].add(agent)
    named = {session.pk: (session.metadata or {}).get("agent_name") for session in sessions}
    return {pk: ([str(named[pk])] if named[pk] else []) + sorted(agents - {named[pk]}) for pk, agents in found.items()}


def session_tool_names(*, session: Session, scan: int = 500) -> list[str]:
    """The names of the tools the session's latest `scan` tool-calling messages called, sorted:
    the choices of the timeline's tool filter (read on the tool-calling partial index)."""
    calls = (
        Message.objects.filter(session=session, role=Message.Role.ASSISTANT, tool_calls__isnull=False)
        .order_by("-seq")
        .values_list("tool_calls", flat=True)[:scan]
    )
    names: set[str] = set()
    for message_calls in calls:
        for call in message_calls if isinstance(message_calls, list) else []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("name"), str):
                names.add(function["name"])
    return sorted(names)


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


def message_cursor_before(
    *,
    session: Session,
    seq: int,
    limit: int,
    role: str | None = None,
    tool: str | None = None,
    text: str | None = None,
) -> int | None:
    """The `after` cursor of the page of `limit` messages that ends just before `seq`.

    None when nothing precedes `seq`; 0 when the previous page is the first one. The filters
    are `timeline_messages`'s: a filtered timeline pages through its matches only.
    """
    matching = timeline_messages(session=session, role=role, tool=tool, text=text)
    seqs = matching.filter(seq__lt=seq).order_by("-seq").values_list("seq", flat=True)
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


# --- ops: background job queues, across every team (staff only) -------------------------------


# Fields a message row takes from validated input (everything but the server's own).
# A tool result must answer a call made by one of this many most recent tool-calling
# assistant messages; older calls are long closed in any real agent loop.
TOOL_CALL_LOOKBACK = 50


def message_seq_at(*, session: Session, moment: datetime) -> int | None:
    """The first message said at or after `moment` (its occurred_at, else when it was stored):
    where a reader who asks for a time lands. None when every message is earlier."""
    said = Coalesce(F("occurred_at"), F("created_at"))
    later = Message.objects.filter(session=session).alias(said=said).filter(said__gte=moment)
    return later.order_by("seq").values_list("seq", flat=True).first()
