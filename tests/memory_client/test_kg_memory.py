"""KGMemory / MemoryManager(memory_type="kg") against a live server, and against marsys 0.2.1.

marsys's Knowledge Graph Flow: add() stores the raw content and schedules extraction, the
facts appear once it ran (here: the server's offline extractive backend, run by an inline
worker), and every read returns marsys's `_fact_to_dict` shape.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from memory_app.conversations.models import Session
from memory_app.facts import extraction as fact_extraction
from memory_app.facts import services as facts
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.jobs import JobKind
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey
from memory_client import (
    AuthenticationError,
    FactExtractionError,
    FactExtractionTimeout,
    KGMemory,
    MemoryManager,
    MemoryResetEvent,
    MessageError,
)
from tests.conftest import Tenant
from tests.job_dispatch import InlineWorker
from tests.memory_client.ops import run_scenario
from tests.memory_client.scenarios import op
from tests.memory_client.test_against_marsys import intended, run_marsys, scratch


def fact(role: str, subject: str, predicate: str, obj: str) -> dict[str, str]:
    return {"role": role, "content": f"Fact ({role}): {subject} {predicate} {obj}."}


def raw(role: str, text: str) -> dict[str, str]:
    return fact(role, "raw_content", "contains", text)


@pytest.fixture
def fact_worker(run_jobs_inline: Callable[[JobKind], InlineWorker], settings: Any, live_server: Any) -> InlineWorker:
    """Extraction runs the live server queues go here instead of to a broker."""
    settings.FACTS_DEBOUNCE_SECONDS = 0
    return run_jobs_inline(fact_extraction.JOB)


@pytest.fixture
def admin_key(client_tenant: Tenant) -> str:
    _, raw_key = tenancy.api_key_create(team=client_tenant.team, name="client-admin", role=ApiKey.Role.ADMIN)
    return raw_key


@pytest.fixture
def make_kg(make_memory: Callable[..., MemoryManager], fact_worker: InlineWorker) -> Callable[..., MemoryManager]:
    def make(**kwargs: Any) -> MemoryManager:
        return make_memory(memory_type="kg", **kwargs)

    return make


# --- marsys's documented KGMemory flows -------------------------------------------------------


def test_add_stores_the_raw_content_and_the_extracted_facts_appear(make_kg, fact_worker):
    memory = make_kg()
    message_id = memory.add(role="user", content="Alice lives in Paris.")

    assert str(uuid.UUID(message_id)) == message_id
    assert memory.retrieve_all() == [raw("user", "Alice lives in Paris.")]
    assert memory.retrieve_by_id(message_id) == raw("user", "Alice lives in Paris.")

    fact_worker.run_pending()
    facts = memory.wait_for_facts(timeout=30)

    assert facts == [raw("user", "Alice lives in Paris."), fact("user", "Alice", "lives in", "Paris")]
    stored = Fact.objects.get(session_id=memory.session_id)
    assert str(stored.source_message_id) == message_id
    assert stored.extractor == "extractive:extractive-v1"


def test_wait_for_facts_waits_for_the_run_that_covers_the_last_message(make_kg, fact_worker):
    memory = make_kg()
    memory.add(role="user", content="Alice lives in Paris.")
    memory.add(role="assistant", content="Bob works at Acme.")

    with pytest.raises(FactExtractionTimeout) as caught:
        memory.wait_for_facts(timeout=0.3)  # nothing ran: the queued run is still pending
    assert caught.value.status == "pending"

    fact_worker.start_pending()  # the worker runs while the client waits
    facts = memory.wait_for_facts(timeout=30)

    assert fact("user", "Alice", "lives in", "Paris") in facts
    assert fact("assistant", "Bob", "works at", "Acme") in facts
    assert FactExtractionRun.objects.filter(session_id=memory.session_id, status="done").count() >= 1


def test_add_fact_stores_a_fact_once_and_counts_repeats(make_kg):
    memory = make_kg()
    first = memory.add_fact("user", "Paris", "is capital of", "France")
    again = memory.add_fact("user", "paris ", "IS CAPITAL OF", "france")

    assert again == first
    assert memory.retrieve_all() == [fact("user", "Paris", "is capital of", "France")]
    [stored] = memory.facts()
    assert stored["times_seen"] == 2
    assert stored["extractor"] == "manual"
    assert stored["session"] == memory.session_id


def test_add_fact_refuses_an_empty_subject(make_kg):
    memory = make_kg()
    with pytest.raises(MessageError) as caught:
        memory.add_fact("user", "", "likes", "tea")
    assert "subject" in caught.value.fields
    assert memory.retrieve_all() == []


def test_retrieve_recent_returns_the_newest_entries_first(make_kg):
    memory = make_kg()
    memory.add_fact("user", "Alice", "likes", "tea")
    memory.add_fact("assistant", "Bob", "likes", "coffee")
    memory.add(role="user", content="just saying")
    memory.add_fact("user", "Carol", "likes", "juice")

    assert memory.retrieve_recent() == [fact("user", "Carol", "likes", "juice")]
    assert memory.retrieve_recent(3) == [
        fact("user", "Carol", "likes", "juice"),
        raw("user", "just saying"),
        fact("assistant", "Bob", "likes", "coffee"),
    ]
    assert len(memory.retrieve_recent(10)) == 4
    assert memory.retrieve_recent(0) == []


def test_retrieve_by_role_filters_by_source_role_newest_first(make_kg):
    memory = make_kg()
    memory.add_fact("user", "Alice", "likes", "tea")
    memory.add_fact("assistant", "Bob", "likes", "coffee")
    memory.add(role="user", content="hello")

    assert memory.retrieve_by_role("user") == [raw("user", "hello"), fact("user", "Alice", "likes", "tea")]
    assert memory.retrieve_by_role("user", 1) == [raw("user", "hello")]
    assert memory.retrieve_by_role("assistant") == [fact("assistant", "Bob", "likes", "coffee")]
    assert memory.retrieve_by_role("wizard") == []


def test_reads_page_through_more_facts_than_one_page(make_kg, client_tenant):
    memory = make_kg()
    session = Session.objects.get(pk=memory.session_id)
    for number in range(510):  # the facts endpoint pages at most 500
        facts.fact_add(
            team=client_tenant.team,
            session=session,
            role="user",
            subject=f"item {number}",
            predicate="has number",
            object=str(number),
        )
    team_wide = memory.add_fact("user", "Paris", "is capital of", "France")
    Fact.objects.filter(pk=team_wide).update(session=None, scope_key="")  # another scope: not this memory's

    everything = memory.retrieve_all()

    assert len(everything) == 510
    assert everything[0] == fact("user", "item 0", "has number", "0")
    assert everything[-1] == fact("user", "item 509", "has number", "509")
    assert memory.retrieve_recent(2) == [
        fact("user", "item 509", "has number", "509"),
        fact("user", "item 508", "has number", "508"),
    ]


def test_raw_entries_can_be_left_out(make_kg, server_url, client_tenant):
    manager = make_kg()
    manager.add(role="user", content="no facts here")
    manager.add_fact("user", "Alice", "likes", "tea")

    with KGMemory(
        session_id=manager.session_id, base_url=server_url, api_key=client_tenant.key, raw_entries=False
    ) as only_facts:
        assert only_facts.retrieve_all() == [fact("user", "Alice", "likes", "tea")]
        assert only_facts.retrieve_by_role("user") == [fact("user", "Alice", "likes", "tea")]
    assert manager.retrieve_all() == [raw("user", "no facts here"), fact("user", "Alice", "likes", "tea")]


def test_description_is_the_prompt_and_marsys_s_system_fact(make_kg, client_tenant):
    memory = make_kg(description="You map places")
    assert memory.retrieve_all() == [
        fact("system", "system_configuration", "has_initial_description", "You map places")
    ]
    session = client_tenant.client.get(f"/api/v1/sessions/{memory.session_id}/").json()
    assert session["memory_type"] == "kg"
    assert session["system_prompt"] == "You map places"


def test_attaching_sees_the_same_facts_and_does_not_repeat_the_description(make_kg):
    first = make_kg(description="You map places")
    first.add_fact("user", "Alice", "likes", "tea")
    second = make_kg(description="You map places", session_id=first.session_id)

    assert second.retrieve_all() == first.retrieve_all()
    assert len(first.retrieve_all()) == 2


# --- extract_and_update_from_text ------------------------------------------------------------


def test_extract_and_update_from_text_waits_for_the_run_and_returns_its_facts(make_kg, fact_worker):
    memory = make_kg()
    fact_worker.background = True

    added = asyncio.run(memory.extract_and_update_from_text("Alice lives in Paris.", role="assistant", timeout=30))

    assert added == [{"subject": "Alice", "predicate": "lives in", "object": "Paris"}]
    assert memory.retrieve_all() == [fact("assistant", "Alice", "lives in", "Paris")]
    run = FactExtractionRun.objects.get(session_id=memory.session_id)
    assert (run.trigger, run.status, run.input_text) == ("text", "done", "Alice lives in Paris.")


def test_extract_and_update_from_text_times_out_without_a_worker(make_kg):
    memory = make_kg()
    with pytest.raises(FactExtractionTimeout) as caught:
        asyncio.run(memory.extract_and_update_from_text("Alice lives in Paris.", timeout=0.3))
    assert caught.value.status == "pending"
    assert FactExtractionRun.objects.filter(pk=caught.value.run_id).exists()


def test_a_malformed_llm_answer_raises_with_the_quarantined_run(make_kg, fact_worker, llm_server):
    llm_server.default = lambda body: '[{"subject": "Alice", "predicate": "lives in"'  # truncated JSON
    memory = make_kg()
    fact_worker.background = True

    with pytest.raises(FactExtractionError) as caught:
        asyncio.run(memory.extract_and_update_from_text("Alice lives in Paris.", timeout=30))

    assert caught.value.status == "quarantined"
    assert caught.value.run["raw_output"].startswith('[{"subject": "Alice"')
    assert "quarantined" in str(caught.value)
    assert memory.retrieve_all() == []


def test_manager_extract_and_update_from_text_is_only_for_kg(make_memory):
    conversation = make_memory()
    with pytest.raises(NotImplementedError):
        conversation.extract_and_update_from_text("Alice lives in Paris.")


# --- removal: facts are invalidated, never deleted -------------------------------------------


def test_removing_facts_needs_an_admin_key(make_kg):
    memory = make_kg()
    fact_id = memory.add_fact("user", "Alice", "likes", "tea")

    with pytest.raises(AuthenticationError, match="admin-role API key"):
        memory.remove_by_id(fact_id)
    with pytest.raises(AuthenticationError):
        memory.reset_memory()

    assert memory.retrieve_all() == [fact("user", "Alice", "likes", "tea")]


def test_remove_and_delete_invalidate_facts_and_delete_raw_entries(make_kg, admin_key):
    memory = make_kg(api_key=admin_key)
    tea = memory.add_fact("user", "Alice", "likes", "tea")
    note = memory.add(role="user", content="a note")
    memory.add_fact("user", "Bob", "likes", "coffee")

    assert memory.remove_by_id(tea) is True
    assert memory.remove_by_id(tea) is False
    assert memory.retrieve_by_id(tea) is None
    memory.delete_memory(0)  # the note, now the oldest entry
    with pytest.raises(IndexError):
        memory.delete_memory(5)

    assert memory.retrieve_all() == [fact("user", "Bob", "likes", "coffee")]
    assert memory.retrieve_by_id(note) is None
    invalidated = memory.facts(include_invalidated="true")
    assert {f["object"] for f in invalidated if f["invalidated_at"]} == {"tea"}


def test_reset_memory_invalidates_every_fact_and_deletes_the_messages(make_kg, admin_key, bus):
    memory = make_kg(api_key=admin_key, description="You map places")
    memory.add(role="user", content="a note")
    memory.add_fact("user", "Alice", "likes", "tea")
    memory.set_event_context("mapper", bus)

    memory.reset_memory()

    assert memory.retrieve_all() == []
    assert Fact.objects.filter(session_id=memory.session_id, invalidated_at__isnull=False).count() == 2
    assert [event.agent_name for event in bus.of_type("MemoryResetEvent")] == ["mapper"]
    assert isinstance(bus.events[0], MemoryResetEvent)
    memory.add_fact("user", "Alice", "likes", "tea")  # the same fact can live again
    assert memory.retrieve_all() == [fact("user", "Alice", "likes", "tea")]


def test_update_edits_a_fact_with_an_admin_key(make_kg, admin_key):
    memory = make_kg(api_key=admin_key)
    fact_id = memory.add_fact("user", "Alice", "likes", "tea")

    memory.update(fact_id, content={"object": "green tea"})

    assert memory.retrieve_by_id(fact_id) == fact("user", "Alice", "likes", "green tea")
    with pytest.raises(MessageError):
        memory.update(str(uuid.uuid4()), content={"object": "x"})


# --- differential: marsys 0.2.1's KGMemory ---------------------------------------------------

KG_READS = {
    "memory": "KGMemory",
    "managers": {"a": {"description": "You map places"}},
    "ops": [
        op("add_fact", "user", "Alice", "lives in", "Paris"),
        op("add_fact", "assistant", "Bob", "works at", "Acme"),
        op("add_fact", "user", "Carol", "likes", "tea"),
        op("retrieve_all"),
        op("get_messages"),
        op("retrieve_recent"),
        op("retrieve_recent", 2),
        op("retrieve_recent", 10),
        op("retrieve_recent", 0),
        op("retrieve_by_role", "user"),
        op("retrieve_by_role", "user", 1),
        op("retrieve_by_role", "system"),
        op("retrieve_by_role", "wizard"),
        op("delete_memory", 1),
        op("retrieve_all"),
        op("delete_memory", 9),
        op("reset_memory"),
        op("retrieve_all"),
        op("add_fact", "user", "Dave", "was born in", "Oslo"),
        op("retrieve_all"),
    ],
}
KG_ADD = {
    "memory": "KGMemory",
    "managers": {"a": {}},
    "ops": [
        op("add", role="user", content="Alice lives in Paris"),
        op("retrieve_all"),
        op("add_fact", "user", "Bob", "likes", "tea"),
        op("add_fact", "user", "Bob", "likes", "tea"),
        op("retrieve_all"),
    ],
}
# A fact stated again is recent again: marsys keeps a second copy with its own timestamp.
KG_RESTATED = {
    "memory": "KGMemory",
    "managers": {"a": {}},
    "ops": [
        op("add_fact", "user", "Alice", "lives in", "Paris"),
        op("add_fact", "assistant", "Bob", "works at", "Acme"),
        op("add_fact", "user", "Alice", "lives in", "Paris"),
        op("retrieve_recent", 2),
        op("retrieve_recent", 1),
        op("retrieve_by_role", "user", 1),
        op("retrieve_all"),
    ],
}
ADD_FACT_OPS = [index for index, step in enumerate(KG_READS["ops"]) if step["op"] == "add_fact"]


@pytest.fixture(scope="module")
def marsys_kg(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    scenarios = {"reads": KG_READS, "add": KG_ADD, "restated": KG_RESTATED}
    return run_marsys(scenarios, scratch(tmp_path_factory.mktemp("marsys-kg")))


@pytest.fixture
def ours_kg(server_url, admin_key, fact_worker, tmp_path):
    made: list[KGMemory] = []

    def make(**spec: Any) -> KGMemory:
        memory = KGMemory(base_url=server_url, api_key=admin_key, **spec)
        made.append(memory)
        return memory

    def run(scenario: dict[str, Any]) -> list[dict[str, Any]]:
        return run_scenario(
            scenario, make_manager=make, make_message=None, tmp=str(scratch(tmp_path)), to_llm=lambda m: m
        )

    yield run
    for memory in made:
        memory.close()


def test_kg_reads_match_marsys(marsys_kg, ours_kg):
    theirs, mine = intended(marsys_kg["reads"]), ours_kg(KG_READS)
    # add_fact returns None in marsys and the fact's id here: the only difference.
    for index in ADD_FACT_OPS:
        assert theirs[index] == {"value": None}
        assert str(uuid.UUID(mine[index]["value"])) == mine[index]["value"]
        mine[index] = theirs[index]
    assert mine == theirs
    assert theirs[3]["value"][0] == fact("system", "system_configuration", "has_initial_description", "You map places")
    assert theirs[15] == {"error": "IndexError"}


def test_add_works_outside_an_event_loop_and_a_repeated_fact_is_stored_once(marsys_kg, ours_kg):
    theirs, mine = marsys_kg["add"], ours_kg(KG_ADD)
    # marsys stores the raw entry, then asyncio.create_task fails outside a running loop.
    assert theirs[0] == {"error": "RuntimeError"}
    assert mine[0]["value"] == "$0"
    assert theirs[1] == mine[1] == {"value": [raw("user", "Alice lives in Paris")]}
    tea = fact("user", "Bob", "likes", "tea")
    assert theirs[4] == {"value": [raw("user", "Alice lives in Paris"), tea, tea]}
    assert mine[4] == {"value": [raw("user", "Alice lives in Paris"), tea]}


def test_a_restated_fact_is_the_most_recent_as_in_marsys(marsys_kg, ours_kg):
    theirs, mine = marsys_kg["restated"], ours_kg(KG_RESTATED)
    paris, bob = fact("user", "Alice", "lives in", "Paris"), fact("assistant", "Bob", "works at", "Acme")
    assert mine[3:6] == theirs[3:6] == [{"value": [paris, bob]}, {"value": [paris]}, {"value": [paris]}]
    # marsys keeps both copies; here the fact is stored once, in the place of its latest sighting.
    assert theirs[6] == {"value": [paris, bob, paris]}
    assert mine[6] == {"value": [bob, paris]}


def test_a_restated_fact_keeps_its_first_sighting_and_records_the_latest(make_kg):
    memory = make_kg()
    paris = memory.add_fact("user", "Alice", "lives in", "Paris")
    memory.add_fact("assistant", "Bob", "works at", "Acme")
    memory.add_fact("user", "alice", "lives in", "paris")

    [bob_row, paris_row] = memory.facts()  # newest first: by when each was first seen

    def at(row: dict[str, Any], name: str) -> datetime:
        return datetime.fromisoformat(row[name])

    assert paris_row["id"] == paris and paris_row["times_seen"] == 2
    # First seen before Bob's fact (provenance), last seen after it (recency).
    assert at(paris_row, "created_at") < at(bob_row, "created_at") < at(paris_row, "last_seen_at")
    assert at(bob_row, "last_seen_at") == at(bob_row, "valid_from")  # seen once, when it was stated
