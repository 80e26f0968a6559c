"""Run scenarios on the reference library, marsys 0.2.1, and print the results as JSON.

Runs under the marsys venv's Python 3.12 (var/marsys-venv, made by `make test`), not the
project's: stdin is {"tmp": dir, "scenarios": {name: scenario}, "message_cases": {name: case}}
(see ops.py; either may be left out), stdout is {"marsys_version": ...,
"results": {name: [result, ...]}, "message_results": {name: result}}. Message cases run on
marsys's Message and MessageContent, with responses built as its HarmonizedResponse. A scenario with
"memory": "KGMemory" runs on marsys's KGMemory itself (its MemoryManager hides add_fact),
built with a model that is never called: only extraction would call it.

"compaction_cases" ({name: {"config": memory_config JSON, "messages": [message fields, images as
file paths], "summary": the JSON object the compaction model answers}}) run marsys's
ManagedConversationMemory._run_compaction with a model that always answers that summary;
"compaction_results" has, per case, the CompactionEvents' statuses and stages_run, the stage
metadata of metadata["last_compaction"], every estimate a processor made (its estimated_savings,
which marsys records only for the processors it skips) and get_messages() afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any


def main() -> None:
    request = json.load(sys.stdin)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo, for tests.memory_client.ops
    from tests.memory_client.ops import run_message_case, run_scenario

    # marsys logs and prints while importing and working; stdout carries only the answer.
    with contextlib.redirect_stdout(sys.stderr):
        from marsys.agents.memory import KGMemory, MemoryManager, Message, MessageContent
        from marsys.models.response_models import HarmonizedResponse

        def kg_memory(**spec: Any) -> Any:
            return KGMemory(model=object(), **spec)

        results = {
            name: run_scenario(
                scenario,
                make_manager=kg_memory if scenario.get("memory") == "KGMemory" else MemoryManager,
                make_message=Message,
                tmp=request["tmp"],
                to_llm=lambda message: message,  # marsys saves what retrieve_all() returns
            )
            for name, scenario in request.get("scenarios", {}).items()
        }
        message_results = {
            name: run_message_case(
                case, message=Message, content=MessageContent, response=HarmonizedResponse.model_validate
            )
            for name, case in request.get("message_cases", {}).items()
        }
        compaction_results = {
            name: run_compaction_case(case) for name, case in request.get("compaction_cases", {}).items()
        }
    answer: dict[str, Any] = {
        "marsys_version": version("marsys"),
        "results": results,
        "message_results": message_results,
    }
    if compaction_results:
        answer["compaction_results"] = compaction_results
    json.dump(answer, sys.stdout)


def managed_config(data: dict[str, Any]) -> Any:
    """marsys's ManagedMemoryConfig from a session's memory_config JSON (the same nested names)."""
    from marsys.agents import memory

    parts = {
        "sliding_window": memory.SlidingWindowConfig,
        "tool_truncation": memory.ToolTruncationConfig,
        "summarization": memory.SummarizationConfig,
        "backward_packing": memory.BackwardPackingConfig,
    }
    policy = dict(data.get("active_context") or {})
    for key, cls in parts.items():
        policy[key] = cls(**policy.get(key, {}))
    top = {key: value for key, value in data.items() if key != "active_context"}
    return memory.ManagedMemoryConfig(**top, active_context=memory.ActiveContextPolicyConfig(**policy))


class _SummaryModel:
    """A compaction model that answers every request with the same JSON object."""

    def __init__(self, summary: dict[str, Any]) -> None:
        self.answer = json.dumps(summary)
        self.calls = 0

    async def arun(self, **kwargs: Any) -> Any:
        from types import SimpleNamespace

        self.calls += 1
        return SimpleNamespace(content=self.answer)


class _Bus:
    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit_nowait(self, event: Any) -> None:
        self.events.append(event)


def _recording(cls: type, estimates: list[dict[str, Any]]) -> type:
    """A processor class that also records each estimate it makes (marsys logs only the skipped ones)."""

    class Recording(cls):  # type: ignore[misc, valid-type]
        async def estimate_reduction(self, *args: Any, **kwargs: Any) -> int:
            saving: int = await super().estimate_reduction(*args, **kwargs)
            estimates.append({"processor": self.name(), "estimated_savings": saving})
            return saving

    return Recording


def run_compaction_case(case: dict[str, Any]) -> dict[str, Any]:
    from marsys.agents import memory_strategies
    from marsys.agents.memory import ManagedConversationMemory

    memory = ManagedConversationMemory(config=managed_config(case["config"]))
    bus = _Bus()
    memory.set_event_context("agent", event_bus=bus, session_id="session")
    for message in case["messages"]:
        memory.add(**message)
    model = _SummaryModel(case["summary"])
    runtime = {"compaction_model": model, "compaction_model_name": "scripted-model"}
    registry = memory_strategies.COMPACTION_PROCESSOR_REGISTRY
    originals = dict(registry)
    estimates: list[dict[str, Any]] = []
    registry.update({name: _recording(cls, estimates) for name, cls in originals.items()})
    try:
        asyncio.run(memory._run_compaction(runtime))
    finally:
        registry.clear()
        registry.update(originals)
    last = memory.metadata.get("last_compaction", {})
    return {
        "events": [{"status": event.status, "stages_run": event.stages_run} for event in bus.events],
        "stages": last.get("stages", []),
        "estimates": estimates,
        "model_calls": model.calls,
        "messages": memory.get_messages(),
    }


if __name__ == "__main__":
    main()
