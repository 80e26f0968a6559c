"""ManagedConversationMemory over real HTTP: compacted context, raw history, compaction requests, stats.

No Celery worker runs here: the `worker` fixture receives the runs the server queues and
executes them in-process with the server's own job body (the offline extractive backend
summarises), either when the test says so or, for the waiting methods, on a thread.
"""

from __future__ import annotations

import asyncio

import pytest

from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Session
from memory_client import ManagedMemoryConfig, Message
from memory_client.config import ActiveContextPolicyConfig, SummarizationConfig

SYSTEM = "You are a travel agent."
CALL = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": '{"q": "Oslo"}'}}


def turn(index: int) -> list[dict]:
    """One user/assistant round of about 100 tokens each, whose first sentences are short."""
    details = " ".join(f"Detail {j} of leg {index} is noted here." for j in range(8))
    return [
        {"role": "user", "content": f"Question {index}: what about leg {index}? {details}"},
        {"role": "assistant", "content": f"Answer {index}: leg {index} is booked. {details}"},
    ]


def add_turns(memory, count: int, start: int = 0) -> list[str]:
    return [memory.add(**message) for index in range(start, start + count) for message in turn(index)]


def unsummarisable(memory) -> None:
    """A conversation that opens with the assistant: with a grace of 50 rounds every message is
    protected, so a compaction has nothing to summarise (the server refuses to queue one)."""
    memory.add(role="assistant", content="Hello! Where would you like to travel?")
    add_turns(memory, 2)


def config(threshold: int = 1000, grace: int = 1) -> ManagedMemoryConfig:
    return ManagedMemoryConfig(
        threshold_tokens=threshold,
        active_context=ActiveContextPolicyConfig(summarization=SummarizationConfig(grace_recent_messages=grace)),
    )


@pytest.fixture
def managed(make_memory):
    def make(threshold: int = 1000, grace: int = 1, **kwargs):
        return make_memory("managed_conversation", SYSTEM, memory_config=config(threshold, grace), **kwargs)

    return make


@pytest.fixture
def lower_threshold(make_memory):
    """Another agent attaches with a smaller threshold (a PATCH: it queues nothing by itself)."""

    def lower(memory, threshold: int) -> None:
        make_memory("managed_conversation", session_id=memory.session_id, memory_config={"threshold_tokens": threshold})

    return lower


def only_run(memory) -> CompactionRun:
    return CompactionRun.objects.get(session_id=memory.session_id)


# --- reading ------------------------------------------------------------------------------


def test_before_any_compaction_get_messages_is_the_whole_conversation(managed):
    memory = managed(threshold=100_000)
    memory.add(role="user", content="Find flights to Oslo")
    memory.add(role="assistant", tool_calls=[CALL])
    memory.add(role="tool", content="SK4021 at 09:10", tool_call_id="call_1", name="search")
    for index in range(25):  # more than the context endpoint's default window of 20
        memory.add(role="assistant" if index % 2 else "user", content=f"message {index}")

    messages = memory.get_messages()
    assert len(messages) == 1 + 28
    assert messages[:4] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Find flights to Oslo"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "content": "SK4021 at 09:10", "tool_call_id": "call_1", "name": "search"},
    ]
    assert memory.retrieve_all() == messages  # as in marsys's managed memory


