"""The marsys-compatible dataclasses, without a server."""

from __future__ import annotations

import pytest

from memory_client import AgentCallMsg, Message, MessageError, ToolCallMsg
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
