"""Export/import in MemoryManager.save_to_file's format, round-tripping a session exactly."""

from __future__ import annotations

import base64

import pytest

from memory_app.conversations.models import Message, Session

pytestmark = pytest.mark.django_db

PNG_URL = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x01" * 8).decode()
RICH_MESSAGES = [
    {"role": "user", "content": "hi", "name": "alice", "send_from": "User", "send_to": "Planner"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
        "reasoning_details": [{"type": "thought", "signature": "sig"}],
        "meta": {"scratch": [{"action": "run_command", "observation": "ok", "duration": 0.5}]},
    },
    {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "42"},
    {
        "role": "assistant",
        "content": {"thought": "t", "next_action": "final_response"},
        "agent_calls": [{"agent_name": "Coder", "request": {"task": "x"}}],
        "structured_data": {"answer": 42},
    },
    {"role": "user", "content": [{"type": "text", "text": "see"}], "images": [PNG_URL, "https://x.test/i.png"]},
]


def without_ids(document: dict) -> dict:
    return {
        **{k: v for k, v in document.items() if k != "timestamp"},
        "messages": [{k: v for k, v in m.items() if k != "message_id"} for m in document["messages"]],
    }


def test_export_import_export_is_identical(api):
    session_id = api.post(
        "/api/v1/sessions/",
        {"system_prompt": "sys", "metadata": {"k": "v"}, "additional_state": {"plan": ["a", "b"]}},
        format="json",
    ).json()["id"]
    assert (
        api.post(f"/api/v1/sessions/{session_id}/messages/", {"messages": RICH_MESSAGES}, format="json").status_code
        == 201
    )

    exported = api.get(f"/api/v1/sessions/{session_id}/export/").json()
    assert exported["memory_type"] == "conversation_history"
    assert exported["messages"][0] == {"role": "system", "content": "sys"}
    assert exported["additional_state"] == {"plan": ["a", "b"]}
    assert isinstance(exported["timestamp"], float)

    imported = api.post("/api/v1/sessions/import/", exported, format="json")
    assert imported.status_code == 201, imported.content
    new_id = imported.json()["id"]
    assert new_id != session_id
    again = api.get(f"/api/v1/sessions/{new_id}/export/").json()
    assert without_ids(again) == without_ids(exported)
    assert Message.objects.filter(session_id=new_id).count() == len(RICH_MESSAGES)


def test_it_imports_a_marsys_save_to_file_document(api):
    document = {
        "memory_type": "conversation_history",
        "messages": [
            {"role": "system", "content": "You are helpful"},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi!", "name": "gpt"},
        ],
        "timestamp": 1700000000.0,
        "additional_state": {"step": 3},
    }
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 201
    session = Session.objects.get(pk=response.json()["id"])
    assert session.system_prompt == "You are helpful"
    assert session.additional_state == {"step": 3}
    context = api.get(f"/api/v1/sessions/{session.pk}/context/").json()["messages"]
    assert context == document["messages"]


def test_a_bad_message_in_an_import_names_it_and_creates_nothing(api):
    document = {"messages": [{"role": "system", "content": "s"}, {"role": "user"}, {"role": "nobody"}]}
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 400
    assert "messages[2].role" in response.json()["fields"]
    assert Session.objects.count() == 0


def test_an_import_with_an_orphan_tool_result_creates_nothing(api):
    document = {"messages": [{"role": "tool", "tool_call_id": "x", "content": "r"}]}
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 400
    assert Session.objects.count() == 0


@pytest.mark.parametrize(
    "first",
    [
        {"role": "system", "content": {"x": 1}, "images": ["/etc/passwd"]},
        {"role": "system", "content": [{"type": "text", "text": "s"}], "tool_calls": "garbage"},
    ],
)
def test_a_leading_system_message_that_is_not_a_prompt_is_validated_like_any_other(api, first):
    response = api.post(
        "/api/v1/sessions/import/", {"messages": [first, {"role": "user", "content": "hi"}]}, format="json"
    )
    assert response.status_code == 400
    assert any(path.startswith("messages[0]") for path in response.json()["fields"])
    assert Session.objects.count() == 0
