"""The session row lock: held by every write that reads a session's counters and writes them back.

An append takes the same lock through its UPDATE of the session row (services._reserve_seqs,
_insert_numbered), so whoever holds it sees no append half done: seqs, token totals and pending
scratch agree with the messages stored. A transaction that locks both a session and one of its
job runs (a compaction, a fact extraction) locks the session first, so two such writers queue
in the same order instead of deadlocking.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from memory_app.conversations.models import Session


def session_lock(*, session_id: uuid.UUID, fields: Sequence[str] = ()) -> Session:
    """The session, row-locked until the transaction ends; `fields` loads only those columns.

    Serialises what reads a session's counters and writes them back (token totals, the range
    a fact extraction takes, the scratch count) with appends and with each other. Raises
    Session.DoesNotExist when the session is gone.
    """
    sessions = Session.objects.select_for_update()
    if fields:
        sessions = sessions.only(*fields)
    return sessions.get(pk=session_id)


def hold_session_lock(*, session_id: uuid.UUID) -> None:
    """Row-lock the session until the transaction ends, reading none of it.

    For a write that numbers something of the session by itself (a round's order): holding the
    lock makes concurrent writers take numbers one after another. A session deleted meanwhile
    is no error here; the write that follows finds it gone.
    """
    Session.objects.select_for_update().filter(pk=session_id).values_list("pk").first()
