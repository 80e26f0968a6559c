"""search(), retrieve_relevant() and recall in context() against a live server over real HTTP.

What the server indexes is embedded by the fake embedder (tests/conftest.py), by the index job
an in-process worker runs when the test asks (as the Celery worker would, on its own queue).
"""

from __future__ import annotations

from typing import Any

import pytest

from memory_app.facts import services as facts
from memory_app.facts.models import Fact
from memory_client import MemoryManager, NotFoundError, SearchQueryError, fact_to_dict

LOGIN_BUG = "The login bug: the session cookie expires before the OAuth redirect returns."


def stored(memory: MemoryManager) -> dict[str, dict[str, Any]]:
    """retrieve_recent's dicts of every message, by their content."""
    return {entry["content"]: entry for entry in memory.retrieve_recent(1000)}


def test_search_finds_a_planted_message_and_fact_with_kind_and_source(make_memory, indexer):
    chat = make_memory(description="You are helpful")
    kg = make_memory(memory_type="kg")
    message_id = chat.add(role="user", content=LOGIN_BUG)
    chat.add(role="assistant", content="Noted, I will look at the weather widget first.")
    fact_id = kg.add_fact("assistant", "login bug", "is caused by", "an expired session cookie")
    indexer()

    hits = chat.search("login bug session cookie", explain=True)

    by_kind: dict[str, dict[str, Any]] = {}
    for hit in hits:  # the best hit of each kind (the vector engine finds the weather message too)
        by_kind.setdefault(hit["kind"], hit)
    message = by_kind["message"]
    assert message["id"] == message_id
    assert message["text"] == LOGIN_BUG
    assert "**login**" in message["snippet"]
    assert message["source"]["session"] == chat.session_id
    assert message["source"]["message_id"] == message_id
    assert message["source"]["seq"] == 1
    assert message["source"]["role"] == "user"
    assert set(message["explain"]) >= {"lexical_rank", "vector_similarity", "recency_factor", "fused_score"}
    fact = by_kind["fact"]
    assert fact["id"] == fact_id
    assert fact["source"]["fact_id"] == fact_id
    assert fact["source"]["session"] == kg.session_id
    assert [hit["score"] for hit in hits] == sorted((hit["score"] for hit in hits), reverse=True)


def test_search_filters_pass_through(make_memory, indexer):
    chat = make_memory()
    other = make_memory()
    kg = make_memory(memory_type="kg")
    chat.add(role="user", content=LOGIN_BUG)
    other.add(role="user", content="Another login bug report: the cookie is gone after a redirect.")
    kg.add_fact("user", "login bug", "affects", "every OAuth user")
    indexer()

    assert {hit["kind"] for hit in chat.search("login bug cookie", kinds=["fact"])} == {"fact"}
    assert {hit["kind"] for hit in chat.search("login bug cookie", kinds="fact")} == {"fact"}
    own = chat.search("login bug cookie", session=chat.session_id)
    assert own and {hit["source"]["session"] for hit in own} == {chat.session_id}
    assert len(chat.search("login bug cookie", limit=1)) == 1
    assert chat.search("login bug cookie", since="2999-01-01T00:00:00Z") == []
    assert all(hit["source"]["role"] == "user" for hit in chat.search("login bug cookie", role="user"))
    assert "explain" not in chat.search("login bug cookie")[0]
    # The manager's own method, team-wide unless asked.
    team_wide = chat.search("login bug cookie", kinds=["message"])
    assert {hit["source"]["session"] for hit in team_wide} == {chat.session_id, other.session_id}


def test_a_refused_search_names_the_argument(make_memory):
    memory = make_memory()

    with pytest.raises(SearchQueryError) as bad_kind:
        memory.search("login", kinds=["tweets"])
    assert bad_kind.value.status_code == 400
    assert any(field.startswith("kinds") for field in bad_kind.value.fields)
    assert isinstance(bad_kind.value, ValueError)

    with pytest.raises(SearchQueryError) as empty:
        memory.search("   ")
    assert "query" in empty.value.fields

    with pytest.raises(SearchQueryError) as bad_time:
        memory.search("login", since="yesterday")
    assert "since" in bad_time.value.fields  # the client's name for the API's `from`

    with pytest.raises(SearchQueryError) as too_many:
        memory.search("login", limit=51)
    assert "limit" in too_many.value.fields

    with pytest.raises(NotFoundError):
        memory.search("login", session="00000000-0000-4000-8000-000000000000")


