"""Every write to conversation memory. Keyword-only, typed, one short transaction each."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connection, connections, transaction
from django.db.models import Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from memory_app.compaction import services as compaction
from memory_app.compaction.config import parse_config
from memory_app.compaction.models import CompactionRun
from memory_app.compaction.selectors import latest_done_run
from memory_app.conversations import counting
from memory_app.conversations.locks import session_lock
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.conversations.selectors import TOOL_CALL_LOOKBACK, column
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.facts import extraction as fact_extraction
from memory_app.rounds import scratch
from memory_app.search import services as search
from memory_app.tenancy.models import Team
from memory_app.webhooks.models import WebhookDelivery
from memory_client.vocabulary.messages import MESSAGE_FIELDS
from memsite.errors import Conflict, InvalidInput, MessageIdReused, NotFound

# --- teams and keys ---------------------------------------------------------------------


# --- sessions ---------------------------------------------------------------------------


def _system_prompt_tokens(system_prompt: str) -> int:
    if not system_prompt:
        return 0
    return counting.message_tokens({"role": "system", "content": system_prompt})


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
    memory_config: Mapping[str, Any] | None = None,
    recall: Mapping[str, Any] | None = None,
) -> Session:
    _ensure_external_id_free(team=team, external_id=external_id, exclude=None)
    config = compaction.effective_config(team_defaults=team.memory_config_defaults, requested=dict(memory_config or {}))
    prompt_tokens = _system_prompt_tokens(system_prompt)
    try:
        with transaction.atomic():
            return Session.objects.create(
                team=team,
                system_prompt=system_prompt,
                system_prompt_tokens=prompt_tokens,
                active_tokens=prompt_tokens,
                external_id=external_id,
                metadata=dict(metadata or {}),
                memory_type=memory_type,
                memory_config=config,
                compaction_threshold=compaction.threshold_for(memory_type, parse_config(config)),
                additional_state=dict(additional_state) if additional_state else None,
                recall=dict(recall or {}),
            )
    except IntegrityError as exc:  # a concurrent create won the external_id
        raise Conflict(
            f"A session with external_id {external_id!r} already exists.",
            fields={"external_id": ["already used by another session of this team"]},
        ) from exc


@transaction.atomic
def session_update(*, session: Session, data: Mapping[str, Any]) -> Session:
    """Change a session's fields; a partial `memory_config` is merged over the current one."""
    allowed = {"system_prompt", "external_id", "metadata", "memory_type", "additional_state", "recall"}
    changed = [field for field in data if field in allowed]
    if "external_id" in data:
        _ensure_external_id_free(team=session.team, external_id=data["external_id"], exclude=session.pk)
    for field in changed:
        setattr(session, field, data[field])
    if "memory_config" in data:
        session.memory_config = compaction.effective_config(
            team_defaults=session.memory_config, requested=dict(data["memory_config"] or {})
        )
        changed.append("memory_config")
    if "memory_config" in data or "memory_type" in data:
        session.compaction_threshold = compaction.threshold_for(
            session.memory_type, parse_config(session.memory_config)
        )
        changed.append("compaction_threshold")
    if "system_prompt" in data:
        session.system_prompt_tokens = _system_prompt_tokens(session.system_prompt)
        session.active_tokens = compaction.active_tokens(session, latest_done_run(session.pk))
        changed += ["system_prompt_tokens", "active_tokens"]
    session.save(update_fields=[*changed, "updated_at"])
    return session


@transaction.atomic
def session_delete(*, session: Session) -> None:
    """Delete a session and every trace of it. Everything that refers to the session is
    removed by CASCADE (messages, rounds, attachments, shared memory, scratch, summaries and
    compaction runs, facts and extraction runs with their raw output, events, agent memory
    and its archive, experience selection logs, usage ledger rows): a user's delete is the one
    place raw messages go, and nothing may survive holding their text. Webhook deliveries belong
    to the team's webhook, not the session, but their payloads describe the session's events."""
    # The session's row lock first, as an index run takes it (see _lock_before_deleting_messages).
    _lock_before_deleting_messages(session.pk)
    WebhookDelivery.objects.filter(event__session=session).delete()
    session.delete()
    transaction.on_commit(search.index_after_purge)


