"""The reference library's own context pipeline on the bench's sessions (bench/retention_bench.py).

Runs under the marsys venv's Python 3.12 (var/marsys-venv), as tests/memory_client/marsys_driver.py
does: stdin is {"sessions": {key: [message, ...]}, "checkpoints": {key: [count, ...]}, "ratios": [r, ...]},
stdout is {"marsys_version": ..., "results": {"key:r": {...}}}. Each session is replayed into a marsys
`MemoryManager("managed_conversation")` whose processor chain is tool truncation then backward
packing (summarization excluded: it needs a model), with `threshold_tokens` = marsys's own token
estimate of the whole session / r, and `compact_if_needed()` after every message (the threshold
check an agent's turn makes). The answer holds what `get_messages()` serves after each
checkpoint's count of messages (the last checkpoint is the whole session).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from importlib.metadata import version
from typing import Any

FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id")


async def replay(messages: list[dict[str, Any]], checkpoints: list[int], ratio: float) -> dict[str, Any]:
    from marsys.agents.memory import ActiveContextPolicyConfig, ManagedMemoryConfig, MemoryManager
    from marsys.utils.tokens import DefaultTokenCounter

    counter = DefaultTokenCounter()
    total = sum(counter.count_message(m) for m in messages)
    config = ManagedMemoryConfig(
        threshold_tokens=max(int(total / ratio), 1),
        active_context=ActiveContextPolicyConfig(processor_order=["tool_truncation", "backward_packing"]),
    )
    manager = MemoryManager("managed_conversation", memory_config=config)
    compactions = 0
    stages: dict[str, int] = {}
    snapshots = []
    for count, message in enumerate(messages, 1):
        manager.add(**{name: message[name] for name in FIELDS if message.get(name) is not None})
        before = manager.memory_module.metadata.get("last_compaction")
        await manager.compact_if_needed()
        after = manager.memory_module.metadata.get("last_compaction")
        if after is not None and after is not before:
            compactions += 1
            for stage in after["stages"]:
                if not stage.get("skipped") and "error" not in stage:
                    stages[stage["stage"]] = stages.get(stage["stage"], 0) + 1
        if count in checkpoints:
            snapshots.append({"count": count, "messages": manager.get_messages()})
    served = snapshots[-1]["messages"]
    return {
        "snapshots": snapshots,
        "threshold_tokens": config.threshold_tokens,
        "estimated_total_tokens": total,
        "estimated_served_tokens": sum(counter.count_message(m) for m in served),
        "compactions": compactions,
        "stages_run": stages,
    }


async def run(request: dict[str, Any]) -> dict[str, Any]:
    results = {}
    for key, messages in request["sessions"].items():
        for ratio in request["ratios"]:
            results[f"{key}:{ratio}"] = await replay(messages, request["checkpoints"][key], ratio)
    return results


def main() -> None:
    request = json.load(sys.stdin)
    # marsys logs and prints while importing and working; stdout carries only the answer.
    with contextlib.redirect_stdout(sys.stderr):
        results = asyncio.run(run(request))
    json.dump({"marsys_version": version("marsys"), "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
