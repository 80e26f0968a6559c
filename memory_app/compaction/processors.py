"""Assembling the message array for an LLM from stored pieces. Pure: no Django import.

Messages here are dicts in the stored shape (role, content, name, tool_calls,
tool_call_id, images) plus `token_count`. Every function keeps tool calls and their
results together: OpenAI rejects a tool result without its call and a call without
all of its results, so a cut always moves to a turn boundary.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

Msg = dict[str, Any]


def protected_tail_start(messages: Sequence[Msg], grace_rounds: int) -> int:
    """Index where the protected tail starts (the managed memory's assistant-round semantics).

    `grace_rounds = n` protects from the n-th most recent assistant message onward
    (n <= 0 counts as 1). With fewer assistant messages the oldest one starts the tail,
    and with none the last message is protected (marsys would summarise everything,
    leaving the model nothing recent to answer).
    """
    wanted = max(grace_rounds, 1)
    oldest_seen: int | None = None
    seen = 0
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            seen += 1
            oldest_seen = index
            if seen >= wanted:
                return index
    if oldest_seen is not None:
        return oldest_seen
    return max(len(messages) - 1, 0)


def _call_ids(message: Msg) -> set[str]:
    return {call["id"] for call in message.get("tool_calls") or []}


def turn_boundary(messages: Sequence[Msg], split: int) -> int:
    """Move `split` earlier until no tool result after it answers a call before it."""
    split = max(0, min(split, len(messages)))
    moved = True
    while moved and split > 0:
        moved = False
        answered = {m.get("tool_call_id") for m in messages[split:] if m.get("role") == "tool"}
        for index in range(split - 1, -1, -1):
            if _call_ids(messages[index]) & answered:
                split = index
                moved = True
                break
    return split


def complete_tool_turns(messages: Sequence[Msg]) -> list[Msg]:
    """Drop tool results without their call and tool calls without all their results."""
    results_by_call: dict[str, int] = {}
    for index, message in enumerate(messages):
        if message.get("role") == "tool" and message.get("tool_call_id"):
            results_by_call.setdefault(message["tool_call_id"], index)
    keep = [True] * len(messages)
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        calls = _call_ids(message)
        if calls:
            if all(results_by_call.get(call, -1) > index for call in calls):
                open_calls |= calls
            else:
                keep[index] = False
        elif message.get("role") == "tool" and message.get("tool_call_id") not in open_calls:
            keep[index] = False
    return [m for m, kept in zip(messages, keep, strict=True) if kept]


def pack_backward(messages: Sequence[Msg], budget: int) -> list[Msg]:
    """The newest messages whose token counts fit `budget`, cut at a turn boundary."""
    used = 0
    start = len(messages)
    for index in range(len(messages) - 1, -1, -1):
        cost = messages[index]["token_count"]
        if used + cost > budget:
            break
        used += cost
        start = index
    # A cut inside a turn drops the turn's remains instead of extending past the budget.
    window = list(messages[start:])
    return complete_tool_turns(window)


def truncate_tool_outputs(
    messages: Sequence[Msg],
    *,
    max_tokens: int,
    grace_rounds: int,
    marker: str,
    truncate: Callable[[str, int], str],
    count: Callable[[Msg], int],
) -> tuple[list[Msg], int]:
    """Shorten string tool results above `max_tokens`, outside the protected rounds."""
    protected = protected_tail_start(messages, grace_rounds)
    out: list[Msg] = []
    truncated = 0
    for index, message in enumerate(messages):
        content = message.get("content")
        if (
            index < protected
            and message.get("role") == "tool"
            and isinstance(content, str)
            and message["token_count"] > max_tokens
        ):
            shorter = dict(message, content=truncate(content, max_tokens) + marker)
            shorter["token_count"] = count(shorter)
            out.append(shorter)
            truncated += 1
        else:
            out.append(message)
    return out, truncated


def ensure_user_message(messages: list[Msg], fallback: Msg | None) -> list[Msg]:
    """OpenAI-style APIs need at least one user message; borrow the latest one if absent."""
    if any(m.get("role") == "user" for m in messages) or fallback is None:
        return messages
    return [fallback, *messages]


def content_text(content: Any) -> str:
    """The text of a message content: a string, the text parts of a content list, or JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return json.dumps(content, ensure_ascii=False)
