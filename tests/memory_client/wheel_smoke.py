"""What an agent project does first with the installed client, run by test_wheel.py with the
interpreter of a clean venv that holds only the memsite-client wheel and its dependencies.

It talks to the live server named by MEMSITE_URL / MEMSITE_API_KEY and prints one JSON document
of what came back, so that the test, not this script, judges it (its failures then show the data).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
import time
from typing import Any

import memory_client
from memory_client import MemoryManager

QUESTION = "What is the weather in Oslo?"
TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})},
}
# Modules an agent project must not need for the client itself: the server's framework and the
# agent frameworks only the adapters (optional extras) use.
NOT_NEEDED = ("django", "rest_framework", "agents", "langchain_core", "langgraph", "google.adk", "anthropic", "mcp")


def installed(name: str) -> bool:
    """Whether a module can be imported; a dotted one whose package is missing is not."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # find_spec("google.adk") imports `google` first
        return False


def search_until_found(memory: MemoryManager, query: str, text: str, timeout: float = 20.0) -> list[dict[str, Any]]:
    """The session's hits for `query` once one is the message `text`: the server indexes what is
    appended in the background, so the first searches may come before the index run."""
    deadline = time.monotonic() + timeout
    while True:
        hits = memory.search(query, session=memory.session_id, kinds=["message"])
        if any(hit["text"] == text for hit in hits) or time.monotonic() > deadline:
            return hits
        time.sleep(0.1)


def main() -> None:
    with MemoryManager(description="You are a weather assistant.") as memory:
        memory.add(role="user", content=QUESTION)
        memory.add(role="assistant", content=None, tool_calls=[TOOL_CALL])
        memory.add(role="tool", tool_call_id="call_1", content=json.dumps({"temp_c": 4, "sky": "rain"}))
        memory.add(role="assistant", content="It is 4 °C and raining in Oslo.")
        context = memory.context(max_tokens=4000)
        hits = search_until_found(memory, "weather in Oslo", QUESTION)
        with MemoryManager(session_id=memory.session_id) as other:  # another agent attaches
            attached = other.get_messages()
    for name in memory_client.__all__:  # every public name resolves, so every core module loads
        getattr(memory_client, name)
    report = {
        "version": importlib.metadata.version("memsite-client"),
        "client_file": memory_client.__file__,
        "context": context,
        "hits": hits,
        "attached": attached,
        "loaded": sorted(name for name in NOT_NEEDED if name in sys.modules),
        "installed": sorted(name for name in NOT_NEEDED if installed(name)),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
