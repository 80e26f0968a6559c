"""The marsys-compatible dataclasses, without a server."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memory_client import AgentCallMsg, Message, MessageContent, MessageError, ToolCallMsg
from memory_client.messages import image_url
from tests.memory_client.conftest import PNG_BYTES, PNG_DATA_URL

OPENAI_CALL = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}


def test_tool_call_round_trips_through_openai_format():
    call = ToolCallMsg.from_dict(OPENAI_CALL)
    assert call == ToolCallMsg(id="call_1", call_id="call_1", type="function", name="ls", arguments="{}")
    assert call.to_dict() == OPENAI_CALL


@pytest.mark.parametrize(
    "kwargs",
    [
        {"id": "", "call_id": "c", "type": "function", "name": "n", "arguments": "{}"},
        {"id": "c", "call_id": "", "type": "function", "name": "n", "arguments": "{}"},
        {"id": "c", "call_id": "c", "type": "", "name": "n", "arguments": "{}"},
        {"id": "c", "call_id": "c", "type": "function", "name": "", "arguments": "{}"},
        {"id": "c", "call_id": "c", "type": "function", "name": "n", "arguments": {}},
    ],
)
def test_tool_call_validation_raises_value_error_like_marsys(kwargs):
    with pytest.raises(ValueError):
        ToolCallMsg(**kwargs)


def test_agent_call_validation_and_dicts():
    assert AgentCallMsg.from_dict({"agent_name": "B", "request": {"q": 1}}).to_dict() == {
        "agent_name": "B",
        "request": {"q": 1},
    }
    with pytest.raises(ValueError):
        AgentCallMsg(agent_name="", request="x")
    with pytest.raises(ValueError):
        AgentCallMsg(agent_name="B", request=None)


def test_message_converts_call_dicts_and_gets_a_uuid():
    message = Message(role="assistant", tool_calls=[OPENAI_CALL], agent_calls=[{"agent_name": "B", "request": "go"}])
    assert isinstance(message.tool_calls[0], ToolCallMsg)
    assert isinstance(message.agent_calls[0], AgentCallMsg)
    assert len(message.message_id) == 36
    assert Message(role="user").message_id != message.message_id


def test_message_to_dict_and_from_dict_round_trip(png_path):
    message = Message(role="assistant", content={"a": 1}, tool_calls=[OPENAI_CALL], images=[str(png_path)])
    wire = message.to_dict()
    assert wire == {
        "message_id": message.message_id,
        "role": "assistant",
        "content": {"a": 1},
        "tool_calls": [OPENAI_CALL],
        "images": [PNG_DATA_URL],
    }
    assert Message.from_dict({**wire, "seq": 3, "token_count": 9}).to_dict() == wire


def test_to_llm_dict_matches_marsys_for_an_image_path(png_path):
    message = Message(role="user", content="see", images=[str(png_path)], name="alice")
    assert message.to_llm_dict() == {
        "role": "user",
        "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": PNG_DATA_URL}}],
        "name": "alice",
    }


def test_from_response_dict_builds_an_assistant_message():
    message = Message.from_response_dict({"content": "hi", "tool_calls": [OPENAI_CALL]}, default_name="gpt")
    assert (message.role, message.content, message.name) == ("assistant", "hi", "gpt")
    assert message.tool_calls[0].name == "ls"


def test_image_url_sniffs_the_bytes_not_the_extension(tmp_path):
    misnamed = tmp_path / "photo.jpg"
    misnamed.write_bytes(PNG_BYTES)
    assert image_url(str(misnamed)) == PNG_DATA_URL
    assert image_url("https://example.com/a.png") == "https://example.com/a.png"
    assert image_url(PNG_DATA_URL) == PNG_DATA_URL
    with pytest.raises(MessageError):
        image_url(str(tmp_path / "missing.png"))


# --- MessageContent, to_api_format, from_harmonized_response -------------------------------


def test_message_content_keeps_only_the_set_fields():
    content = MessageContent(thought="look first", next_action="call_tool", action_input={"tool": "ls"})
    assert content.to_dict() == {"thought": "look first", "next_action": "call_tool", "action_input": {"tool": "ls"}}
    assert MessageContent().to_dict() == {}
    assert MessageContent.from_dict({"next_action": "final_response", "extra": 1}) == MessageContent(
        next_action="final_response"
    )


@pytest.mark.parametrize("action", ["call_tool", "invoke_agent", "final_response", None])
def test_message_content_accepts_the_three_actions(action):
    assert MessageContent(next_action=action).next_action == action


@pytest.mark.parametrize("action", ["", "respond", "CALL_TOOL"])
def test_message_content_refuses_any_other_next_action_with_a_value_error(action):
    with pytest.raises(ValueError, match="next_action must be one of"):
        MessageContent(next_action=action)
    with pytest.raises(ValueError):
        MessageContent.from_dict({"next_action": action})


def test_a_message_content_given_as_content_is_stored_as_its_dict():
    content = MessageContent(thought="done", next_action="final_response", action_input={"answer": 42})
    message = Message(role="assistant", content=content)
    assert message.content == content.to_dict()
    assert message.to_dict()["content"] == content.to_dict()


def test_to_api_format_is_openai_format_without_memsite_or_marsys_extras(png_path):
    message = Message(
        role="assistant",
        content={"städte": ["Köln"]},
        name="planner",
        tool_calls=[OPENAI_CALL],
        agent_calls=[{"agent_name": "B", "request": "go"}],
        structured_data={"x": 1},
        images=[str(png_path)],
        reasoning_details=[{"signature": "s"}],
    )
    assert message.to_api_format() == {
        "role": "assistant",
        "content": '{"st\\u00e4dte": ["K\\u00f6ln"]}',  # json.dumps' defaults, as marsys
        "name": "planner",
        "tool_calls": [OPENAI_CALL],
        "reasoning_details": [{"signature": "s"}],
    }


def test_to_api_format_leaves_out_a_missing_content_and_a_stray_tool_call_id():
    assert Message(role="assistant", tool_calls=[OPENAI_CALL]).to_api_format() == {
        "role": "assistant",
        "tool_calls": [OPENAI_CALL],
    }
    assert Message(role="user", content="hi", tool_call_id="call_1").to_api_format() == {
        "role": "user",
        "content": "hi",
    }
    tool = Message(role="tool", content="a.txt", tool_call_id="call_1", name="ls")
    assert tool.to_api_format() == {"role": "tool", "content": "a.txt", "name": "ls", "tool_call_id": "call_1"}
    parts = [{"type": "text", "text": "x"}]
    assert Message(role="user", content=parts).to_api_format() == {"role": "user", "content": parts}


HARMONIZED = {
    "role": "assistant",
    "content": "Listing.",
    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
    "reasoning": "ignored",
    "reasoning_details": [{"signature": "s"}],
    "metadata": {"provider": "openai", "model": "gpt-x"},
}


def as_object(value, key=None):
    """A HarmonizedResponse-like object: the same data by attributes (function and reasoning_details stay dicts)."""
    if key in ("function", "reasoning_details"):
        return value
    if isinstance(value, dict):
        return SimpleNamespace(**{name: as_object(item, name) for name, item in value.items()})
    if isinstance(value, list):
        return [as_object(item) for item in value]
    return value


@pytest.mark.parametrize("shape", [dict, as_object], ids=["dict", "object"])
def test_from_harmonized_response_takes_a_response_object_or_a_dict(shape):
    message = Message.from_harmonized_response(shape(HARMONIZED))
    assert (message.role, message.content, message.name) == ("assistant", "Listing.", "gpt-x")
    assert message.tool_calls == [
        ToolCallMsg(id="call_1", call_id="call_1", type="function", name="ls", arguments="{}")
    ]
    assert message.reasoning_details == [{"signature": "s"}]
    assert (message.images, message.tool_call_id, message.agent_calls) == (None, None, None)


def test_from_harmonized_response_prefers_the_given_name_and_keeps_images():
    response = {**HARMONIZED, "tool_calls": []}
    message = Message.from_harmonized_response(response, name="agent-1", images=["https://example.com/a.png"])
    assert (message.name, message.tool_calls, message.images) == ("agent-1", None, ["https://example.com/a.png"])


def test_from_harmonized_response_reads_sdk_style_function_objects():
    call = SimpleNamespace(id="call_9", type="function", function=SimpleNamespace(name="wc", arguments='{"n": 1}'))
    response = SimpleNamespace(
        role="assistant", content=None, tool_calls=[call], reasoning_details=None, metadata=SimpleNamespace(model="m")
    )
    assert Message.from_harmonized_response(response).tool_calls[0].to_dict() == {
        "id": "call_9",
        "type": "function",
        "function": {"name": "wc", "arguments": '{"n": 1}'},
    }


def test_from_harmonized_response_refuses_arguments_that_are_not_a_string():
    response = {
        **HARMONIZED,
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": {}}}],
    }
    with pytest.raises(MessageError):
        Message.from_harmonized_response(response)
