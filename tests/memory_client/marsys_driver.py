"""Run scenarios on the reference library, marsys 0.2.1, and print the results as JSON.

Runs under the marsys venv's Python 3.12 (var/marsys-venv, made by `make test`), not the
project's: stdin is {"tmp": dir, "scenarios": {name: scenario}, "message_cases": {name: case}}
(see ops.py; either may be left out), stdout is {"marsys_version": ...,
"results": {name: [result, ...]}, "message_results": {name: result}}. Message cases run on
marsys's Message and MessageContent, with responses built as its HarmonizedResponse. A scenario with
"memory": "KGMemory" runs on marsys's KGMemory itself (its MemoryManager hides add_fact),
built with a model that is never called: only extraction would call it.
"""

from __future__ import annotations

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
    answer: dict[str, Any] = {
        "marsys_version": version("marsys"),
        "results": results,
        "message_results": message_results,
    }
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
