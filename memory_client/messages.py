"""marsys 0.2.1's message dataclasses (same fields, validation, to_dict/from_dict), plus the wire form.

The wire form is what the server stores: tool/agent calls as plain dicts and images as data
URLs or http(s) URLs. The server never opens a path, so a local image path is read here, on
the caller's machine, where marsys would have read it at retrieval time.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from memory_client.errors import MessageError
from memory_client.vocabulary.messages import MESSAGE_FIELDS, to_llm_dict

# Keys of a stored/exported message the client sends back when it loads or replaces one: the
# message fields and the time it was said, which is no chat field but must survive a keep_last.
WIRE_FIELDS = (*MESSAGE_FIELDS, "occurred_at")

_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
# marsys picks the MIME type from the extension (default png); the server checks the bytes,
# so the bytes win and the extension is only the fallback.
_MIME_BY_SUFFIX = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


# marsys's MessageContent.next_action values (the agent action protocol).
NEXT_ACTIONS = ("call_tool", "invoke_agent", "final_response")


@dataclasses.dataclass
class MessageContent:
    """An agent's structured answer (marsys's shape): what it thinks, does next, and with what."""

    thought: str | None = None
    next_action: str | None = None
    action_input: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.next_action is not None and self.next_action not in NEXT_ACTIONS:
            raise ValueError(f"next_action must be one of {set(NEXT_ACTIONS)}, got: {self.next_action}")

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set."""
        fields = {"thought": self.thought, "next_action": self.next_action, "action_input": self.action_input}
        return {field: value for field, value in fields.items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MessageContent:
        """From a dict; unknown keys are ignored, an unknown next_action is a ValueError."""
        return cls(
            thought=data.get("thought"), next_action=data.get("next_action"), action_input=data.get("action_input")
        )


@dataclasses.dataclass
class ToolCallMsg:
    """A tool call in a message (marsys's shape: `call_id` mirrors `id`)."""

    id: str
    call_id: str
    type: str
    name: str
    arguments: str

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("Tool call id cannot be empty")
        if not self.call_id:
            raise ValueError("Tool call call_id cannot be empty")
        if not self.type:
            raise ValueError("Tool call type cannot be empty")
        if not self.name:
            raise ValueError("Tool call name cannot be empty")
        if not isinstance(self.arguments, str):
            raise ValueError("Tool call arguments must be a string")

    def to_dict(self) -> dict[str, Any]:
        """OpenAI's tool call format (the server's, too)."""
        return {"id": self.id, "type": self.type, "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCallMsg:
        function = data.get("function", {})
        return cls(
            id=data.get("id", ""),
            call_id=data.get("id", ""),
            type=data.get("type", "function"),
            name=function.get("name", ""),
            arguments=function.get("arguments", "{}"),
        )


@dataclasses.dataclass
class AgentCallMsg:
    """A request from one agent to invoke another."""

    agent_name: str
    request: Any

    def __post_init__(self) -> None:
        if not self.agent_name:
            raise ValueError("Agent call agent_name cannot be empty")
        if not isinstance(self.agent_name, str):
            raise ValueError("Agent call agent_name must be a string")
        if self.request is None:
            raise ValueError("Agent call request cannot be None")

    def to_dict(self) -> dict[str, Any]:
        return {"agent_name": self.agent_name, "request": self.request}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentCallMsg:
        return cls(agent_name=data.get("agent_name", ""), request=data.get("request"))


def convert_calls(
    value: Any, kind: type[ToolCallMsg] | type[AgentCallMsg], field: str, message_id: str | None
) -> list[Any] | None:
    """marsys's __post_init__ conversion: dicts become dataclasses, anything else is a MessageError."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise MessageError(f"{field} must be a list, got {type(value).__name__}", message_id=message_id)
    converted = []
    for index, item in enumerate(value):
        if isinstance(item, kind):
            converted.append(item)
        elif isinstance(item, dict):
            try:
                converted.append(kind.from_dict(item))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise MessageError(
                    f"Failed to convert {field}[{index}] to {kind.__name__}: {exc}", message_id=message_id
                ) from exc
        else:
            raise MessageError(
                f"{field}[{index}] must be dict or {kind.__name__}, got {type(item).__name__}", message_id=message_id
            )
    return converted


def check_images(images: Any, message_id: str | None = None) -> list[str] | None:
    if images is None:
        return None
    if not isinstance(images, list):
        raise MessageError(f"images must be a list, got {type(images).__name__}", message_id=message_id)
    for index, image in enumerate(images):
        if not isinstance(image, str):
            raise MessageError(
                f"images[{index}] must be a string (path/URL), got {type(image).__name__}", message_id=message_id
            )
    return images


def image_url(ref: str) -> str:
    """A data URL or http(s) URL as it is; a local path read and encoded as a data URL."""
    if ref.startswith(("data:", "http://", "https://")):
        return ref
    path = Path(ref).expanduser()
    try:
        data = path.read_bytes()
    except OSError as exc:
        # marsys drops an unreadable image at retrieval with a warning; failing at add()
        # tells the caller while they still hold the file name.
        raise MessageError(f"Cannot read image {ref!r}: {exc}", invalid_data=ref) from exc
    mime = next((m for magic, m in _MAGIC if data.startswith(magic)), None)
    if mime is None and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        mime = "image/webp"
    mime = mime or _MIME_BY_SUFFIX.get(path.suffix.lower(), "image/png")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def calls_to_wire(calls: list[Any] | None) -> list[dict[str, Any]] | None:
    return None if calls is None else [call.to_dict() for call in calls]


def _attribute(source: Any, name: str) -> Any:
    """`source.name`, or `source[name]` when source is a dict (None when missing)."""
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def _function_dict(function: Any) -> dict[str, Any]:
    if isinstance(function, Mapping):
        return dict(function)
    # An SDK object (e.g. openai's Function): its name and arguments.
    found = {name: _attribute(function, name) for name in ("name", "arguments")}
    return {name: value for name, value in found.items() if value is not None}


def _response_tool_call(call: Any) -> dict[str, Any]:
    """A response's tool call as an OpenAI dict, which Message converts and validates."""
    kind = _attribute(call, "type")
    return {
        "id": _attribute(call, "id"),
        "type": "function" if kind is None else kind,
        "function": _function_dict(_attribute(call, "function")),
    }


@dataclasses.dataclass
class Message:
    """One conversation message, field for field marsys 0.2.1's `Message`."""

    role: str
    # A MessageContent is kept as its dict (marsys would keep the object, which no API can send).
    content: str | dict[str, Any] | list[dict[str, Any]] | MessageContent | None = None
    message_id: str = dataclasses.field(default_factory=lambda: str(uuid.uuid4()))
    name: str | None = None
    tool_calls: list[ToolCallMsg] | None = None
    agent_calls: list[AgentCallMsg] | None = None
    structured_data: dict[str, Any] | None = None
    images: list[str] | None = None
    tool_call_id: str | None = None
    reasoning_details: list[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.content, MessageContent):
            self.content = self.content.to_dict()
        self.tool_calls = convert_calls(self.tool_calls, ToolCallMsg, "tool_calls", self.message_id)
        self.agent_calls = convert_calls(self.agent_calls, AgentCallMsg, "agent_calls", self.message_id)
        self.images = check_images(self.images, self.message_id)

    def to_dict(self) -> dict[str, Any]:
        """The server's (and the export file's) form: set fields only, images as URLs."""
        data: dict[str, Any] = {
            "message_id": self.message_id,
            "role": self.role,
            "content": self.content,
            "name": self.name,
            "tool_calls": calls_to_wire(self.tool_calls),
            "tool_call_id": self.tool_call_id,
            "agent_calls": calls_to_wire(self.agent_calls),
            "structured_data": self.structured_data,
            "reasoning_details": self.reasoning_details,
            "images": None if self.images is None else [image_url(ref) for ref in self.images],
        }
        return {key: value for key, value in data.items() if value is not None or key == "content"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """From a stored/exported record or a marsys file entry; unknown keys are ignored."""
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {key: value for key, value in data.items() if key in fields}
        if kwargs.get("message_id") is None:
            kwargs.pop("message_id", None)
        if "role" not in kwargs:
            raise MessageError("A message needs a role.", invalid_data=dict(data))
        return cls(**kwargs)

    @classmethod
    def from_response_dict(
        cls,
        response_dict: dict[str, Any],
        default_id: str | None = None,
        default_role: str = "assistant",
        default_name: str | None = None,
    ) -> Message:
        """A model response dict as a Message (marsys's factory, without its processor hook)."""
        return cls(
            role=response_dict.get("role", default_role),
            content=response_dict.get("content"),
            message_id=response_dict.get("message_id", default_id or str(uuid.uuid4())),
            name=response_dict.get("name", default_name),
            tool_calls=response_dict.get("tool_calls"),
            agent_calls=response_dict.get("agent_calls"),
            structured_data=response_dict.get("structured_data"),
            images=response_dict.get("images"),
        )

    @classmethod
    def from_harmonized_response(
        cls,
        harmonized_response: Any,
        name: str | None = None,
        images: list[str] | None = None,
    ) -> Message:
        """A model's answer as a Message, as marsys builds one from its HarmonizedResponse.

        `harmonized_response` is marsys's HarmonizedResponse, any object with the same
        attributes (role, content, tool_calls with id/type/function, reasoning_details,
        metadata.model), or a dict with the same keys. `name` defaults to metadata.model;
        reasoning_details are kept (Gemini's thought signatures must go back to the model).
        """
        metadata = _attribute(harmonized_response, "metadata")
        calls = _attribute(harmonized_response, "tool_calls") or []
        return cls(
            role=_attribute(harmonized_response, "role") or "assistant",
            content=_attribute(harmonized_response, "content"),
            name=name or _attribute(metadata, "model"),
            tool_calls=cast("list[ToolCallMsg] | None", [_response_tool_call(call) for call in calls] or None),
            images=images,
            reasoning_details=_attribute(harmonized_response, "reasoning_details"),
        )

    def to_llm_dict(self) -> dict[str, Any]:
        """The dict an LLM API receives: what retrieve_all() returns for this message."""
        return dict(to_llm_dict(self.to_dict()))  # a plain dict, as marsys's method returns

    def to_api_format(self) -> dict[str, Any]:
        """marsys's OpenAI format: role, then content, name, tool_calls, tool_call_id (tool
        messages only) and reasoning_details when set. Unlike to_llm_dict(), images are left
        out, a dict content is `json.dumps` with its defaults, and a missing content is no key.
        """
        result: dict[str, Any] = {"role": self.role}
        if self.content is not None:
            result["content"] = json.dumps(self.content) if isinstance(self.content, dict) else self.content
        if self.name:
            result["name"] = self.name
        if self.tool_calls:
            result["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.role == "tool" and self.tool_call_id:
            result["tool_call_id"] = self.tool_call_id
        if self.reasoning_details:
            result["reasoning_details"] = self.reasoning_details
        return result
