"""Operation sequences run on marsys 0.2.1 and on our client (format: see ops.py).

AGREE: both must return the same results. DIFFER: deliberate differences; each one is
asserted precisely in test_against_marsys.py, so the documentation below cannot go stale.
"""

from __future__ import annotations

from typing import Any

CALL_1 = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}
CALL_123 = {"id": "call_123", "type": "function", "function": {"name": "calculator", "arguments": '{"x": 2}'}}
CALL_2 = {"id": "call_2", "type": "function", "function": {"name": "wc", "arguments": "{}"}}
PNG = "{tmp}/pixel.png"


def op(
    method: str, /, *args: Any, mm: str = "a", message: dict[str, Any] | None = None, **kwargs: Any
) -> dict[str, Any]:
    """One call of `method`; `message` is a Message spec passed as the message= argument."""
    step: dict[str, Any] = {"op": method, "mm": mm, "args": list(args), "kwargs": kwargs}
    if message is not None:
        step["message"] = message
    return step


def with_prompt(*ops: dict[str, Any], prompt: str = "You are helpful") -> dict[str, Any]:
    return {"managers": {"a": {"description": prompt}}, "ops": list(ops)}


def without_prompt(*ops: dict[str, Any]) -> dict[str, Any]:
    return {"managers": {"a": {}}, "ops": list(ops)}