@transaction.atomic
def session_reset(*, session: Session) -> int:
    """Delete every message but keep the session and its system prompt; record the reset."""
    _lock_before_deleting_messages(session.pk)
    # The count of messages alone: delete()'s total also counts the rows that went with them
    # (their search index items).
    _, deleted_by_model = Message.objects.filter(session=session).delete()
    deleted = deleted_by_model.get(Message._meta.label, 0)
    # Summaries stood in for messages that no longer exist: they leave the context too.
    reverted = session.compaction_runs.filter(status=CompactionRun.Status.DONE).update(
        status=CompactionRun.Status.REVERTED, reverted_at=timezone.now()
    )
    search.forget_summaries(session_id=session.pk)
    transaction.on_commit(search.index_after_purge)
    session.active_tokens = session.system_prompt_tokens
    session.history_tokens = 0
    session.save(update_fields=["active_tokens", "history_tokens"])
    event_record(
        team_id=session.team_id,
        session=session,
        kind=MemoryEvent.Kind.RESET,
        data={
            "session_id": str(session.pk),
            "agent_name": session.agent_name,
            "deleted_messages": deleted,
            "reverted_compactions": reverted,
        },
    )
    return deleted


# --- messages ---------------------------------------------------------------------------


def _count_tokens(data: Mapping[str, Any]) -> int:
    return counting.message_tokens(data)


@dataclass(frozen=True)
class Reserved:
    """What the session-row UPDATE of an append returns."""

    last_seq: int
    active_tokens: int
    compaction_threshold: int | None
    memory_type: str = MemoryType.CONVERSATION_HISTORY
    pending_scratch: int = 0
    search_indexed_seq: int = 0

    def woke_search_index(self, appended: int) -> bool:
        """Whether the session's messages were all indexed before this append: then this append
        is the one that wakes the indexer (while it is behind, later appends need not)."""
        return self.search_indexed_seq == self.last_seq - appended

    @property
    def over_threshold(self) -> bool:
        return self.compaction_threshold is not None and self.active_tokens > self.compaction_threshold


# The session-row UPDATE every append starts with (table name from the model, values as
# parameters: count, token total twice (active context and raw history), updated_at, session id, team id).
_RESERVE_SQL = (
    f"UPDATE {Session._meta.db_table} SET last_seq = last_seq + %s, active_tokens = active_tokens + %s, "  # noqa: S608
    "history_tokens = history_tokens + %s, updated_at = %s WHERE id = %s AND team_id = %s "
    "RETURNING last_seq, active_tokens, compaction_threshold, memory_type, pending_scratch, search_indexed_seq"
)


