"""Every write to conversation memory. Keyword-only, typed, one short transaction each."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from memory_app import tokens
from memory_app.auth import generate_key, key_digest, key_prefix
from memory_app.models import ApiKey, MemoryEvent, MemoryType, Message, Session, Team
from memsite.errors import Conflict, InvalidInput, NotFound

# Fields a message row takes from validated input (everything but the server's own).
MESSAGE_FIELDS = (
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
# A tool result must answer a call made by one of this many most recent tool-calling
# assistant messages; older calls are long closed in any real agent loop.
TOOL_CALL_LOOKBACK = 50


# --- teams and keys ---------------------------------------------------------------------


def team_get_or_create(*, name: str) -> Team:
    team, _ = Team.objects.get_or_create(name=name)
    return team


def api_key_create(
    *, team: Team, name: str = "", role: str = ApiKey.Role.WRITE, agent_name: str = ""
) -> tuple[ApiKey, str]:
    """Create a key; the raw key is returned once and never stored."""
    raw_key = generate_key()
    api_key = ApiKey.objects.create(
        team=team,
        name=name,
        role=role,
        agent_name=agent_name,
        prefix=key_prefix(raw_key),
        digest=key_digest(raw_key),
    )
    return api_key, raw_key


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        api_key.revoked_at = timezone.now()
        api_key.save(update_fields=["revoked_at"])
    return api_key


# --- sessions ---------------------------------------------------------------------------


def _system_prompt_tokens(system_prompt: str) -> int:
    if not system_prompt:
        return 0
    return tokens.count_message({"role": "system", "content": system_prompt})


def _ensure_external_id_free(*, team: Team, external_id: str | None, exclude: uuid.UUID | None) -> None:
    if external_id is None:
        return
    taken = Session.objects.filter(team=team, external_id=external_id)
    if exclude is not None:
        taken = taken.exclude(pk=exclude)
    if taken.exists():
        raise Conflict(
            f"A session with external_id {external_id!r} already exists.",
            fields={"external_id": ["already used by another session of this team"]},
        )


@transaction.atomic
def session_create(
    *,
    team: Team,
    system_prompt: str = "",
    external_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    memory_type: str = MemoryType.CONVERSATION_HISTORY,
    additional_state: Mapping[str, Any] | None = None,
) -> Session:
    _ensure_external_id_free(team=team, external_id=external_id, exclude=None)
    try:
        with transaction.atomic():
            return Session.objects.create(
                team=team,
                system_prompt=system_prompt,
                system_prompt_tokens=_system_prompt_tokens(system_prompt),
                external_id=external_id,
                metadata=dict(metadata or {}),
                memory_type=memory_type,
                additional_state=dict(additional_state) if additional_state else None,
            )
    except IntegrityError as exc:  # a concurrent create won the external_id
        raise Conflict(
            f"A session with external_id {external_id!r} already exists.",
            fields={"external_id": ["already used by another session of this team"]},
        ) from exc


@transaction.atomic
def session_update(*, session: Session, data: Mapping[str, Any]) -> Session:
    allowed = {"system_prompt", "external_id", "metadata", "memory_type", "additional_state"}
    changed = [field for field in data if field in allowed]
    if "external_id" in data:
        _ensure_external_id_free(team=session.team, external_id=data["external_id"], exclude=session.pk)
    for field in changed:
        setattr(session, field, data[field])
    if "system_prompt" in data:
        session.system_prompt_tokens = _system_prompt_tokens(session.system_prompt)
        changed.append("system_prompt_tokens")
    session.save(update_fields=[*changed, "updated_at"])
    return session


def session_delete(*, session: Session) -> None:
    session.delete()


@transaction.atomic
def session_reset(*, session: Session) -> int:
    """Delete every message but keep the session and its system prompt; record the reset."""
    deleted, _ = Message.objects.filter(session=session).delete()
    MemoryEvent.objects.create(
        team_id=session.team_id, session=session, kind=MemoryEvent.Kind.RESET, data={"deleted_messages": deleted}
    )
    return deleted


# --- messages ---------------------------------------------------------------------------


def _count_tokens(data: Mapping[str, Any]) -> int:
    return tokens.count_message(dict(data), image_tokens=settings.IMAGE_TOKEN_ESTIMATE)


def _reserve_seqs(*, session_id: uuid.UUID, team_id: int, count: int) -> int:
    """Take `count` seqs from the team's session counter; return the last one.

    One UPDATE ... RETURNING both row-locks the session (so concurrent writers queue
    here, and seqs are gap-free) and reads the new counter, in a single round trip.
    """
    table = Session._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            # The table name comes from the model, never from input.
            f"UPDATE {table} SET last_seq = last_seq + %s, updated_at = %s "  # noqa: S608
            "WHERE id = %s AND team_id = %s RETURNING last_seq",
            [count, timezone.now(), Session._meta.pk.get_db_prep_value(session_id, connection), team_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise NotFound("Session not found.")
    return int(row[0])


@functools.lru_cache(maxsize=32)
def _numbered_insert_sql(count: int) -> str:
    """PostgreSQL: take `count` seqs from the team's session counter and insert `count`
    message rows numbered with them, in ONE statement (a data-modifying CTE).

    Parameters: count, updated_at, session id, team id, then every row's concrete fields
    in model order, its `seq` replaced by its distance from the last seq taken.
    """
    quote = connection.ops.quote_name
    fields = Message._meta.concrete_fields
    names = [f"f{index}" for index in range(len(fields))]
    # Typed placeholders: VALUES in a FROM clause would otherwise read untyped values as text.
    values = "(" + ", ".join(f"%s::{field.cast_db_type(connection)}" for field in fields) + ")"
    selected = ", ".join(
        f"s.last_seq - v.{name}" if field.attname == "seq" else f"v.{name}"
        for field, name in zip(fields, names, strict=True)
    )
    columns = ", ".join(quote(field.column) for field in fields)
    # Table and column names come from the models; every value is a parameter.
    return (
        f"WITH s AS (UPDATE {quote(Session._meta.db_table)} SET last_seq = last_seq + %s, updated_at = %s "  # noqa: S608
        "WHERE id = %s AND team_id = %s RETURNING last_seq) "
        f"INSERT INTO {quote(Message._meta.db_table)} ({columns}) "
        f"SELECT {selected} FROM s, (VALUES {', '.join([values] * count)}) AS v ({', '.join(names)}) "
        "RETURNING seq"
    )


def _insert_numbered(*, session_id: uuid.UUID, team_id: int, rows: list[Message]) -> None:
    """Reserve seqs and insert `rows` numbered with them, as one statement (see above).

    The UPDATE row-locks the session until the statement's transaction ends, exactly as
    `_reserve_seqs` does, so seqs stay gap-free. Run in autocommit, the whole append is one
    round trip instead of four (BEGIN, UPDATE, INSERT, COMMIT). Nothing is written, and
    NotFound raised, when the team has no such session.
    """
    fields = Message._meta.concrete_fields
    params: list[Any] = [len(rows), timezone.now(), Session._meta.pk.get_db_prep_value(session_id, connection), team_id]
    for offset, row in enumerate(rows):
        for field in fields:  # what bulk_create's compiler does: pre_save (timestamps), then prep
            if field.attname == "seq":
                params.append(len(rows) - 1 - offset)
            else:
                params.append(field.get_db_prep_save(field.pre_save(row, add=True), connection))
    with connection.cursor() as cursor:
        cursor.execute(_numbered_insert_sql(len(rows)), params)
        seqs = [seq for (seq,) in cursor.fetchall()]
    if not seqs:
        raise NotFound("Session not found.")
    _number(rows, last=max(seqs))
    for row in rows:
        row._state.adding = False
        row._state.db = connection.alias


def _number(rows: list[Message], *, last: int) -> None:
    first = last - len(rows) + 1
    for offset, row in enumerate(rows):
        row.seq = first + offset


def _recent_tool_call_ids(*, session_id: uuid.UUID) -> set[str]:
    calls = (
        Message.objects.filter(session_id=session_id, role=Message.Role.ASSISTANT, tool_calls__isnull=False)
        .order_by("-seq")
        .values_list("tool_calls", flat=True)[:TOOL_CALL_LOOKBACK]
    )
    return {call["id"] for batch in calls for call in batch or []}


def _has_tool_results(messages: Sequence[Mapping[str, Any]]) -> bool:
    return any(m["role"] == Message.Role.TOOL for m in messages)


def _check_tool_results(*, session_id: uuid.UUID, messages: Sequence[Mapping[str, Any]], path: str) -> None:
    """Refuse tool messages that answer no earlier tool call (they break every later request)."""
    if not _has_tool_results(messages):
        return
    known = _recent_tool_call_ids(session_id=session_id)
    for index, message in enumerate(messages):
        if message["role"] == Message.Role.TOOL and message.get("tool_call_id") not in known:
            field = f"{path}[{index}].tool_call_id" if path else "tool_call_id"
            raise InvalidInput.for_field(
                field, f"{message.get('tool_call_id')!r} answers no earlier assistant tool call in this session"
            )
        for call in message.get("tool_calls") or []:
            known.add(call["id"])


def _replayed(*, session_id: uuid.UUID, ids: list[uuid.UUID], expected: int) -> list[Message] | None:
    """Messages already stored under these client-chosen ids: a retried request.

    Only a request whose every message carries an id that is already stored in this
    session is a replay; anything else that collides is a conflict, never a partial write.
    """
    existing = list(Message.objects.filter(pk__in=ids).order_by("seq"))
    if not existing:
        return None
    if len(ids) == expected and len(existing) == expected and all(m.session_id == session_id for m in existing):
        return existing
    raise Conflict(
        "message_id already used by another message.",
        fields={"message_id": ["already used by another message"]},
    )


@dataclass(frozen=True)
class AppendResult:
    messages: list[Message]
    replayed: bool  # True when every message was already stored by an earlier attempt


def message_append(*, session: Session, messages: Sequence[Mapping[str, Any]], path: str = "messages") -> AppendResult:
    """Append validated messages atomically: all get consecutive seqs, or none is stored.

    A message may carry a client-chosen `message_id`; re-sending the same request then
    returns the stored messages instead of duplicating them, so clients can retry safely.
    """
    return _append(session_id=session.pk, team_id=session.team_id, messages=messages, path=path, session=session)


def message_append_to(
    *, team: Team, session_id: uuid.UUID, messages: Sequence[Mapping[str, Any]], path: str = "messages"
) -> AppendResult:
    """`message_append` for a session known only by its id, as the API knows it.

    The team check is part of the write (NotFound for an unknown or another team's
    session), so the caller reads nothing first: on PostgreSQL an append is one statement.
    """
    return _append(session_id=session_id, team_id=team.pk, messages=messages, path=path)


def _append(
    *,
    session_id: uuid.UUID,
    team_id: int,
    messages: Sequence[Mapping[str, Any]],
    path: str,
    session: Session | None = None,
) -> AppendResult:
    counts = [_count_tokens(m) for m in messages]  # CPU work outside the lock
    client_ids = [m["message_id"] for m in messages if m.get("message_id")]
    owner: dict[str, Any] = {"session": session} if session is not None else {"session_id": session_id}
    rows = [
        Message(
            id=m.get("message_id") or uuid.uuid4(),
            seq=0,  # numbered under the session lock
            token_count=counts[offset],
            **owner,
            **{field: m.get(field) for field in MESSAGE_FIELDS},
        )
        for offset, m in enumerate(messages)
    ]
    try:
        if connection.vendor == "postgresql" and not _has_tool_results(messages):
            # Nothing to check against stored data: lock, number and insert in one statement.
            # Inside a caller's transaction it gets a savepoint, so that a duplicate message_id
            # leaves that transaction usable for the replay lookup below.
            with nullcontext() if connection.get_autocommit() else transaction.atomic():
                _insert_numbered(session_id=session_id, team_id=team_id, rows=rows)
        else:
            with transaction.atomic():
                last = _reserve_seqs(session_id=session_id, team_id=team_id, count=len(rows))
                _check_tool_results(session_id=session_id, messages=messages, path=path)
                _number(rows, last=last)
                Message.objects.bulk_create(rows)
    except IntegrityError:
        replay = _replayed(session_id=session_id, ids=client_ids, expected=len(messages)) if client_ids else None
        if replay is None:
            raise
        return AppendResult(messages=replay, replayed=True)
    return AppendResult(messages=rows, replayed=False)


@transaction.atomic
def message_update(*, message: Message, data: Mapping[str, Any]) -> Message:
    changed = [field for field in MESSAGE_FIELDS if field in data]
    for field in changed:
        setattr(message, field, data[field])
    if message.role == Message.Role.TOOL and ("tool_call_id" in data or "role" in data):
        prior = Message.objects.filter(session_id=message.session_id, seq__lt=message.seq)
        known = {
            call["id"]
            for batch in prior.filter(role=Message.Role.ASSISTANT, tool_calls__isnull=False)
            .order_by("-seq")
            .values_list("tool_calls", flat=True)[:TOOL_CALL_LOOKBACK]
            for call in batch or []
        }
        if message.tool_call_id not in known:
            raise InvalidInput.for_field("tool_call_id", "answers no earlier assistant tool call in this session")
    message.token_count = _count_tokens({field: getattr(message, field) for field in MESSAGE_FIELDS})
    message.save(update_fields=[*changed, "token_count", "updated_at"])
    return message


def message_delete(*, message: Message) -> None:
    message.delete()


# --- import -----------------------------------------------------------------------------


def split_system_prompt(messages: Sequence[Mapping[str, Any]]) -> tuple[str, list[Mapping[str, Any]]]:
    """The save_to_file format stores the system prompt as the first message (text only)."""
    if messages and messages[0].get("role") == Message.Role.SYSTEM and isinstance(messages[0].get("content"), str):
        return messages[0]["content"], list(messages[1:])
    return "", list(messages)


@transaction.atomic
def session_import(
    *,
    team: Team,
    memory_type: str,
    messages: list[Mapping[str, Any]],
    additional_state: Mapping[str, Any] | None,
    session_fields: Mapping[str, Any],
) -> Session:
    """Create a session from a save_to_file / export document."""
    system_prompt, rest = split_system_prompt(messages)
    session = session_create(
        team=team,
        system_prompt=system_prompt,
        external_id=session_fields.get("external_id"),
        metadata=session_fields.get("metadata") or {},
        memory_type=memory_type,
        additional_state=additional_state,
    )
    if rest:
        message_append(session=session, messages=rest)
    MemoryEvent.objects.create(team=team, session=session, kind=MemoryEvent.Kind.IMPORTED, data={"messages": len(rest)})
    return session
