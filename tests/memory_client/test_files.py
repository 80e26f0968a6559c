"""save_to_file / load_from_file: the export document, round trips, and marsys-written files."""

from __future__ import annotations

import json

import pytest

from memory_app.conversations.models import Message as MessageRow
from memory_app.conversations.models import Session
from memory_client import MemoryClientError, MessageError
from tests.memory_client.conftest import PNG_DATA_URL

CALL = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}


def fill(memory, png_path) -> None:
    memory.add(role="user", content="list files", images=[str(png_path)])
    memory.add(role="assistant", content=None, tool_calls=[CALL], agent_calls=[{"agent_name": "B", "request": "go"}])
    memory.add(role="tool", content="a.txt", tool_call_id="call_1", name="ls")
    memory.add(role="assistant", content={"answer": "a.txt"})


def test_save_then_load_round_trips_messages_prompt_and_additional_state(make_memory, png_path, tmp_path):
    source = make_memory(description="You are helpful")
    fill(source, png_path)
    path = tmp_path / "nested" / "memory.json"

    source.save_to_file(str(path), additional_state={"plan": ["step 1"], "done": False})

    document = json.loads(path.read_text())
    assert document["memory_type"] == "conversation_history"
    assert document["additional_state"] == {"plan": ["step 1"], "done": False}
    assert document["messages"][0] == {"role": "system", "content": "You are helpful"}
    assert document["messages"][1]["images"] == [PNG_DATA_URL]
    assert isinstance(document["timestamp"], float)
    assert Session.objects.get(pk=source.session_id).additional_state == {"plan": ["step 1"], "done": False}

    target = make_memory(description="to be replaced")
    target.add(role="user", content="to be dropped")
    state = target.load_from_file(str(path))

    assert state == {"plan": ["step 1"], "done": False}
    assert target.retrieve_all() == source.retrieve_all()
    fields = ("role", "content", "name", "tool_calls", "tool_call_id", "agent_calls", "images")
    assert list(MessageRow.objects.filter(session_id=target.session_id).values(*fields)) == list(
        MessageRow.objects.filter(session_id=source.session_id).values(*fields)
    )
    assert Session.objects.get(pk=target.session_id).additional_state == state


def test_a_session_loads_its_own_file_back(make_memory, png_path, tmp_path):
    memory = make_memory(description="sys")
    fill(memory, png_path)
    before = memory.retrieve_all()
    memory.save_to_file(str(tmp_path / "m.json"))
    memory.add(role="user", content="after the save")

    assert memory.load_from_file(str(tmp_path / "m.json")) is None
    assert memory.retrieve_all() == before


def test_without_additional_state_the_file_has_none(make_memory, tmp_path):
    memory = make_memory()
    memory.save_to_file(str(tmp_path / "m.json"), additional_state={"old": 1})
    memory.save_to_file(str(tmp_path / "m.json"))
    assert "additional_state" not in json.loads((tmp_path / "m.json").read_text())


def test_a_marsys_written_file_loads(make_memory, tmp_path):
    # What marsys 0.2.1's save_to_file writes: retrieve_all()'s LLM dicts.
    document = {
        "memory_type": "conversation_history",
        "messages": [
            {"role": "system", "content": "marsys prompt"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": PNG_DATA_URL}}],
            },
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "content": "a.txt", "tool_call_id": "call_1", "name": "ls"},
            {"role": "assistant", "content": '{"answer":"a.txt"}'},
        ],
        "timestamp": 1.0,
        "additional_state": {"k": "v"},
    }
    path = tmp_path / "marsys.json"
    path.write_text(json.dumps(document))

    memory = make_memory()
    assert memory.load_from_file(str(path)) == {"k": "v"}
    assert memory.retrieve_all() == document["messages"]


def test_a_missing_file_leaves_memory_alone(make_memory, tmp_path):
    memory = make_memory(description="sys")
    memory.add(role="user", content="kept")
    assert memory.load_from_file(str(tmp_path / "absent.json")) is None
    assert len(memory.retrieve_all()) == 2


def test_a_file_with_a_bad_message_changes_nothing(make_memory, tmp_path):
    memory = make_memory(description="sys")
    memory.add(role="user", content="kept")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"memory_type": "conversation_history", "messages": [{"content": "no role"}]}))
    with pytest.raises(MessageError):
        memory.load_from_file(str(path))
    path.write_text("{not json")
    with pytest.raises(MemoryClientError, match="Failed to load memory"):
        memory.load_from_file(str(path))
    assert [m["content"] for m in memory.retrieve_all()] == ["sys", "kept"]