def _reserve_seqs(*, session_id: uuid.UUID, team_id: int, count: int, added_tokens: int) -> Reserved:
    """Take `count` seqs from the team's session counter and add the tokens.

    One UPDATE ... RETURNING both row-locks the session (so concurrent writers queue
    here, and seqs are gap-free) and reads the new counter and token total, in a single
    round trip; the threshold check then costs no query.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            _RESERVE_SQL,
            [
                count,
                added_tokens,
                added_tokens,
                timezone.now(),
                Session._meta.pk.get_db_prep_value(session_id, connection),
                team_id,
            ],
        )
        row = cursor.fetchone()
    if row is None:
        raise NotFound("Session not found.")
    return Reserved(
        last_seq=int(row[0]),
        active_tokens=int(row[1]),
        compaction_threshold=row[2],
        memory_type=row[3],
        pending_scratch=int(row[4]),
        search_indexed_seq=int(row[5]),
    )


@functools.lru_cache(maxsize=64)
def _numbered_insert_sql(count: int, attnames: tuple[str, ...]) -> str:
    """PostgreSQL: take `count` seqs from the team's session counter and insert `count`
    message rows numbered with them, in ONE statement (a data-modifying CTE).

    Parameters: count, token total twice, updated_at, session id, team id, then every row's
    values of the `attnames` fields (model order), its `seq` replaced by its distance from
    the last seq taken. Columns left out are the ones NULL in every row (no column has a
    database default), which keeps the statement short for PostgreSQL to parse.
    """
    quote = connection.ops.quote_name
    fields = [field for field in Message._meta.concrete_fields if field.attname in attnames]
    names = [f"f{index}" for index in range(len(fields))]
    # Typed placeholders: VALUES in a FROM clause would otherwise read untyped values as text.
    values = "(" + ", ".join(f"%s::{field.cast_db_type(connection)}" for field in fields) + ")"
    selected = ", ".join(
        f"s.last_seq - v.{name}" if field.attname == "seq" else f"v.{name}"
        for field, name in zip(fields, names, strict=True)
    )
    columns = ", ".join(quote(column(field)) for field in fields)
    # Table and column names come from the models; every value is a parameter.
    return (
        f"WITH s AS ({_RESERVE_SQL}), "  # noqa: S608
        f"i AS (INSERT INTO {quote(Message._meta.db_table)} ({columns}) "
        f"SELECT {selected} FROM s, (VALUES {', '.join([values] * count)}) AS v ({', '.join(names)}) "
        "RETURNING seq) "
        "SELECT i.seq, s.active_tokens, s.compaction_threshold, s.memory_type, s.pending_scratch, "
        "s.search_indexed_seq FROM i, s"
    )


def _insert_numbered(*, session_id: uuid.UUID, team_id: int, rows: list[Message]) -> Reserved:
    """Reserve seqs and insert `rows` numbered with them, as one statement (see above).

    The UPDATE row-locks the session until the statement's transaction ends, exactly as
    `_reserve_seqs` does, so seqs stay gap-free. Run in autocommit, the whole append is one
    round trip instead of four (BEGIN, UPDATE, INSERT, COMMIT). Nothing is written, and
    NotFound raised, when the team has no such session.
    """
    # The connection itself, not django.db's proxy: each field's prep asks it for its vendor and
    # operations, and every question through the proxy is a context-local lookup.
    db = connections[DEFAULT_DB_ALIAS]
    fields = Message._meta.concrete_fields
    added_tokens = sum(row.token_count for row in rows)
    values = [
        # What bulk_create's compiler does: pre_save (timestamps), then prep for the database.
        [
            len(rows) - 1 - offset
            if field.attname == "seq"
            else field.get_db_prep_save(field.pre_save(row, add=True), db)
            for field in fields
        ]
        for offset, row in enumerate(rows)
    ]
    kept = [index for index in range(len(fields)) if any(row[index] is not None for row in values)]
    params: list[Any] = [
        len(rows),
        added_tokens,
        added_tokens,
        timezone.now(),
        Session._meta.pk.get_db_prep_value(session_id, db),
        team_id,
        *(row[index] for row in values for index in kept),
    ]
    sql = _numbered_insert_sql(len(rows), tuple(fields[index].attname for index in kept))
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        results = cursor.fetchall()
    if not results:
        raise NotFound("Session not found.")
    _number(rows, last=max(row[0] for row in results))
    for row in rows:
        row._state.adding = False
        row._state.db = connection.alias
    _, active, threshold, memory_type, pending_scratch, search_indexed_seq = results[0]
    return Reserved(
        last_seq=rows[-1].seq,
        active_tokens=int(active),
        compaction_threshold=threshold,
        memory_type=memory_type,
        pending_scratch=int(pending_scratch),
        search_indexed_seq=int(search_indexed_seq),
    )


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


def _replayed(*, session_id: uuid.UUID, messages: Sequence[Mapping[str, Any]], path: str) -> list[Message] | None:
    """Messages already stored under these client-chosen ids: a retried request.

    Only a request whose every message carries an id that is already stored in this
    session, with the same fields, is a replay; the same id with other content is a
    MessageIdReused (never silently answered with what was stored), and anything else that
    collides is a conflict, never a partial write.
    """
    ids = [m["message_id"] for m in messages if m.get("message_id")]
    stored = {m.pk: m for m in Message.objects.filter(pk__in=ids)}
    if not stored:
        return None
    if (
        len(ids) != len(messages)
        or len(stored) != len(messages)
        or any(m.session_id != session_id for m in stored.values())
    ):
        raise Conflict(
            "message_id already used by another message.",
            fields={"message_id": ["already used by another message"]},
        )
    for index, message in enumerate(messages):
        if _differs(stored[message["message_id"]], message):
            field = f"{path}[{index}].message_id" if path else "message_id"
            raise MessageIdReused(
                f"{field}: already names a stored message with other content; a retry must resend the same message.",
                fields={field: ["already names a stored message with other content"]},
            )
    return sorted(stored.values(), key=lambda m: m.seq)


def _differs(row: Message, sent: Mapping[str, Any]) -> bool:
    """Whether a resent message is not the one stored under its id. The turn's scratch that
    the server moved into the stored `meta` afterwards is not part of what was sent."""
    for name in MESSAGE_FIELDS:
        stored, resent = getattr(row, name), sent.get(name)
        if name == "meta":
            stored, resent = _without_scratch(stored), _without_scratch(resent)
        if stored != resent:
            return True
    return row.occurred_at != sent.get("occurred_at")


def _without_scratch(meta: Any) -> Any:
    if isinstance(meta, dict):
        meta = {key: value for key, value in meta.items() if key != "scratch"}
    return meta or None


@dataclass(frozen=True)
class AppendResult:
    messages: list[Message]
    replayed: bool  # True when every message was already stored by an earlier attempt


def message_append(
    *,
    session: Session,
    messages: Sequence[Mapping[str, Any]],
    path: str = "messages",
    round_id: int | None = None,
) -> AppendResult:
    """Append validated messages atomically: all get consecutive seqs, or none is stored.

    A message may carry a client-chosen `message_id`; re-sending the same request then
    returns the stored messages instead of duplicating them, so clients can retry safely.
    With `round_id` the messages are posts of that round (each may carry its `post_id`).
    """
    return _append(
        session_id=session.pk,
        team_id=session.team_id,
        messages=messages,
        path=path,
        session=session,
        round_id=round_id,
    )


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
    round_id: int | None = None,
) -> AppendResult:
    counts = [_count_tokens(m) for m in messages]  # CPU work outside the lock
    has_client_ids = any(m.get("message_id") for m in messages)
    owner: dict[str, Any] = {"session": session} if session is not None else {"session_id": session_id}
    rows = [
        Message(
            id=m.get("message_id") or uuid.uuid4(),
            seq=0,  # numbered under the session lock
            token_count=counts[offset],
            round_id=round_id,
            post_id=m.get("post_id"),
            occurred_at=m.get("occurred_at"),
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
                reserved = _insert_numbered(session_id=session_id, team_id=team_id, rows=rows)
                if reserved.woke_search_index(len(rows)):
                    search.wake_on_commit(team_id=team_id)
                if reserved.over_threshold:
                    _queue_compaction(session_id)
                if reserved.memory_type == MemoryType.KG:
                    fact_extraction.fact_extraction_request_if_due(session_id=session_id, team_id=team_id)
            if reserved.pending_scratch and scratch.has_final_answer(rows):
                # Autocommit: the rows are committed already; settling is exact anyway (by seq).
                scratch.scratch_settle(session_id=session_id, appended=rows)
        else:
            with transaction.atomic():
                reserved = _reserve_seqs(
                    session_id=session_id, team_id=team_id, count=len(rows), added_tokens=sum(counts)
                )
                _check_tool_results(session_id=session_id, messages=messages, path=path)
                _number(rows, last=reserved.last_seq)
                Message.objects.bulk_create(rows)
                if reserved.woke_search_index(len(rows)):
                    search.wake_on_commit(team_id=team_id)
                if reserved.over_threshold:
                    _queue_compaction(session_id)
                if reserved.memory_type == MemoryType.KG:
                    fact_extraction.fact_extraction_request_if_due(session_id=session_id, team_id=team_id)
                if reserved.pending_scratch and scratch.has_final_answer(rows):
                    scratch.scratch_settle(session_id=session_id, appended=rows)
    except IntegrityError:
        replay = _replayed(session_id=session_id, messages=messages, path=path) if has_client_ids else None
        if replay is None:
            raise
        return AppendResult(messages=replay, replayed=True)
    return AppendResult(messages=rows, replayed=False)


def _queue_compaction(session_id: uuid.UUID) -> None:
    """The append took the session over its threshold: record a pending run (in the
    append's transaction when there is one; on the one-statement path, right after it).
    A session that just had a failed or skipped run waits COMPACTION_MIN_INTERVAL."""
    session = Session.objects.get(pk=session_id)
    compaction.compaction_request_if_due(session=session)


@transaction.atomic
def message_update(*, message: Message, data: Mapping[str, Any]) -> Message:
    """Change a stored message's fields and recount its tokens; takes the session's row lock."""
    # occurred_at is not a chat field (no tokens, not sent to an LLM) but may be corrected too.
    changed = [field for field in (*MESSAGE_FIELDS, "occurred_at") if field in data]
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
    _recount_active_tokens(message.session_id)
    search.index_message_edit(message=message)
    return message


@transaction.atomic
def message_delete(*, message: Message) -> None:
    """Delete one message and recount the session's tokens; takes the session's row lock."""
    session_id, seq = message.session_id, message.seq
    _lock_before_deleting_messages(session_id)
    message.delete()
    _recount_active_tokens(session_id)
    search.index_after_message_delete(session_id=session_id, seq=seq)


def _lock_before_deleting_messages(session_id: uuid.UUID) -> None:
    """Take the session's row lock before deleting any of its messages. An index run locks the
    session, then writes items that refer to its messages: a delete that locked the messages
    first and the session second deadlocked with it on PostgreSQL."""
    session_lock(session_id=session_id, fields=("id",))


def _recount_active_tokens(session_id: uuid.UUID) -> None:
    """Edits and deletions change the active context's and the history's sizes; appends add to
    them directly. Rare, so the history is summed again rather than adjusted. Takes the
    session's row lock, so the tokens of an append running meanwhile are counted once."""
    session = session_lock(session_id=session_id)
    session.active_tokens = compaction.active_tokens(session, latest_done_run(session_id))
    session.history_tokens = Message.objects.filter(session_id=session_id).aggregate(
        total=Coalesce(Sum("token_count"), 0)
    )["total"]
    session.save(update_fields=["active_tokens", "history_tokens"])


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
    event_record(team_id=team.pk, session=session, kind=MemoryEvent.Kind.IMPORTED, data={"messages": len(rest)})
    return session
