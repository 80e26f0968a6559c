"""Scratch memory: a turn's tool executions attached to its final answer as meta.scratch."""

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


def call(call_id: str, name: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def tool_calling(*calls: dict) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def tool_result(call_id: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def append_message(api, session_id: str, message: dict) -> dict:
    response = api.post(f"/api/v1/sessions/{session_id}/messages/", message, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def stored_metas(api, session_id: str) -> list[tuple[str, bool, object]]:
    """(role, calls tools, meta) of every message, read back through the API."""
    response = api.get(f"/api/v1/sessions/{session_id}/messages/")
    assert response.status_code == 200, response.content
    return [(m["role"], bool(m["tool_calls"]), m["meta"]) for m in response.json()["results"]]


def entry(action: str, observation) -> dict:
    return {"action": action, "observation": observation, "duration": None}


def test_a_turn_with_several_tool_calls_puts_its_whole_trace_on_the_final_answer(api, session_id):
    append(api, session_id, "user", "list my files and read the README")
    record(api, session_id, "plan", "list, then read")
    append_message(api, session_id, tool_calling(call("c1", "run_command")))
    record(api, session_id, "run_command", "README.md")
    append_message(api, session_id, tool_result("c1", "README.md"))
    append_message(api, session_id, tool_calling(call("c2", "read_file")))
    record(api, session_id, "read_file", "# README")
    append_message(api, session_id, tool_result("c2", "# README"))
    append(api, session_id, "assistant", "Your README says hello")
    trace = [entry("plan", "list, then read"), entry("run_command", "README.md"), entry("read_file", "# README")]
    assert stored_metas(api, session_id) == [
        ("user", False, None),
        ("assistant", True, None),
        ("tool", False, None),
        ("assistant", True, None),
        ("tool", False, None),
        ("assistant", False, {"scratch": trace}),
    ]
    assert api.get(f"/api/v1/sessions/{session_id}/scratch/").json() == []
    assert Session.objects.get(pk=session_id).pending_scratch == 0


def test_a_turn_appended_as_one_batch_puts_its_trace_on_the_final_answer(api, session_id):
    append(api, session_id, "user", "list my files and read the README")
    record(api, session_id, "run_command", "README.md")
    record(api, session_id, "read_file", "# README")
    turn = [
        tool_calling(call("c1", "run_command")),
        tool_result("c1", "README.md"),
        tool_calling(call("c2", "read_file")),
        tool_result("c2", "# README"),
        {"role": "assistant", "content": "Your README says hello"},
    ]
    response = api.post(f"/api/v1/sessions/{session_id}/messages/", {"messages": turn}, format="json")
    assert response.status_code == 201, response.content
    assert stored_metas(api, session_id) == [
        ("user", False, None),
        ("assistant", True, None),
        ("tool", False, None),
        ("assistant", True, None),
        ("tool", False, None),
        ("assistant", False, {"scratch": [entry("run_command", "README.md"), entry("read_file", "# README")]}),
    ]
    assert api.get(f"/api/v1/sessions/{session_id}/scratch/").json() == []


def test_a_trace_recorded_before_any_turn_has_ended_waits_for_the_final_answer(api, session_id):
    record(api, session_id, "warm_up", "ready")
    append_message(api, session_id, tool_calling(call("c1", "run_command")))
    append_message(api, session_id, tool_result("c1", "file1.txt"))
    pending = api.get(f"/api/v1/sessions/{session_id}/scratch/").json()
    assert [(p["action"], p["after_seq"]) for p in pending] == [("warm_up", 0)]
    assert Session.objects.get(pk=session_id).pending_scratch == 1
    append(api, session_id, "assistant", "I found file1.txt")
    assert stored_metas(api, session_id) == [
        ("assistant", True, None),
        ("tool", False, None),
        ("assistant", False, {"scratch": [entry("warm_up", "ready")]}),
    ]
    assert api.get(f"/api/v1/sessions/{session_id}/scratch/").json() == []
