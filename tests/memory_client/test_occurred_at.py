"""The client writes the time a message was said (`occurred_at`), and keeps it through a
keep_last and a save/load round trip."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memory_app.conversations.models import Message as MessageRow
from memory_client import MessageError

LAST_JULY = datetime(2025, 7, 14, 16, 30, tzinfo=UTC)


def stored_times(session_id: str) -> list[Any]:
    return list(MessageRow.objects.filter(session_id=session_id).order_by("seq").values_list("occurred_at", flat=True))


def test_add_stores_the_time_a_message_was_said(make_memory) -> None:
    memory = make_memory()

    memory.add(role="user", content="went kayaking", occurred_at=LAST_JULY)
    memory.add(role="assistant", content="nice", occurred_at="2025-07-14T18:31:00+02:00")
    memory.add(role="user", content="undated")

    assert stored_times(memory.session_id) == [LAST_JULY, datetime(2025, 7, 14, 16, 31, tzinfo=UTC), None]
    assert memory.retrieve_all()[0] == {"role": "user", "content": "went kayaking"}  # the LLM dict is unchanged


def test_add_with_a_naive_time_is_refused_and_stores_nothing(make_memory) -> None:
    memory = make_memory()

    with pytest.raises(MessageError) as refused:
        memory.add(role="user", content="x", occurred_at=datetime(2025, 7, 14, 16, 30))  # naive

    assert "occurred_at" in str(refused.value)
    assert stored_times(memory.session_id) == []


def test_keep_last_keeps_the_times(make_memory) -> None:
    memory = make_memory()
    memory.add(role="user", content="old", occurred_at=LAST_JULY)
    memory.add(role="user", content="kept", occurred_at=LAST_JULY.replace(day=15))

    memory.keep_last(1)

    assert stored_times(memory.session_id) == [LAST_JULY.replace(day=15)]


def test_save_then_load_keeps_the_times(make_memory, tmp_path: Path) -> None:
    source = make_memory()
    source.add(role="user", content="dated", occurred_at=LAST_JULY)
    source.add(role="assistant", content="undated")
    path = tmp_path / "memory.json"
    source.save_to_file(str(path))

    target = make_memory()
    target.load_from_file(str(path))

    assert stored_times(target.session_id) == [LAST_JULY, None]
