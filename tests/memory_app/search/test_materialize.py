"""An index run turns a session's new messages into items in a few statements for the whole step,
and the items are exactly each message's documents: text, context, speaker, role, seq, time and
piece, for tool calls, photos with captions, named speakers, long messages and edits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_app.conversations import services
from memory_app.conversations.models import Message, Session
from memory_app.search import documents
from memory_app.search import services as search
from memory_app.search.models import SearchItem
from memory_app.search.text import CHUNK_CHARS
from tests.conftest import Tenant
from tests.memory_app.search.test_search_page import run_index

pytestmark = pytest.mark.usefixtures("job_outbox")  # sends are recorded, never reach a broker

ItemFields = tuple[Any, ...]


def agent_session(tenant: Tenant) -> Session:
    """A session with what agents write: a named speaker with a time of its own, a tool call and its
    output, a photo with a caption, and a long tool output cut into pieces."""
    session = services.session_create(team=tenant.team, system_prompt="You are helpful.")
    call = {"id": "call_7", "type": "function", "function": {"name": "read_log", "arguments": '{"lines": 40}'}}
    long_output = " ".join(f"line{n} worker restarted after the ledger flush" for n in range(80))
    services.message_append(
        session=session,
        messages=[
            {
                "role": "user",
                "name": "Rosa",
                "content": "Rosa: why did the nightly export stop?",
                "occurred_at": datetime(2026, 3, 2, 9, 30, tzinfo=UTC),
            },
            {"role": "assistant", "content": "Let me read the log.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_7", "name": "read_log", "content": long_output},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Here is the dashboard"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}, "caption": "a red graph"},
                ],
            },
        ],
    )
    return session


def expected_items(session: Session) -> set[ItemFields]:
    """Each message's documents, built one message at a time from the message before it."""
    messages = list(Message.objects.filter(session=session).order_by("seq"))
    return {
        (doc.source_key, doc.chunk, doc.text, doc.context, doc.agent, doc.role, doc.seq, doc.occurred_at)
        for previous, message in zip([None, *messages], messages, strict=False)
        for doc in documents.message_docs(message, agent=session.agent_name, previous=previous)
    }


def stored_items(session: Session) -> set[ItemFields]:
    rows = SearchItem.objects.filter(session=session, kind="message").values_list(
        "source_key", "chunk", "text", "context", "agent", "role", "seq", "occurred_at"
    )
    return set(rows)


def test_the_run_stores_each_messages_documents(tenant):
    session = agent_session(tenant)
    run_index(tenant.team.pk)

    assert stored_items(session) == expected_items(session)
    assert SearchItem.objects.filter(session=session, chunk__gt=0).exists()  # the long output is in pieces
    assert set(SearchItem.objects.filter(session=session).values_list("state", flat=True)) == {"indexed"}


def test_an_edit_after_the_run_leaves_the_items_of_the_edited_messages_documents(tenant):
    session = agent_session(tenant)
    run_index(tenant.team.pk)
    output = Message.objects.get(session=session, role="tool")
    kept = dict(SearchItem.objects.filter(message__seq=1, session=session).values_list("chunk", "embedding"))

    services.message_update(message=output, data={"content": "the export ran out of disk"})  # pieces 3 -> 1
    run_index(tenant.team.pk)

    assert stored_items(session) == expected_items(session)
    assert SearchItem.objects.filter(message=output).count() == 1
    # An unchanged piece keeps the vector it had: it is not embedded again.
    assert dict(SearchItem.objects.filter(message__seq=1, session=session).values_list("chunk", "embedding")) == kept


def test_a_step_costs_the_same_statements_for_ten_or_forty_messages(tenant):
    def statements_to_materialize(count: int) -> int:
        session = services.session_create(team=tenant.team, system_prompt="You are helpful.")
        services.message_append(
            session=session, messages=[{"role": "user", "content": f"note {n} about the ledger"} for n in range(count)]
        )
        with CaptureQueriesContext(connection) as queries:
            assert search._materialize_messages(team_id=tenant.team.pk) == count
        return len(queries)

    few, many = statements_to_materialize(10), statements_to_materialize(40)
    # One INSERT holds as many rows as the database's bound parameters allow (SQLite 999: ~37
    # items), so 40 items may take a second one; three statements a message would add 90.
    assert many - few <= 1


def test_a_long_message_is_found_by_a_word_of_each_of_its_pieces(tenant):
    session = services.session_create(team=tenant.team, system_prompt="You are helpful.")
    words = [f"marker{n}" for n in range(400)]
    (message,) = services.message_append(
        session=session, messages=[{"role": "user", "content": " ".join(words)}]
    ).messages
    run_index(tenant.team.pk)

    pieces = list(SearchItem.objects.filter(message=message).order_by("chunk"))
    assert all(len(piece.text) <= CHUNK_CHARS for piece in pieces)
    assert " ".join(piece.text for piece in pieces).split()[-1] == "marker399"
    for word in ("marker0", "marker150", "marker399"):
        result = search_for(tenant.team.pk, word)
        assert any(word in text.split() for text in result), word


def search_for(team_id: int, query: str) -> list[str]:
    from memory_app.search.engines import Filters
    from memory_app.search.selectors import search as search_memory

    return [hit.item.text for hit in search_memory(filters=Filters(team_id=team_id), query=query, limit=5).hits]
