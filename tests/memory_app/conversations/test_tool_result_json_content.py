"""A tool result written as JSON text names the call it answers in its content: the memory
module's documentation writes `add(role="tool", content='{"tool_call_id": "call_123", ...}')`."""

from __future__ import annotations

import json

import pytest

from memory_app.conversations.models import Message

pytestmark = pytest.mark.django_db

CALL = {"id": "call_123", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}


def append(api, session_id: str, *messages: dict):
    return api.post(f"/api/v1/sessions/{session_id}/messages/", {"messages": list(messages)}, format="json")


def test_a_tool_result_takes_the_tool_call_id_its_json_content_names(api, session_id):
    text = '{"tool_call_id": "call_123", "output": "Result data"}'
    created = append(
        api,
        session_id,
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "content": text, "name": "calculator"},
    )
    assert created.status_code == 201, created.content
    served = api.get(f"/api/v1/sessions/{session_id}/context/").json()["messages"]
    assert served[-1] == {"role": "tool", "content": text, "tool_call_id": "call_123", "name": "calculator"}


def test_an_object_content_names_its_call_too(api, session_id):
    created = append(
        api,
        session_id,
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "content": {"tool_call_id": "call_123", "output": 4}},
    )
    assert created.status_code == 201, created.content
    assert Message.objects.get(session_id=session_id, role="tool").tool_call_id == "call_123"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"output": "no id"}', "required for role 'tool'"),
        ('{"tool_call_id": "", "output": 1}', "required for role 'tool'"),
        ('{"tool_call_id": 7}', "required for role 'tool'"),
        ("not json {", "required for role 'tool'"),
        (json.dumps({"tool_call_id": "call_unknown"}), "answers no earlier assistant tool call"),
        (json.dumps({"tool_call_id": "c" * 201}), "longer than 200 characters"),
    ],
)
def test_content_that_names_no_known_call_is_refused_and_stores_nothing(api, session_id, content, reason):
    append(api, session_id, {"role": "assistant", "content": None, "tool_calls": [CALL]})
    refused = append(api, session_id, {"role": "tool", "content": content})
    assert refused.status_code == 400
    fields = refused.json()["fields"]
    [field] = fields
    assert field.endswith("tool_call_id") and reason in fields[field][0]
    assert not Message.objects.filter(session_id=session_id, role="tool").exists()


def test_an_explicit_tool_call_id_wins_over_the_content(api, session_id):
    other = {**CALL, "id": "call_9"}
    created = append(
        api,
        session_id,
        {"role": "assistant", "content": None, "tool_calls": [CALL, other]},
        {"role": "tool", "content": '{"tool_call_id": "call_123"}', "tool_call_id": "call_9"},
    )
    assert created.status_code == 201, created.content
    assert Message.objects.get(session_id=session_id, role="tool").tool_call_id == "call_9"
