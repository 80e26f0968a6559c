"""Where a conversation may be cut: a tool result stays with the assistant message that made its call.

OpenAI refuses a request holding a tool message whose call is not in it, and the memsite
server refuses to store one whose call is not stored. So "keep the last N messages" moves a
cut that lands inside a tool turn back to the assistant message that made the calls: a
user asking for N messages may get a few more, never a turn the model cannot read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

MessageLike = TypeVar("MessageLike")


def _field(message: Any, name: str) -> Any:
    if isinstance(message, Mapping):
        return message.get(name)
    return getattr(message, name, None)


def _call_ids(message: Any) -> list[str]:
    return [_field(call, "id") for call in _field(message, "tool_calls") or []]


def tail_cut(messages: Sequence[Any], n: int) -> tuple[int, set[int]]:
    """Where the last `n` messages start, moved back so no tool result loses its call, and the
    indexes (from that start on) of tool results whose call is nowhere before them.

    A result answers the latest earlier call with its id (some models reuse ids like call_0).
    """
    if n < 0:
        raise ValueError(f"n must be 0 or more, got {n}")
    answered: dict[int, int | None] = {}  # tool result index -> index of its call, None if none
    latest_call: dict[str, int] = {}
    for index, message in enumerate(messages):
        if _field(message, "role") == "tool":
            answered[index] = latest_call.get(_field(message, "tool_call_id"))
        for call_id in _call_ids(message):
            latest_call[call_id] = index
    start = max(len(messages) - n, 0)
    index = len(messages) - 1
    # Every message the cut takes in may be a result whose call is earlier still.
    while index >= start:
        call_index = answered.get(index)
        if call_index is not None and call_index < start:
            start = call_index
        index -= 1
    orphans = {index for index, call_index in answered.items() if index >= start and call_index is None}
    return start, orphans


def last_messages(messages: Sequence[MessageLike], n: int) -> list[MessageLike]:
    """The last `n` of `messages`, the cut moved back to the assistant message whose calls the
    first kept tool results answer; tool results whose call is not in `messages` are left out.

    Messages are dicts (stored records, or LLM dicts as retrieve_recent() returns them) or
    Message objects. A call whose results are still to come is kept.
    """
    start, orphans = tail_cut(messages, n)
    return [message for index, message in enumerate(messages) if index >= start and index not in orphans]
