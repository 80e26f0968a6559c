"""Run scenarios on the reference library, marsys 0.2.1, and print the results as JSON.

Runs under the marsys venv's Python 3.12 (var/marsys-venv, made by `make test`), not the
project's: stdin is {"tmp": dir, "scenarios": {name: scenario}} (see ops.py), stdout is
{"marsys_version": ..., "results": {name: [result, ...]}}. A scenario with
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
    from tests.memory_client.ops import run_scenario

    # marsys logs and prints while importing and working; stdout carries only the answer.
    with contextlib.redirect_stdout(sys.stderr):
        from marsys.agents.memory import KGMemory, MemoryManager, Message

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
            for name, scenario in request["scenarios"].items()
        }
    answer: dict[str, Any] = {"marsys_version": version("marsys"), "results": results}
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