def test_retrieve_relevant_returns_own_messages_in_retrieve_recent_shape_best_first(make_memory, indexer):
    memory = make_memory(description="You are helpful")
    neighbour = make_memory()
    memory.add(role="user", content=LOGIN_BUG)
    memory.add(role="assistant", content="The session cookie lifetime is 5 minutes; the login bug is a timeout.")
    memory.add(role="user", content="Also, what is the weather in Oslo?")
    memory.add(
        role="assistant",
        content=None,
        tool_calls=[{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}],
    )
    memory.add(role="tool", tool_call_id="call_1", content='{"temp_c": 4, "sky": "clear"}')
    neighbour.add(role="user", content="The login bug, the session cookie, the OAuth redirect: all of it.")
    indexer()

    relevant = memory.retrieve_relevant("login bug session cookie", n=2)

    shapes = stored(memory)
    assert relevant == [shapes[entry["content"]] for entry in relevant]  # retrieve_recent's dicts, exactly
    assert {entry["content"] for entry in relevant} == {
        LOGIN_BUG,
        "The session cookie lifetime is 5 minutes; the login bug is a timeout.",
    }
    # Best first: the server's order of this session's message hits.
    order = [
        hit["text"] for hit in memory.search("login bug session cookie", kinds=["message"], session=memory.session_id)
    ]
    assert [entry["content"] for entry in relevant] == order[:2]

    assert len(memory.retrieve_relevant("login bug session cookie", n=1)) == 1
    assert memory.retrieve_relevant("login bug", n=0) == []
    tool = memory.retrieve_relevant("temp_c sky clear", n=1)
    assert tool == [shapes['{"temp_c": 4, "sky": "clear"}']]
    assert tool[0]["role"] == "tool" and tool[0]["tool_call_id"] == "call_1"


def test_retrieve_relevant_counts_a_long_message_once(make_memory, indexer):
    memory = make_memory()
    long_text = " ".join(["The login bug appears when the session cookie expires."] * 400)
    memory.add(role="user", content=long_text)
    memory.add(role="user", content="The login bug is tracked in ticket 42.")
    indexer()

    relevant = memory.retrieve_relevant("login bug session cookie", n=5)

    assert [entry["content"] for entry in relevant].count(long_text) == 1
    assert len(relevant) == 2


def test_kg_retrieve_relevant_returns_live_facts_in_fact_dict_shape(make_memory, indexer):
    kg = make_memory(memory_type="kg")
    elsewhere = make_memory(memory_type="kg")
    cause = kg.add_fact("assistant", "login bug", "is caused by", "an expired session cookie")
    kg.add_fact("user", "Oslo weather", "is", "clear and cold")
    old = kg.add_fact("assistant", "login bug", "was blamed on", "the session cookie domain")
    elsewhere.add_fact("user", "login bug", "was seen by", "another team member with a session cookie")
    facts.fact_invalidate(fact=Fact.objects.get(pk=old))  # as an admin key's remove_by_id does
    indexer()

    relevant = kg.retrieve_relevant("login bug session cookie", n=3)

    assert relevant[0] == fact_to_dict(
        {
            "role": "assistant",
            "subject": "login bug",
            "predicate": "is caused by",
            "object": "an expired session cookie",
        }
    )
    contents = [entry["content"] for entry in relevant]
    assert not any("was blamed on" in content or "was seen by" in content for content in contents)
    assert all(set(entry) == {"role", "content"} for entry in relevant)
    assert kg.retrieve_by_id(cause) == relevant[0]
    assert len(kg.retrieve_relevant("login bug session cookie", n=1)) == 1
    assert kg.retrieve_relevant("login bug", n=0) == []


def test_recall_passes_through_context(make_memory, indexer):
    planted = make_memory()
    planted.add(role="user", content=LOGIN_BUG)
    memory = make_memory(description="You are helpful")
    memory.add(role="user", content="Where were we?")
    indexer()

    plain = memory.context()
    recalled = memory.context(recall="login bug session cookie", recall_k=1, recall_kinds=["message"])

    assert plain == [{"role": "system", "content": "You are helpful"}, {"role": "user", "content": "Where were we?"}]
    assert recalled[0] == plain[0] and recalled[-1] == plain[-1] and len(recalled) == 3
    memory_message = recalled[1]
    assert memory_message["role"] == "system"
    assert "Relevant memory, recalled for: login bug session cookie" in memory_message["content"]
    assert "session cookie expires" in memory_message["content"]

    with pytest.raises(SearchQueryError) as bad:
        memory.context(recall="login", recall_kinds=["tweets"])
    assert "recall_kinds" in bad.value.fields
    with pytest.raises(SearchQueryError) as too_many:
        memory.context(recall="login", recall_k=100)
    assert "recall_k" in too_many.value.fields
