"""A stored message's fields, and the dict an LLM API receives for it.

`to_llm_dict` is the conversation memory's `Message.to_llm_dict()` with one difference: images
are already data URLs or http(s) URLs (the server never reads paths), so they become
`image_url` content parts as they are. `to_openai_message` drops the non-OpenAI extras
(`reasoning_details`) for the context endpoint, whose output goes to an LLM unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

# The fields of a chat message as the conversation memory (and the reference library) defines
# it: what `replace_memory` sets.
CHAT_MESSAGE_FIELDS: tuple[str, ...] = (
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "agent_calls",
    "structured_data",
    "reasoning_details",
    "images",
)
# Every field a client writes and the server stores and exports: the chat fields plus memsite's
# multi-agent routing (`send_from`, `send_to`) and free-form `meta`.
MESSAGE_FIELDS: tuple[str, ...] = (*CHAT_MESSAGE_FIELDS, "send_from", "send_to", "meta")

# A content part ({"type": "text", "text": ...}, {"type": "image_url", "image_url": {"url": ...}}, or
# any other type a provider defines): kept as the writer sent it.
ContentPart = dict[str, Any]


class ToolCallFunction(TypedDict):
    name: str
    arguments: str  # JSON text, as the model wrote it


class ToolCall(TypedDict):
    """One tool call of an assistant message, in OpenAI's shape (stored and served alike)."""

    id: str
    type: str  # "function"
    function: ToolCallFunction


class LLMMessage(TypedDict):
    """A chat message as an LLM API receives it: what `to_llm_dict` returns and /context/ serves.

    `content` is None for an assistant message that only calls tools; a tool result's is text.
    """

    role: str
    content: str | list[ContentPart] | None
    name: NotRequired[str]
    tool_calls: NotRequired[list[ToolCall]]
    tool_call_id: NotRequired[str]
    reasoning_details: NotRequired[Any]  # the provider's own reasoning records, passed on as they are


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _image_parts(images: list[str]) -> list[ContentPart]:
    return [{"type": "image_url", "image_url": {"url": url}} for url in images if url]


def _text_of(content: Any) -> str:
    if isinstance(content, (dict, list)):
        return _compact_json(content)
    return str(content)


def _tool_message(message: Mapping[str, Any]) -> LLMMessage:
    # OpenAI requires a string for tool results.
    content = message.get("content")
    result: LLMMessage = {"role": "tool", "content": "" if content is None else _text_of(content)}
    if message.get("tool_call_id"):
        result["tool_call_id"] = message["tool_call_id"]
    if message.get("name"):
        result["name"] = message["name"]
    return result


def _content_for_llm(content: Any, images: list[str]) -> str | list[ContentPart] | None:
    if isinstance(content, list):
        return list(content) + _image_parts(images)
    if images:
        parts: list[ContentPart] = []
        if content is not None and _text_of(content).strip():
            parts.append({"type": "text", "text": _text_of(content)})
        return parts + _image_parts(images)
    if isinstance(content, dict):
        return _compact_json(content)
    return content


def to_llm_dict(message: Mapping[str, Any]) -> LLMMessage:
    """The LLM dict of a stored message (MESSAGE_FIELDS, and any other keys a row has): role,
    content, and name/tool_calls/reasoning_details when set."""
    if message.get("role") == "tool":
        return _tool_message(message)
    result: LLMMessage = {
        "role": message["role"],
        "content": _content_for_llm(message.get("content"), list(message.get("images") or [])),
    }
    if message.get("name"):
        result["name"] = message["name"]
    if message.get("tool_calls"):
        result["tool_calls"] = [
            {
                "id": call["id"],
                "type": call.get("type", "function"),
                "function": {
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                },
            }
            for call in message["tool_calls"]
        ]
    if message.get("reasoning_details"):
        result["reasoning_details"] = message["reasoning_details"]
    return result


def to_openai_message(message: Mapping[str, Any]) -> LLMMessage:
    """Exactly OpenAI's chat message format: no keys the API does not define."""
    result = to_llm_dict(message)
    result.pop("reasoning_details", None)
    return result


def tool_call_id_in_content(content: Any) -> str | None:
    """The `tool_call_id` a tool result names in its content, given as a JSON object or its text
    ('{"tool_call_id": "call_123", "output": ...}'), as the memory module's documentation writes
    tool results; None when the content names none."""
    if isinstance(content, str) and content.lstrip().startswith("{"):
        try:
            content = json.loads(content)
        except ValueError:
            return None
    if not isinstance(content, dict):
        return None
    found = content.get("tool_call_id")
    return found if isinstance(found, str) and found.strip() else None


def content_text(content: Any) -> str:
    """The text of a message content: a string, the text parts of a content list, or JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return json.dumps(content, ensure_ascii=False)