def test_get_messages_is_the_compacted_context_and_raw_messages_stay_whole(managed, worker):
    memory = managed()
    ids = add_turns(memory, 6)
    assert len(worker.sent) == 1  # the append that crossed the threshold queued one run
    assert worker.run_pending() == ["done"]

    run = only_run(memory)
    messages = memory.get_messages()
    summary = [m for m in messages if str(m["content"]).startswith("[Compacted Context Summary]")]
    assert len(summary) == 1 and summary[0]["role"] == "assistant"
    assert messages[0] == {"role": "system", "content": SYSTEM}
    assert messages[1] == turn(0)[0]  # the original instruction, kept ahead of the summary
    assert messages[-1] == turn(5)[1]  # the protected tail: everything after covered_to_seq
    assert run.covered_to_seq == 11
    assert len(messages) < 1 + len(ids)

    raw = memory.get_raw_messages()
    assert [m.message_id for m in raw] == ids
    assert all(isinstance(m, Message) for m in raw)
    assert [{"role": m.role, "content": m.content} for m in raw] == [m for i in range(6) for m in turn(i)]
    # reads by id and role still see the raw history
    assert memory.retrieve_by_id(ids[0]) == turn(0)[0]
    assert len(memory.retrieve_by_role("user")) == 6
    assert memory.retrieve_recent(2) == turn(5)


def test_reverting_the_compaction_brings_back_the_full_context(managed, worker, client_tenant):
    memory = managed(threshold=100_000)
    add_turns(memory, 3)
    before = memory.get_messages()
    asyncio.run(memory.compact_for_payload_error(timeout=0))  # queues; the worker runs it below
    worker.run_pending()
    assert memory.get_messages() != before

    run = only_run(memory)
    response = client_tenant.client.post(f"/api/v1/sessions/{memory.session_id}/compactions/{run.pk}/revert/")
    assert response.status_code == 200, response.content
    assert memory.get_messages() == before


def test_reset_memory_deletes_everything_and_keeps_the_prompt(managed, worker):
    memory = managed(threshold=100_000)
    memory.add(role="system", content="a system message row")
    add_turns(memory, 1)
    memory.reset_memory()
    assert memory.get_raw_messages() == []
    assert memory.get_messages() == [{"role": "system", "content": SYSTEM}]


# --- compact_if_needed ------------------------------------------------------------------------


def test_compact_if_needed_queues_only_when_over_the_threshold(managed, lower_threshold, worker):
    memory = managed(threshold=100_000)
    add_turns(memory, 3)
    assert asyncio.run(memory.compact_if_needed()) is None
    assert not CompactionRun.objects.exists()

    # Lowering the threshold does not queue anything by itself; the next check does.
    lower_threshold(memory, 200)
    assert worker.sent == []
    run = asyncio.run(memory.compact_if_needed({"agent_instruction": "ignored"}))
    assert (run["status"], run["trigger"]) == ("pending", "manual")
    assert worker.sent == [run["id"]]

    again = asyncio.run(memory.compact_if_needed())
    assert again["id"] == run["id"]  # already queued: not queued twice
    assert CompactionRun.objects.count() == 1


def test_compact_if_needed_returns_the_run_the_server_already_queued(managed, worker):
    memory = managed()
    add_turns(memory, 6)
    queued = only_run(memory)
    run = asyncio.run(memory.compact_if_needed())
    assert (run["id"], run["trigger"]) == (str(queued.pk), "threshold")
    assert CompactionRun.objects.count() == 1


def test_compact_if_needed_does_nothing_while_nothing_can_be_compacted(managed, lower_threshold, make_memory, worker):
    memory = managed(threshold=100_000, grace=50)
    unsummarisable(memory)
    lower_threshold(memory, 300)
    # Every message is protected: the server answers 409 with the reason, and no run is queued.
    assert asyncio.run(memory.compact_if_needed()) is None
    assert CompactionRun.objects.count() == 0

    settings = {"threshold_tokens": 300, "active_context": {"summarization": {"grace_recent_messages": 1}}}
    make_memory("managed_conversation", session_id=memory.session_id, memory_config=settings)
    run = asyncio.run(memory.compact_if_needed())
    assert (run["trigger"], run["status"]) == ("manual", "pending")
    assert CompactionRun.objects.count() == 1


def test_compact_if_needed_can_wait_like_marsys(managed, lower_threshold, worker):
    memory = managed(threshold=100_000)
    add_turns(memory, 6)
    lower_threshold(memory, 1000)
    worker.background = True
    run = asyncio.run(memory.compact_if_needed(wait=True, timeout=30))
    assert run["status"] == "done"
    assert any(str(m["content"]).startswith("[Compacted Context Summary]") for m in memory.get_messages())