AGREE: dict[str, dict[str, Any]] = {
    "conversation_reads": with_prompt(
        op("add", role="user", content="Hello"),
        op("add", role="assistant", content="Hi there!", name="bot"),
        op("add", role="user", content=""),
        op("retrieve_all"),
        op("get_messages"),
        op("retrieve_recent"),
        op("retrieve_recent", 2),
        op("retrieve_recent", 4),
        op("retrieve_recent", 10),
        op("retrieve_recent", 0),
        op("retrieve_by_role", "user"),
        op("retrieve_by_role", "assistant", 1),
        op("retrieve_by_role", "user", 0),
        op("retrieve_by_role", "system"),
        op("retrieve_by_role", "wizard"),
    ),
    "leading_system_message_without_prompt": without_prompt(
        op("add", role="system", content="set after creation"),
        op("add", role="user", content="hi"),
        op("add", role="system", content="a later note"),
        op("retrieve_all"),
        op("retrieve_by_role", "system"),
        op("retrieve_by_role", "system", 1),
        op("retrieve_recent", 5),
        op("reset_memory"),
        op("retrieve_all"),
    ),
    "ids": with_prompt(
        op("add", role="user", content="find me"),
        op("retrieve_by_id", "$0"),
        op("retrieve_by_id", "@never_added"),
        op("retrieve_by_id", "not-a-uuid"),
        op("add", message={"role": "assistant", "content": "chosen id", "message_id": "@chosen"}),
        op("retrieve_by_id", "@chosen"),
        op("remove_by_id", "$0"),
        op("remove_by_id", "$0"),
        op("remove_by_id", "not-a-uuid"),
        op("retrieve_all"),
    ),
    "update": with_prompt(
        op("add", role="user", content="old"),
        op("update", "$0", content="new", name="alice"),
        op("retrieve_by_id", "$0"),
        op("update", "$0", role="assistant", images=[PNG]),
        op("retrieve_all"),
        op("update", "@never_added", content="x"),
        op("update", "not-a-uuid", content="x"),
        op("update", "$0", tool_calls="not a list"),
        op("retrieve_all"),
    ),
    "tool_flow": with_prompt(
        op("add", role="user", content="count files"),
        op("add", role="assistant", content=None, tool_calls=[CALL_1, CALL_2]),
        op("add", role="tool", content="a.txt\nb.txt", tool_call_id="call_1", name="ls"),
        op("add", role="tool", content={"lines": 2}, tool_call_id="call_2", name="wc"),
        op("add", role="tool", content=None, tool_call_id="call_2"),
        op("add", role="assistant", content={"answer": "2 files", "confidence": 0.9}),
        op("retrieve_all"),
        op("retrieve_by_role", "tool"),
        op("retrieve_recent", 2),
    ),
    "structured_messages": without_prompt(
        op(
            "add",
            message={
                "role": "assistant",
                "content": "calling B",
                "agent_calls": [{"agent_name": "B", "request": {"task": "sum"}}],
                "structured_data": {"total": 3},
                "reasoning_details": [{"type": "reasoning.text", "text": "think"}],
            },
        ),
        op("add", role="user", content=[{"type": "text", "text": "part one"}, {"type": "text", "text": "two"}]),
        op("add", role="user", content={"ünïcode": "✓"}),
        op("add", role="assistant", content=None),
        op("retrieve_all"),
    ),
    "images_from_paths": without_prompt(
        op("add", role="user", content="what is this?", images=[PNG]),
        op("add", role="user", content=None, images=[PNG, PNG]),
        op("add", role="user", content={"question": "and this?"}, images=[PNG]),
        op("add", role="user", content="   ", images=[PNG]),
        op("add", role="user", content="no pictures", images=[]),
        op("retrieve_all"),
    ),
    "index_operations": with_prompt(
        op("add", role="user", content="u1"),
        op("add", role="user", content="u2"),
        op("add", role="user", content="u3"),
        op("replace_memory", 2, role="assistant", content="U2", name="bot"),
        op("retrieve_all"),
        op("delete_memory", 1),
        op("retrieve_all"),
        op("replace_memory", 0, role="system", content="new prompt"),
        op("retrieve_all"),
        op("delete_memory", 0),
        op("retrieve_all"),
        op("replace_memory", 0, message={"role": "user", "content": "first"}),
        op("retrieve_all"),
        op("replace_memory", 2, role="user", content="out of range"),
        op("replace_memory", -1, role="user", content="negative"),
        op("delete_memory", 2),
        op("delete_memory", -1),
        op("replace_memory", 0, content="no role"),
        op("retrieve_all"),
    ),
    "reset": with_prompt(
        op("add", role="user", content="one"),
        op("add", role="assistant", content="two"),
        op("reset_memory"),
        op("retrieve_all"),
        op("add", role="user", content="after reset"),
        op("retrieve_all"),
        op("reset_memory"),
        op("reset_memory"),
        op("retrieve_all"),
    ),
    "misuse": without_prompt(
        op("add"),
        op("add", content="no role"),
        op("add", role="user", tool_calls="not a list"),
        op("add", role="assistant", tool_calls=[{"id": "", "function": {"name": "x"}}]),
        op("add", role="assistant", tool_calls=[42]),
        op("add", role="assistant", agent_calls=[{"agent_name": ""}]),
        op("add", role="assistant", agent_calls="B"),
        op("add", role="user", images="pixel.png"),
        op("add", role="user", images=[7]),
        op("retrieve_all"),
    ),
    "save_and_load": {
        "managers": {"a": {"description": "You are helpful"}, "b": {}},
        "ops": [
            op("add", role="user", content="see this", images=[PNG]),
            op("add", role="assistant", content={"answer": 42}, name="bot"),
            op("add", role="assistant", content=None, tool_calls=[CALL_1]),
            op("save_to_file", "{tmp}/a.json", {"plan": ["look", "answer"], "step": 1}),
            op("load_from_file", "{tmp}/a.json", mm="b"),
            op("retrieve_all", mm="b"),
            op("save_to_file", "{tmp}/b.json", mm="b"),
            op("load_from_file", "{tmp}/missing.json"),
            op("retrieve_all"),
        ],
    },
}

# A memory_type marsys does not know: its AgentConfigurationError, before any call.
AGREE["unknown_memory_type"] = {"managers": {"a": {"memory_type": "invalid_type"}}, "ops": [op("retrieve_all")]}
# A saved file writes every message's content, null included (an assistant message that only calls tools).
AGREE["save_writes_null_content"] = without_prompt(
    op("add", role="user", content="count files"),
    op("add", role="assistant", content=None, tool_calls=[CALL_1]),
    op("add", role="tool", content="a.txt", tool_call_id="call_1", name="ls"),
    op("save_to_file", "{tmp}/null_content.json"),
)

