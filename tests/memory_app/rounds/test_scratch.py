"""Scratch memory: tool executions attached to the next assistant message as meta.scratch."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_app.conversations import services
from memory_app.conversations.models import Message, Session
from memory_app.rounds.models import ScratchEntry

pytestmark = pytest.mark.django_db


def record(api, session_id: str, action: str, observation, duration=None) -> dict:
    body = {"action": action, "observation": observation, "duration": duration}
    response = api.post(f"/api/v1/sessions/{session_id}/scratch/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def append(api, session_id: str, role: str, content: str) -> dict:
    response = api.post(f"/api/v1/sessions/{session_id}/messages/", {"role": role, "content": content}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def meta(message_id: str):
    return Message.objects.get(pk=message_id).meta


def test_scratch_goes_to_the_next_assistant_message_in_recording_order(api, session_id):
    append(api, session_id, "user", "list my files")
    record(api, session_id, "run_command", "file1.txt", 0.5)
    record(api, session_id, "read_file", {"text": "# README"}, 0.2)
    pending = api.get(f"/api/v1/sessions/{session_id}/scratch/").json()
    assert [(p["action"], p["after_seq"]) for p in pending] == [("run_command", 1), ("read_file", 1)]
    answer = append(api, session_id, "assistant", "I found your files")
    assert meta(answer["message_id"]) == {
        "scratch": [
            {"action": "run_command", "observation": "file1.txt", "duration": 0.5},
            {"action": "read_file", "observation": {"text": "# README"}, "duration": 0.2},
        ]
    }
    assert api.get(f"/api/v1/sessions/{session_id}/scratch/").json() == []
    assert Session.objects.get(pk=session_id).pending_scratch == 0


def test_user_and_tool_messages_leave_the_scratch_pending(api, session_id):
    record(api, session_id, "run_command", "ok")
    user = append(api, session_id, "user", "and then?")
    assert meta(user["message_id"]) is None
    assert ScratchEntry.objects.count() == 1
    later = append(api, session_id, "assistant", "done")
    assert meta(later["message_id"])["scratch"] == [{"action": "run_command", "observation": "ok", "duration": None}]


def test_each_turns_scratch_goes_to_its_own_assistant_message(api, session_id):
    record(api, session_id, "first", 1)
    one = append(api, session_id, "assistant", "one")
    two = append(api, session_id, "assistant", "two")
    record(api, session_id, "second", 2)
    three = append(api, session_id, "assistant", "three")
    assert [entry["action"] for entry in meta(one["message_id"])["scratch"]] == ["first"]
    assert meta(two["message_id"]) is None
    assert [entry["action"] for entry in meta(three["message_id"])["scratch"]] == ["second"]


def test_the_first_assistant_message_of_a_batch_takes_it_and_keeps_its_own_meta(api, session_id):
    record(api, session_id, "run_command", "ok")
    batch = {
        "messages": [
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "a1", "meta": {"scratch": [{"action": "own"}], "k": 1}},
            {"role": "assistant", "content": "a2"},
        ]
    }
    answer = api.post(f"/api/v1/sessions/{session_id}/messages/", batch, format="json").json()["messages"]
    assert meta(answer[1]["message_id"]) == {
        "scratch": [{"action": "run_command", "observation": "ok", "duration": None}, {"action": "own"}],
        "k": 1,
    }
    assert meta(answer[2]["message_id"]) is None


def test_a_post_from_an_agent_is_an_assistant_message_and_takes_the_scratch(api, session_id):
    api.post(f"/api/v1/sessions/{session_id}/rounds/", {"user_query": "q", "id": "round-1"}, format="json")
    record(api, session_id, "execute_code", "1000", 1.5)
    created = api.post(
        f"/api/v1/sessions/{session_id}/rounds/round-1/posts/",
        {"message": "1000 rows", "send_from": "CodeInterpreter", "send_to": "Planner"},
        format="json",
    ).json()
    assert meta(created["message_id"])["scratch"][0]["action"] == "execute_code"


def test_scratch_never_reaches_the_llm_context(api, session_id):
    append(api, session_id, "user", "u")
    record(api, session_id, "run_command", "secret output")
    append(api, session_id, "assistant", "done")
    context = api.get(f"/api/v1/sessions/{session_id}/context/").json()
    assert b"secret output" not in str(context).encode()
    assert context["messages"][-1] == {"role": "assistant", "content": "done"}


def test_a_scratch_entry_needs_an_action(api, session_id):
    response = api.post(f"/api/v1/sessions/{session_id}/scratch/", {"observation": "x"}, format="json")
    assert response.status_code == 400
    assert "action" in response.json()["fields"]
    negative = api.post(f"/api/v1/sessions/{session_id}/scratch/", {"action": "a", "duration": -1}, format="json")
    assert negative.status_code == 400


def test_an_append_reads_the_scratch_table_only_when_something_is_pending(api, session_id):
    session = Session.objects.get(pk=session_id)
    with CaptureQueriesContext(connection) as nothing_pending:
        services.message_append(session=session, messages=[{"role": "assistant", "content": "a"}])
    record(api, session_id, "run_command", "ok")
    with CaptureQueriesContext(connection) as one_pending:
        services.message_append(session=session, messages=[{"role": "assistant", "content": "b"}])
    table = ScratchEntry._meta.db_table
    assert not any(table in query["sql"] for query in nothing_pending.captured_queries)
    assert any(table in query["sql"] for query in one_pending.captured_queries)
