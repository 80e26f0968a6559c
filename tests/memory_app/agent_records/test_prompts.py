"""Golden tests: the TypeScript formatMemoryContext and buildArbiterSelectPrompt on the reference documents.

`reference_*` below translate that TypeScript literally (same steps, same JavaScript
semantics: a missing field is `undefined` and `.split` on it throws), so where the TypeScript
works, the service must produce exactly its text. The expected strings are also written out by
hand, so a wrong reference cannot hide a wrong service.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from memory_app.agent_records import documents as agent_memory_yaml
from memory_app.agent_records.prompts import build_arbiter_select_prompt, format_memory_context
from tests.memory_app.agent_records.documents import examples_document, main_document

pytestmark = pytest.mark.django_db


class Undefined(Exception):
    """JavaScript's TypeError on reading a property of undefined."""


def js_get(obj: dict, key: str):
    if key not in obj:
        return "undefined"  # only ever interpolated below, where `${undefined}` is "undefined"
    return obj[key]


def js_time(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000


def js_split_first(value) -> str:
    if not isinstance(value, str):
        raise Undefined("Cannot read properties of undefined (reading 'split')")
    return value.split("\n")[0]


def reference_format_memory_context(memory: dict) -> str:
    context = ""

    recentDiscoveries = sorted(memory["discoveries"], key=lambda d: -js_time(d["timestamp"]))[:5]
    if len(recentDiscoveries) > 0:
        context += "## Key Discoveries\n"
        for d in recentDiscoveries:
            context += f"- [{d['type']}] {js_split_first(d['content'])}\n"

    recentFailures = sorted(
        [a for a in memory["attempts"] if a["result"] == "failure"], key=lambda a: -js_time(a["timestamp"])
    )[:3]
    if len(recentFailures) > 0:
        context += "\n## Recently Failed Approaches (Don't Repeat)\n"
        for a in recentFailures:
            context += f"- {a['description']}: {js_split_first(a.get('output'))}\n"

    if memory.get("context"):
        context += "\n## Current Task Context\n"
        context += f"- Step: {js_get(memory['context'], 'currentPlanStep')}\n"
        if "blockers" not in memory["context"]:
            raise Undefined("Cannot read properties of undefined (reading 'length')")
        if len(memory["context"]["blockers"]) > 0:
            context += f"- Blockers: {', '.join(memory['context']['blockers'])}\n"

    return context


def reference_build_arbiter_select_prompt(memories: list[tuple[str, dict]]) -> str:
    def line(agent: str, memory: dict) -> str:
        if not memory["attempts"]:
            raise Undefined("Cannot read properties of undefined (reading 'result')")
        recentAttempt = memory["attempts"][len(memory["attempts"]) - 1]
        return f"**{agent}**: Last attempt ({recentAttempt['result']}) - {recentAttempt['description']}"

    previousWork = "\n".join(line(agent, memory) for agent, memory in memories)
    return (
        "\n## Previous Agent Work This Session\n\n"
        + previousWork
        + "\n\nUse this to make informed decisions about which agent should work next.\n  "
    )


MAIN_CONTEXT = (
    "## Key Discoveries\n"
    "- [complexity_assessment] Task complexity: 5 steps across 3 files\n"
    "- [code_pattern] Middleware pattern used in project:\n"
    "- [dependency_check] Dependencies available:\n"
    "- [codebase_structure] Project uses TypeScript with Deno.\n"
    "\n## Current Task Context\n"
    "- Step: 2\n"
)
EXAMPLES_CONTEXT = (
    "## Key Discoveries\n"
    "- [codebase_structure] Authentication needs:\n"
    "\n## Recently Failed Approaches (Don't Repeat)\n"
    "- Add OAuth2 integration: OAuth scope too broad for task requirements.\n"
)
ARBITER = (
    "\n## Previous Agent Work This Session\n\n"
    "**developer**: Last attempt (in_progress) - Implement login endpoint\n"
    "**tester**: Last attempt (failure) - Add OAuth2 integration\n\n"
    "Use this to make informed decisions about which agent should work next.\n  "
)


def url(session_id: str, tail: str) -> str:
    return f"/api/v1/sessions/{session_id}/{tail}"


@pytest.fixture
def two_agents(api, session_id) -> str:
    for agent, text in (("developer", main_document()), ("tester", examples_document("tester"))):
        response = api.put(url(session_id, f"agents/{agent}/memory/"), text.encode(), content_type="application/yaml")
        assert response.status_code == 200, response.content
    return session_id


def served(api, session_id: str, agent: str) -> dict:
    return api.get(url(session_id, f"agents/{agent}/memory/")).json()


def test_the_prompt_of_the_reference_document_is_the_typescript_text(api, two_agents):
    memory = served(api, two_agents, "developer")
    assert reference_format_memory_context(memory) == MAIN_CONTEXT
    response = api.get(url(two_agents, "agents/developer/memory/prompt/"))
    assert response.status_code == 200
    assert response.json()["text"] == MAIN_CONTEXT
    plain = api.get(url(two_agents, "agents/developer/memory/prompt/"), {"format": "text"})
    assert plain["Content-Type"].startswith("text/plain") and plain.content.decode() == MAIN_CONTEXT


def test_the_failed_example_shows_its_error_where_the_typescript_throws(api, two_agents):
    memory = served(api, two_agents, "tester")
    # Example 2 keeps its reason in `error`, and the TypeScript's `a.output.split` throws on it.
    with pytest.raises(Undefined):
        reference_format_memory_context(memory)
    assert api.get(url(two_agents, "agents/tester/memory/prompt/")).json()["text"] == EXAMPLES_CONTEXT
    with_output = {**memory, "attempts": [{**memory["attempts"][0], "output": "Scope too broad\nmore"}]}
    assert format_memory_context(with_output) == reference_format_memory_context(with_output)


def test_the_arbiter_summary_of_the_reference_documents_is_the_typescript_text(api, two_agents):
    memories = [(agent, served(api, two_agents, agent)) for agent in ("developer", "tester")]
    assert reference_build_arbiter_select_prompt(memories) == ARBITER
    response = api.get(url(two_agents, "arbiter-summary/"))
    assert response.status_code == 200 and response.json()["text"] == ARBITER
    assert api.get(url(two_agents, "arbiter-summary/"), {"format": "text"}).content.decode() == ARBITER


def test_the_prompt_keeps_the_five_newest_discoveries_and_three_newest_failures(api, session_id):
    """A longer memory built from the reference document: limits, ordering and blockers."""
    document = agent_memory_yaml.load(main_document())
    base = document["discoveries"][0]
    document["discoveries"] = [
        {**base, "id": f"discovery-{i:03d}", "timestamp": f"2026-01-23T1{i % 7}:00:0{i}.000Z", "content": f"D{i}\nx"}
        for i in range(1, 9)
    ]
    failure = agent_memory_yaml.load(examples_document("developer"))["attempts"][0]
    document["attempts"] += [
        {
            **failure,
            "id": f"attempt-f{i}",
            "timestamp": f"2026-01-23T11:0{i}:00.000Z",
            "description": f"F{i}",
            "output": f"why {i}\ntrace",
        }
        for i in (3, 1, 4, 2, 5)
    ]
    document["context"]["blockers"] = ["Session store down", "No test DB"]
    response = api.put(url(session_id, "agents/developer/memory/"), document, format="json")
    assert response.status_code == 200, response.content

    text = api.get(url(session_id, "agents/developer/memory/prompt/")).json()["text"]
    assert text == reference_format_memory_context(served(api, session_id, "developer"))
    assert text == (
        "## Key Discoveries\n"
        "- [codebase_structure] D6\n- [codebase_structure] D5\n- [codebase_structure] D4\n"
        "- [codebase_structure] D3\n- [codebase_structure] D2\n"
        "\n## Recently Failed Approaches (Don't Repeat)\n"
        "- F5: why 5\n- F4: why 4\n- F3: why 3\n"
        "\n## Current Task Context\n"
        "- Step: 2\n"
        "- Blockers: Session store down, No test DB\n"
    )


def test_the_prompt_texts_of_empty_memories():
    assert format_memory_context({"discoveries": [], "attempts": [], "context": None}) == ""
    assert format_memory_context({"discoveries": [], "attempts": [], "context": {}}) == (
        "\n## Current Task Context\n- Step: undefined\n"
    )
    assert build_arbiter_select_prompt([]) == reference_build_arbiter_select_prompt([])
    assert "**idle**: No attempts yet\n" in build_arbiter_select_prompt([("idle", {"attempts": []})])


def test_the_arbiter_summary_lists_agents_in_the_order_they_started(api, session_id):
    for agent in ("zeta", "alpha"):
        api.post(url(session_id, f"agents/{agent}/memory/attempts/"), {"description": f"{agent} work"}, format="json")
    text = api.get(url(session_id, "arbiter-summary/")).json()["text"]
    assert (
        "**zeta**: Last attempt (in_progress) - zeta work\n**alpha**: Last attempt (in_progress) - alpha work" in text
    )
