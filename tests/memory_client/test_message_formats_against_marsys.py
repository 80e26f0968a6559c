"""Differential tests of the message classes: MessageContent, Message.to_api_format and
Message.from_harmonized_response on marsys 0.2.1 (through marsys_driver.py) and on our client.

marsys builds its HarmonizedResponse (a pydantic model) from each case's response dict; our
client gets the same data both as that plain dict and as an object with attributes.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from memory_client import Message, MessageContent
from tests.memory_client.ops import run_message_case
from tests.memory_client.test_against_marsys import ask_marsys

CALL = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}
RESPONSE = {
    "role": "assistant",
    "content": "Let me look.",
    "tool_calls": [CALL, {"id": "call_2", "type": "function", "function": {"name": "wc", "arguments": "{}"}}],
    "reasoning": "not kept by marsys",
    "thinking": "nor this",
    "reasoning_details": [{"type": "reasoning.encrypted", "data": "sig"}],
    "metadata": {"provider": "openrouter", "model": "gemini-3", "finish_reason": "tool_calls"},
}


def content(**kwargs: Any) -> dict[str, Any]:
    return {"call": "content", "kwargs": kwargs}


def content_from_dict(data: dict[str, Any]) -> dict[str, Any]:
    return {"call": "content_from_dict", "data": data}


def api_format(**message: Any) -> dict[str, Any]:
    return {"call": "to_api_format", "message": message}


def harmonized(response: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return {"call": "from_harmonized_response", "response": response, "kwargs": kwargs}


CASES: dict[str, dict[str, Any]] = {
    "content_every_field": content(thought="check", next_action="call_tool", action_input={"tool": "ls"}),
    "content_no_field": content(),
    "content_invoke_agent": content(next_action="invoke_agent", action_input={"agent": "B"}),
    "content_final_response": content(thought="", next_action="final_response", action_input={}),
    "content_unknown_action": content(next_action="respond"),
    "content_empty_action": content(next_action=""),
    "content_from_dict": content_from_dict({"thought": "t", "next_action": "call_tool", "other": 1}),
    "content_from_empty_dict": content_from_dict({}),
    "content_from_dict_unknown_action": content_from_dict({"next_action": "CALL_TOOL"}),
    "api_user_text": api_format(role="user", content="hi"),
    "api_empty_text": api_format(role="user", content=""),
    "api_no_content": api_format(role="assistant"),
    "api_dict_content": api_format(role="assistant", content={"städte": ["Köln"], "n": 2}, name="planner"),
    "api_list_content": api_format(role="user", content=[{"type": "text", "text": "parts"}]),
    "api_tool_calls": api_format(role="assistant", content=None, tool_calls=[CALL], name="gpt"),
    "api_tool_result": api_format(role="tool", content="a.txt", tool_call_id="call_1", name="ls"),
    "api_tool_result_dict": api_format(role="tool", content={"lines": 2}, tool_call_id="call_1"),
    "api_tool_call_id_outside_a_tool": api_format(role="assistant", content="x", tool_call_id="call_1"),
    "api_extras": api_format(
        role="assistant",
        content="done",
        agent_calls=[{"agent_name": "B", "request": {"q": 1}}],
        structured_data={"ok": True},
        images=["never/opened.png"],
        reasoning_details=[{"signature": "s"}],
    ),
    "harmonized_tool_calls": harmonized(RESPONSE),
    "harmonized_name_and_images": harmonized(RESPONSE, name="agent-1", images=["a.png", "https://x.test/b.png"]),
    "harmonized_text_only": harmonized(
        {"content": "Paris.", "metadata": {"provider": "openai", "model": "gpt-x"}, "reasoning_details": None}
    ),
    "harmonized_empty_text": harmonized({"content": "", "metadata": {"provider": "openai", "model": "gpt-x"}}),
    "harmonized_truncated": harmonized(
        {"content": None, "metadata": {"provider": "openai", "model": "gpt-x", "finish_reason": "length"}}
    ),
    "harmonized_user_role": harmonized({"role": "user", "content": "hi", "metadata": {"provider": "p", "model": "m"}}),
    "harmonized_arguments_not_a_string": harmonized(
        {
            "content": None,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": {"p": "."}}}],
            "metadata": {"provider": "p", "model": "m"},
        }
    ),
}


@pytest.fixture(scope="module")
def marsys() -> dict[str, dict[str, Any]]:
    """Every case on marsys, in one subprocess."""
    results: dict[str, dict[str, Any]] = ask_marsys({"tmp": "", "message_cases": CASES})["message_results"]
    return results


def as_object(value: Any, key: str | None = None) -> Any:
    """The response as attributes, as marsys's pydantic models hold it (function and
    reasoning_details are dicts there too)."""
    if key in ("function", "reasoning_details"):
        return value
    if isinstance(value, dict):
        return SimpleNamespace(**{name: as_object(item, name) for name, item in value.items()})
    if isinstance(value, list):
        return [as_object(item) for item in value]
    return value


def intended(result: dict[str, Any]) -> dict[str, Any]:
    """marsys's MessageError-that-is-a-TypeError counts as the MessageError it means."""
    return {key: value for key, value in result.items() if key != "raw"}


@pytest.mark.parametrize("shape", [dict, as_object], ids=["as-dict", "as-object"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_message_classes_match_marsys(name, shape, marsys):
    ours = run_message_case(CASES[name], message=Message, content=MessageContent, response=shape)
    assert ours == intended(marsys[name])


def test_the_cases_cover_both_outcomes(marsys):
    # Guards the comparison itself: both libraries refuse the bad actions and arguments.
    assert marsys["content_unknown_action"] == {"error": "ValueError"}
    assert marsys["content_from_dict_unknown_action"] == {"error": "ValueError"}
    assert marsys["harmonized_arguments_not_a_string"] == {"error": "MessageError", "raw": "TypeError"}
    assert marsys["api_dict_content"] == {
        "value": {"role": "assistant", "content": '{"st\\u00e4dte": ["K\\u00f6ln"], "n": 2}', "name": "planner"}
    }
    assert marsys["harmonized_tool_calls"]["value"]["name"] == "gemini-3"
