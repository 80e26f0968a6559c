"""set_event_context: MemoryResetEvent on reset_memory, CompactionEvents from the server's event feed."""

from __future__ import annotations

import asyncio

from memory_app.compaction.models import CompactionRun
from memory_client import CompactionEvent, ManagedMemoryConfig, MemoryResetEvent
from tests.memory_client.test_managed_memory import SYSTEM, add_turns


def managed(make_memory, threshold: int = 1000, **kwargs):
    return make_memory(
        "managed_conversation", SYSTEM, memory_config=ManagedMemoryConfig(threshold_tokens=threshold), **kwargs
    )


def test_reset_memory_emits_a_memory_reset_event_for_every_memory_type(make_memory, bus):
    plain = make_memory("conversation_history", "sys")
    plain.set_event_context("Researcher", bus, session_id="run_123")
    plain.add(role="user", content="hi")
    plain.reset_memory()

    other = managed(make_memory)
    other.set_event_context("Writer", bus)
    other.reset_memory()

    assert [type(event).__name__ for event in bus.events] == ["MemoryResetEvent", "MemoryResetEvent"]
    assert [event.agent_name for event in bus.events] == ["Researcher", "Writer"]
    assert isinstance(bus.events[0], MemoryResetEvent) and bus.events[0].timestamp > 0


def test_nothing_is_emitted_without_a_bus(make_memory, bus, worker):
    memory = managed(make_memory)
    memory.set_event_context("Researcher")  # marsys: an agent name alone emits nothing
    add_turns(memory, 6)
    worker.run_pending()
    memory.reset_memory()
    asyncio.run(memory.compact_if_needed())
    assert bus.events == []


def test_compaction_events_observed_on_the_server_reach_the_bus(make_memory, bus, worker):
    memory = managed(make_memory)
    memory.set_event_context("Researcher", bus, session_id="run_123")
    add_turns(memory, 6)
    assert worker.run_pending() == ["done"]
    assert bus.events == []  # the server's events are read when the client polls

    asyncio.run(memory.compact_if_needed())  # marsys's Agent calls this at every step

    run = CompactionRun.objects.get(session_id=memory.session_id)
    started, completed = bus.of_type("CompactionEvent")
    assert all(isinstance(event, CompactionEvent) for event in (started, completed))
    assert (started.session_id, started.agent_name, started.status) == ("run_123", "Researcher", "started")
    assert started.pre_tokens > 1000
    assert (completed.status, completed.stages_run) == ("completed", ["summarization", "backward_packing"])
    assert (completed.pre_tokens, completed.post_tokens) == (run.pre_tokens, run.post_tokens)
    assert (completed.pre_messages, completed.post_messages) == (run.pre_messages, run.post_messages)
    assert completed.duration is not None and completed.duration >= 0
    assert completed.metadata["run_id"] == str(run.pk)
    assert completed.metadata["memsite_session_id"] == memory.session_id
    assert completed.metadata["trigger"] == "threshold"
    assert completed.event_type == "compaction"

    asyncio.run(memory.compact_if_needed())
    assert len(bus.events) == 2  # each server event is emitted once


def test_failed_and_payload_runs_are_reported_while_the_client_waits(make_memory, bus, worker):
    memory = managed(make_memory, threshold=100_000)
    memory.set_event_context("Researcher", bus)
    add_turns(memory, 3)
    worker.background = True

    assert asyncio.run(memory.compact_for_payload_error(timeout=30)) is True

    assert [event.status for event in bus.events] == ["started", "completed"]
    assert bus.events[0].session_id == memory.session_id  # no coordination session given: the memory's
    assert bus.events[1].metadata["trigger"] == "payload_error"


def test_events_from_before_the_context_was_set_are_not_replayed(make_memory, bus, worker):
    memory = managed(make_memory)
    add_turns(memory, 6)
    worker.run_pending()

    attached = make_memory("managed_conversation", session_id=memory.session_id)
    attached.set_event_context("Latecomer", bus, session_id="run_9")
    assert attached.poll_events() == []
    memory.set_event_context("Early", bus)  # this memory has read nothing yet either
    asyncio.run(memory.compact_if_needed())
    assert bus.events == []

    memory.reset_memory()
    records = attached.poll_events()
    assert [record["kind"] for record in records] == ["reset"]
    assert [type(event).__name__ for event in bus.events] == ["MemoryResetEvent"]  # reset kinds are not re-emitted


def test_setting_the_context_again_keeps_the_events_in_between(make_memory, bus, worker):
    memory = managed(make_memory)
    memory.set_event_context("Researcher", bus, session_id="step-1")
    add_turns(memory, 6)
    worker.run_pending()
    memory.set_event_context("Researcher", None, session_id="step-2")  # marsys's Agent does this each step
    asyncio.run(memory.compact_if_needed())
    assert [(event.status, event.session_id) for event in bus.events] == [
        ("started", "step-2"),
        ("completed", "step-2"),
    ]