# The managed memory below its threshold: marsys returns its list, ours the server's context.
AGREE["managed_reads"] = {
    "managers": {"a": {"memory_type": "managed_conversation"}},
    "ops": [
        op("add", role="user", content="Find flights"),
        op("add", role="assistant", content=None, tool_calls=[CALL_1]),
        op("add", role="tool", content="a.txt", tool_call_id="call_1", name="ls"),
        op("add", role="assistant", content="Done", name="bot"),
        op("get_messages"),
        op("retrieve_all"),
        op("retrieve_recent", 2),
        op("retrieve_by_role", "assistant"),
        op("retrieve_by_id", "$0"),
        op("update", "$0", content="Find trains"),
        op("add", role="user", content="remove me"),
        op("remove_by_id", "$10"),
        op("get_messages"),
        op("reset_memory"),
        op("get_messages"),
    ],
}

DIFFER: dict[str, dict[str, Any]] = {
    "managed_keeps_the_description": {
        "managers": {"a": {"memory_type": "managed_conversation", "description": "You are helpful"}},
        "ops": [
            op("add", role="user", content="hi"),
            op("get_messages"),
            op("add", role="system", content="a system message row"),
            op("reset_memory"),
            op("get_messages"),
        ],
    },
    "update_keeps_tool_call_id": without_prompt(
        op("add", role="assistant", tool_calls=[CALL_1]),
        op("add", role="tool", content="a.txt", tool_call_id="call_1", name="ls"),
        op("update", "$1", content="b.txt"),
        op("retrieve_by_id", "$1"),
    ),
    "load_replaces_the_prompt": with_prompt(
        op("add", role="user", content="hi"),
        op("save_to_file", "{tmp}/d.json"),
        op("load_from_file", "{tmp}/d.json"),
        op("retrieve_all"),
    ),
    "load_keeps_tool_call_id": without_prompt(
        op("add", role="assistant", tool_calls=[CALL_1]),
        op("add", role="tool", content="a.txt", tool_call_id="call_1"),
        op("save_to_file", "{tmp}/t.json"),
        op("load_from_file", "{tmp}/t.json"),
        op("retrieve_all"),
    ),
    "message_error_is_a_type_error_in_marsys": without_prompt(op("add", content="no role")),
    "url_images_are_passed_through": without_prompt(
        op("add", role="user", content="remote", images=["https://example.com/cat.png"]),
        op("retrieve_all"),
    ),
    "list_content_with_images": without_prompt(
        op("add", role="user", content=[{"type": "text", "text": "parts"}], images=[PNG]),
        op("retrieve_all"),
    ),
    "tool_list_content": without_prompt(
        op("add", role="assistant", tool_calls=[CALL_1]),
        op("add", role="tool", content=[{"type": "text", "text": "out"}], tool_call_id="call_1"),
        op("retrieve_all"),
    ),
    "server_validates_messages": without_prompt(
        op("add", role="wizard", content="x"),
        op("add", role="tool", content="no call to answer"),
        op("add", role="tool", content="x", tool_call_id="call_unknown"),
        op("add", role="user", content="x", tool_call_id="call_1"),
        op("retrieve_all"),
    ),
    "same_message_added_twice": without_prompt(
        op("add", message={"role": "user", "content": "once?", "message_id": "@same"}),
        op("add", message={"role": "user", "content": "once?", "message_id": "@same"}),
        op("retrieve_all"),
    ),
    "replace_keeps_the_row_id": without_prompt(
        op("add", role="user", content="before"),
        op("replace_memory", 0, role="user", content="after"),
        op("retrieve_by_id", "$0"),
    ),
    "prompt_is_replaced_only_by_a_system_text": with_prompt(
        op("replace_memory", 0, role="user", content="not a prompt"),
        op("retrieve_all"),
    ),
    "unreadable_image_path": without_prompt(
        op("add", role="user", content="x", images=["{tmp}/missing.png"]),
        op("retrieve_all"),
    ),
    # The memory module's documentation: a tool result given as JSON text carrying its
    # tool_call_id answers that call. marsys 0.2.1 keeps the text but not the id.
    "tool_call_id_from_json_content": without_prompt(
        op("add", role="assistant", content=None, tool_calls=[CALL_123]),
        op("add", role="tool", content='{"tool_call_id": "call_123", "output": "Result data"}', name="calculator"),
        op("retrieve_all"),
    ),
    "non_uuid_message_id": without_prompt(
        op("add", message={"role": "user", "content": "x", "message_id": "msg-1"}),
        op("retrieve_all"),
    ),
}