def test_conversation_history_managers_do_not_compact(make_memory, worker):
    memory = make_memory("conversation_history")
    add_turns(memory, 2)
    assert asyncio.run(memory.compact_if_needed()) is None
    assert asyncio.run(memory.compact_for_payload_error()) is False
    assert not hasattr(memory, "get_cache_stats")  # as in marsys, only managed memory has it
    assert not CompactionRun.objects.exists()


# --- compact_for_payload_error ------------------------------------------------------------


def test_compact_for_payload_error_waits_for_the_run_and_reports_the_shrink(managed, worker):
    memory = managed(threshold=100_000)
    add_turns(memory, 4)
    before = memory.get_messages()
    worker.background = True  # a worker picks the run up while the client waits

    assert asyncio.run(memory.compact_for_payload_error({"provider": "openai"}, timeout=30)) is True

    run = only_run(memory)
    assert (run.trigger, run.status) == ("payload_error", "done")
    assert run.post_bytes < run.pre_bytes
    after = memory.get_messages()
    assert len(after) < len(before)
    assert after[-1] == turn(3)[1]


def test_compact_for_payload_error_is_false_when_nothing_can_be_compacted(managed, worker):
    memory = managed(threshold=100_000, grace=50)
    unsummarisable(memory)
    worker.background = True
    assert asyncio.run(memory.compact_for_payload_error(timeout=30)) is False
    assert CompactionRun.objects.count() == 0


def test_compact_for_payload_error_is_false_when_no_worker_finishes_in_time(managed, worker):
    memory = managed(threshold=100_000)
    add_turns(memory, 2)
    assert asyncio.run(memory.compact_for_payload_error(timeout=0.3)) is False
    assert only_run(memory).status == "pending"  # still queued: it applies when a worker runs it


def test_compact_for_payload_error_is_false_when_the_server_cannot_be_asked(managed, worker, client_tenant):
    memory = managed(threshold=100_000)
    Session.objects.filter(pk=memory.session_id).delete()  # gone, as an admin's purge leaves it
    assert asyncio.run(memory.compact_for_payload_error(timeout=1)) is False


# --- get_cache_stats ---------------------------------------------------------------------------


def test_get_cache_stats_reports_the_accounting_and_the_last_compaction(managed, worker):
    memory = managed()
    add_turns(memory, 6)
    session = Session.objects.get(pk=memory.session_id)
    queued = only_run(memory)

    stats = memory.get_cache_stats()
    assert stats == {
        "cache_valid": True,
        "raw_count": 12,
        "estimated_total_tokens": session.active_tokens,
        "threshold_tokens": 1000,
        "over_threshold": True,
        "active_compaction": {"run_id": str(queued.pk), "status": "pending"},
        "compactions_done": 0,
        "last_compaction": None,
    }

    worker.run_pending()
    run = only_run(memory)
    stats = memory.get_cache_stats()
    assert stats["estimated_total_tokens"] == Session.objects.get(pk=memory.session_id).active_tokens
    assert stats["estimated_total_tokens"] < session.active_tokens
    assert (stats["over_threshold"], stats["active_compaction"], stats["compactions_done"]) == (False, None, 1)
    assert stats["last_compaction"] == {
        "run_id": str(run.pk),
        "timestamp": run.finished_at.timestamp(),
        "trigger": "threshold",
        "stages_run": ["summarization", "backward_packing"],
        "pre_compaction_tokens": run.pre_tokens,
        "pre_compaction_messages": run.pre_messages,
        "post_compaction_tokens": run.post_tokens,
        "post_compaction_messages": run.post_messages,
        "pre_payload_bytes": run.pre_bytes,
        "post_payload_bytes": run.post_bytes,
        "covered_to_seq": 11,
        "backend": "extractive",
        "model": run.model,
    }
