"""Scratch memory: the tool executions of a turn, attached to the turn's final answer.

`POST .../scratch/` records one execution (`scratch_record`): a ScratchEntry row with the
session's current last seq, taken under the session-row lock that every append also takes,
and `Session.pending_scratch` + 1. The turn's final answer (the next assistant message that
calls no tool) gets every pending entry, in recording order, as `meta.scratch` (before any
scratch the message already carried), and the entries are deleted (`scratch_settle`). An
assistant message with tool calls is the middle of a turn (its results and more calls follow),
so it never takes the trace, whether the turn is appended one message at a time or as a batch.

"The final answer" is defined by seq, not by timing: an entry recorded when the last seq was
N belongs to the first assistant message without tool calls with seq > N. So settling is
exact on every path. On SQLite (and whenever the append runs in a transaction) it happens in
the append's transaction. PostgreSQL's one-statement append in autocommit has committed when
the append reads `pending_scratch` from its own UPDATE ... RETURNING; the settle then runs in
its own short transaction, and a concurrent append cannot take entries that precede it by seq.
An append that finds no pending entry (the counter comes back 0), or stores no final answer,
does no extra query.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection, transaction

from memory_app.conversations.locks import session_lock
from memory_app.conversations.models import Message, Session
from memory_app.rounds.models import ScratchEntry
from memsite.errors import NotFound

_LOCK_AND_COUNT_SQL = (
    f"UPDATE {Session._meta.db_table} SET pending_scratch = pending_scratch + %s "  # noqa: S608
    "WHERE id = %s AND team_id = %s RETURNING last_seq"
)


def ends_turn(*, role: str, tool_calls: Any) -> bool:
    """Whether a message is a turn's final answer: an assistant message that calls no tool."""
    return role == Message.Role.ASSISTANT and not tool_calls


def has_final_answer(rows: Sequence[Message]) -> bool:
    return any(ends_turn(role=row.role, tool_calls=row.tool_calls) for row in rows)


def _lock_session(*, session_id: uuid.UUID, team_id: int, add: int) -> int:
    """Row-lock the session (as appends do), add `add` to its pending count; its last seq."""
    with connection.cursor() as cursor:
        cursor.execute(_LOCK_AND_COUNT_SQL, [add, Session._meta.pk.get_db_prep_value(session_id, connection), team_id])
        row = cursor.fetchone()
    if row is None:
        raise NotFound("Session not found.")
    return int(row[0])


@transaction.atomic
def scratch_record(*, session: Session, entries: Sequence[Mapping[str, Any]]) -> list[ScratchEntry]:
    """Record tool executions of the current turn; the turn's final answer will carry them.

    Takes the session's row lock, through the UPDATE that counts them as pending.
    """
    last_seq = _lock_session(session_id=session.pk, team_id=session.team_id, add=len(entries))
    rows = [
        ScratchEntry(team_id=session.team_id, session=session, after_seq=last_seq, data=dict(entry))
        for entry in entries
    ]
    return ScratchEntry.objects.bulk_create(rows)


@transaction.atomic
def scratch_settle(*, session_id: uuid.UUID, appended: Sequence[Message] = ()) -> int:
    """Move pending scratch entries into the `meta.scratch` of the final answer each belongs to.

    Returns how many entries were attached. `appended` (rows just inserted) get their new
    meta in memory too. Takes the session's row lock, as scratch_record and appends do.
    """
    session = session_lock(session_id=session_id, fields=("pk", "pending_scratch"))
    pending = list(ScratchEntry.objects.filter(session_id=session_id).order_by("after_seq", "id"))
    if not pending:
        return 0
    # Entries are settled by the first final answer after them, so these are few: the
    # messages of the turn being ended. Tool calls are read to skip the turn's middle
    # (filtered here: `json` columns on PostgreSQL have no equality to test `[]` with).
    answers = [
        (pk, seq, meta)
        for pk, seq, tool_calls, meta in Message.objects.filter(
            session_id=session_id, role=Message.Role.ASSISTANT, seq__gt=pending[0].after_seq
        )
        .order_by("seq")
        .values_list("pk", "seq", "tool_calls", "meta")
        if ends_turn(role=Message.Role.ASSISTANT, tool_calls=tool_calls)
    ]
    by_message: dict[uuid.UUID, tuple[Any, list[ScratchEntry]]] = {}
    for entry in pending:
        target = next(((pk, meta) for pk, seq, meta in answers if seq > entry.after_seq), None)
        if target is None:
            break  # this and every later entry wait for a final answer still to come
        by_message.setdefault(target[0], (target[1], []))[1].append(entry)
    in_memory = {row.pk: row for row in appended}
    attached: list[int] = []
    for message_id, (meta, entries) in by_message.items():
        current = dict(meta) if isinstance(meta, dict) else {}
        scratch = current.get("scratch")
        carried = scratch if isinstance(scratch, list) else []
        current["scratch"] = [entry.data for entry in entries] + list(carried)
        Message.objects.filter(pk=message_id).update(meta=current)
        if message_id in in_memory:
            in_memory[message_id].meta = current
        attached += [entry.pk for entry in entries]
    if attached:
        ScratchEntry.objects.filter(pk__in=attached).delete()
        session.pending_scratch = max(len(pending) - len(attached), 0)
        session.save(update_fields=["pending_scratch"])
    return len(attached)


def scratch_pending(*, session: Session) -> list[ScratchEntry]:
    """Entries waiting for the turn's final answer, in recording order."""
    return list(ScratchEntry.objects.filter(session=session).order_by("after_seq", "id"))
