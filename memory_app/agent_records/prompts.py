"""The agent-memory prompt texts, from memory documents (plain dicts): no Django, no I/O.

`format_memory_context` and `build_arbiter_select_prompt` are the agent-memory conventions'
TypeScript `formatMemoryContext` and `buildArbiterSelectPrompt`, line for line, with JavaScript's
conversions kept (`String(null)` is "null"). Where that TypeScript would throw, they answer
instead, and only there:
- a failed attempt without `output` (Example 2 keeps the reason in `error`) shows the first
  line of `error`, else nothing, where `a.output.split` would throw;
- a context without `blockers` has none, where `.length` of undefined would throw;
- an agent with no attempts is listed as "No attempts yet", where `recentAttempt.result`
  would throw;
- a timestamp that does not parse sorts as the oldest (JavaScript compares NaN inconsistently).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

_UNDEFINED = object()


def js_string(value: Any) -> str:
    """`${value}` in a JavaScript template literal, for the values a JSON document holds."""
    if value is _UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def timestamp_ms(value: Any) -> float:
    """`new Date(value).getTime()` for ISO 8601 text; unparseable values count as the oldest."""
    if not isinstance(value, str):
        return float("-inf")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return float("-inf")
    if parsed.tzinfo is None:  # JavaScript reads a date-time without offset as local; we run in UTC
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp() * 1000


def _newest_first(entries: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    # Array.prototype.sort is stable, as is sorted(): equal timestamps keep the list order.
    return sorted(entries, key=lambda entry: timestamp_ms(entry.get("timestamp")), reverse=True)


def _first_line(value: Any) -> str:
    return js_string(value).split("\n")[0]


def format_memory_context(memory: Mapping[str, Any]) -> str:
    """The TypeScript `formatMemoryContext(memory)`."""
    context = ""

    recent_discoveries = _newest_first(memory.get("discoveries") or [])[:5]
    if recent_discoveries:
        context += "## Key Discoveries\n"
        for d in recent_discoveries:
            context += f"- [{js_string(d.get('type', _UNDEFINED))}] {_first_line(d.get('content', _UNDEFINED))}\n"

    failures = [a for a in memory.get("attempts") or [] if a.get("result") == "failure"]
    recent_failures = _newest_first(failures)[:3]
    if recent_failures:
        context += "\n## Recently Failed Approaches (Don't Repeat)\n"
        for a in recent_failures:
            output = a.get("output")
            if output is None:
                output = a.get("error") or ""
            context += f"- {js_string(a.get('description', _UNDEFINED))}: {_first_line(output)}\n"

    task_context = memory.get("context")
    if task_context is not None:  # any object is truthy in JavaScript, even an empty one
        context += "\n## Current Task Context\n"
        context += f"- Step: {js_string(task_context.get('currentPlanStep', _UNDEFINED))}\n"
        blockers = task_context.get("blockers") or []
        if len(blockers) > 0:
            context += f"- Blockers: {', '.join('' if b is None else js_string(b) for b in blockers)}\n"

    return context


def build_arbiter_select_prompt(memories: Iterable[tuple[str, Mapping[str, Any]]]) -> str:
    """The TypeScript `buildArbiterSelectPrompt(input, memories)`: (agent, memory) pairs in map order."""
    lines = []
    for agent, memory in memories:
        attempts = memory.get("attempts") or []
        if not attempts:
            lines.append(f"**{agent}**: No attempts yet")
            continue
        recent_attempt = attempts[-1]
        result = js_string(recent_attempt.get("result", _UNDEFINED))
        description = js_string(recent_attempt.get("description", _UNDEFINED))
        lines.append(f"**{agent}**: Last attempt ({result}) - {description}")
    previous_work = "\n".join(lines)

    return f"""
## Previous Agent Work This Session

{previous_work}

Use this to make informed decisions about which agent should work next.
  """
