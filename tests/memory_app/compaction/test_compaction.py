"""Compaction as a durable job, run in-process here (a real worker runs it in test_compaction_worker)."""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest
from django.db import connection

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Message, Session
from memory_app.events.models import MemoryEvent
from tests.llm_server import Fail, Garbage, Reply

pytestmark = pytest.mark.django_db(transaction=True)

SUMMARY = {
    "user_request_summary": "Plan a trip to Oslo in March.",
    "summary": "The user plans an Oslo trip; flights were searched.",
    "salient_facts": ["flight SK4021", "hotel: Grand Oslo"],
    "open_threads": ["book the hotel"],
    "keep_images": [],
}
MANAGED = {
    "memory_type": "managed_conversation",
    "system_prompt": "You are a travel agent.",
    "memory_config": {"threshold_tokens": 300, "active_context": {"summarization": {"grace_recent_messages": 1}}},
}


def summary_reply(data: dict | None = None) -> Reply:
    return Reply(json.dumps(data or SUMMARY), prompt_tokens=500, completion_tokens=60)


def new_session(api, **overrides) -> str:
    response = api.post("/api/v1/sessions/", {**MANAGED, **overrides}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def append(api, session_id, *messages):
    response = api.post(f"/api/v1/sessions/{session_id}/messages/", {"messages": list(messages)}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["messages"]


def turns(count: int, words: int = 30) -> list[dict]:
    out = []
    for i in range(count):
        out.append({"role": "user", "content": f"question {i}: " + "word " * words})
        out.append({"role": "assistant", "content": f"answer {i}: " + "text " * words})
    return out


def execute_in_thread(run_id: str, outcome: list[str]) -> threading.Thread:
    """Run the job as a worker would, on its own database connection."""

    def target() -> None:
        try:
            outcome.append(compaction.compaction_execute(run_id=run_id))
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    return thread


def wait_for_llm_call(llm_server, count: int = 1) -> None:
    deadline = time.monotonic() + 30
    while len(llm_server.requests) < count:
        assert time.monotonic() < deadline, "the job never called the LLM"
        time.sleep(0.05)


def context(api, session_id, **params):
    """What an agent's context read receives, less the id that names this one read (a read
    served twice is the same context under two ids)."""
    response = api.get(f"/api/v1/sessions/{session_id}/context/", params)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body.pop("context_id")
    return body


def queued_run(session_id) -> CompactionRun:
    return CompactionRun.objects.get(session_id=session_id, status__in=CompactionRun.ACTIVE)


# --- configuration ----------------------------------------------------------------------


def test_managed_memory_config_defaults(api):
    session_id = new_session(api, memory_config={})
    config = api.get(f"/api/v1/sessions/{session_id}/").json()["memory_config"]
    assert config["threshold_tokens"] == 150_000
    assert config["active_context"]["processor_order"] == ["tool_truncation", "summarization", "backward_packing"]
    assert config["active_context"]["min_reduction_ratio"] == 0.4
    assert config["active_context"]["summarization"]["output_max_tokens"] == 6000


def test_unknown_or_mistyped_settings_are_400_naming_the_path(api):
    bad = {"threshold": 5, "active_context": {"mode": "magic", "summarization": {"grace_recent_messages": "x"}}}
    response = api.post("/api/v1/sessions/", {**MANAGED, "memory_config": bad}, format="json")
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert "memory_config.threshold" in fields
    assert "memory_config.active_context.summarization.grace_recent_messages" in fields
    assert Session.objects.count() == 0


def test_patch_merges_settings_and_team_defaults_seed_new_sessions(api, tenant):
    session_id = new_session(api)
    patched = api.patch(
        f"/api/v1/sessions/{session_id}/",
        {"memory_config": {"active_context": {"tool_truncation": {"max_tool_message_tokens": 50}}}},
        format="json",
    ).json()
    assert patched["memory_config"]["threshold_tokens"] == 300  # kept
    assert patched["memory_config"]["active_context"]["tool_truncation"]["max_tool_message_tokens"] == 50
    tenant.team.memory_config_defaults = {"threshold_tokens": 9999}
    tenant.team.save()
    fresh = api.post("/api/v1/sessions/", {"memory_type": "managed_conversation"}, format="json").json()
    assert fresh["memory_config"]["threshold_tokens"] == 9999
    assert fresh["compaction_threshold"] == 9999


# --- queueing -----------------------------------------------------------------------------


def test_crossing_the_threshold_queues_exactly_one_run(api, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(1, words=10))
    assert CompactionRun.objects.count() == 0
    append(api, session_id, *turns(4))
    append(api, session_id, *turns(2))
    run = queued_run(session_id)
    assert run.trigger == "threshold" and run.status == "pending"
    assert CompactionRun.objects.count() == 1
    assert sent_tasks == [(str(run.pk), 0)]


def test_plain_conversation_sessions_never_compact(api, sent_tasks):
    session_id = new_session(api, memory_type="conversation_history")
    append(api, session_id, *turns(10))
    assert CompactionRun.objects.count() == 0


def test_compact_on_demand_returns_202_and_the_active_run(api, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(2))
    first = api.post(f"/api/v1/sessions/{session_id}/compact/")
    second = api.post(f"/api/v1/sessions/{session_id}/compact/")
    assert (first.status_code, second.status_code) == (202, 202)
    assert first.json()["id"] == second.json()["id"]
    assert first.json()["trigger"] == "manual"


# --- the job -------------------------------------------------------------------------------


def test_a_compaction_summarises_within_the_target_and_keeps_raw_history(api, llm_server, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    raw_before = list(Message.objects.filter(session_id=session_id).order_by("seq").values("seq", "content"))
    run = queued_run(session_id)
    llm_server.script(summary_reply())

    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"

    run.refresh_from_db()
    assert run.status == "done" and run.backend == "openai" and run.model == "scripted-model"
    assert run.stages_run == ["summarization", "backward_packing"]  # packing always runs last
    assert (run.prompt_tokens, run.completion_tokens) == (500, 60)
    assert run.post_tokens <= 300 * 0.6 < run.pre_tokens
    assert list(Message.objects.filter(session_id=session_id).order_by("seq").values("seq", "content")) == raw_before
    served = context(api, session_id)
    roles = [m["role"] for m in served["messages"]]
    assert roles[0] == "system"
    assert served["messages"][1]["content"].startswith("question 0")  # original instruction
    assert "[User Requests Summary]" in served["messages"][2]["content"]
    assert "flight SK4021" in served["messages"][3]["content"]
    assert served["messages"][-1]["content"].startswith("answer 5")  # protected tail
    assert served["token_count"] <= 300
    sent_prompt = llm_server.requests[-1]["messages"][-1]["content"]
    assert "question 0" in sent_prompt and "answer 5" not in sent_prompt
    assert llm_server.requests[-1]["response_format"] == {"type": "json_object"}


def test_a_second_execution_of_the_same_run_is_a_no_op(api, llm_server, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    run = queued_run(session_id)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    assert compaction.compaction_execute(run_id=str(run.pk)) == "already-claimed"
    assert CompactionRun.objects.filter(status="done").count() == 1
    assert len(llm_server.requests) == 1


def test_messages_written_during_the_llm_call_are_kept_after_the_summary(api, llm_server, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    run = queued_run(session_id)
    release = threading.Event()
    llm_server.script(Reply(json.dumps(SUMMARY), hold=release))
    outcome: list[str] = []
    worker = execute_in_thread(str(run.pk), outcome)
    wait_for_llm_call(llm_server)
    for i in range(20):
        append(api, session_id, {"role": "user", "content": f"late {i}"})
    release.set()
    worker.join(timeout=30)
    assert outcome == ["done"]
    served = [m["content"] for m in context(api, session_id)["messages"]]
    assert [c for c in served if c.startswith("late")] == [f"late {i}" for i in range(20)]
    assert Message.objects.filter(session_id=session_id).count() == 32


@pytest.mark.parametrize(
    "failure",
    [Fail(429, {"Retry-After": "3"}), Fail(500), Garbage(), Reply("{}", delay=1.5)],
    ids=["429", "500", "garbage", "timeout"],
)
def test_transient_llm_failures_retry_then_fail_with_the_reason(api, llm_server, sent_tasks, settings, failure):
    settings.COMPACTION_MAX_ATTEMPTS = 2
    settings.LLM_TIMEOUT = 0.5
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    run = queued_run(session_id)
    llm_server.script(failure, failure)

    outcome = compaction.compaction_execute(run_id=str(run.pk))
    assert outcome.startswith("retry-in-")
    run.refresh_from_db()
    assert run.status == "pending" and run.error
    if isinstance(failure, Fail) and failure.status == 429:
        assert sent_tasks[-1] == (str(run.pk), 3.0)  # Retry-After honoured

    assert compaction.compaction_execute(run_id=str(run.pk)) == "failed"
    run.refresh_from_db()
    assert run.status == "failed" and "gave up after 2 attempts" in run.error
    assert Message.objects.filter(session_id=session_id).count() == 12
    # the session stays usable: writes and reads work, the context is the raw window
    append(api, session_id, {"role": "user", "content": "still here?"})
    assert context(api, session_id)["messages"][-1]["content"] == "still here?"
    kinds = list(MemoryEvent.objects.filter(session_id=session_id).values_list("kind", flat=True))
    assert "compaction_failed" in kinds


def test_a_permanent_llm_error_fails_at_once(api, llm_server, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    run = queued_run(session_id)
    llm_server.script(Fail(400))
    assert compaction.compaction_execute(run_id=str(run.pk)) == "failed"
    run.refresh_from_db()
    assert run.attempts == 1 and "refused (400)" in run.error


def test_a_covered_message_edited_mid_run_requeues_instead_of_writing(api, llm_server, sent_tasks):
    session_id = new_session(api)
    rows = append(api, session_id, *turns(6))
    run = queued_run(session_id)
    release = threading.Event()
    llm_server.script(Reply(json.dumps(SUMMARY), hold=release))
    outcome: list[str] = []
    worker = execute_in_thread(str(run.pk), outcome)
    wait_for_llm_call(llm_server)
    api.patch(f"/api/v1/sessions/{session_id}/messages/{rows[0]['message_id']}/", {"content": "edited"}, format="json")
    release.set()
    worker.join(timeout=30)
    assert outcome == ["covered-messages-changed"]
    run.refresh_from_db()
    assert run.status == "pending" and run.summary is None
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    assert "edited" in llm_server.requests[-1]["messages"][-1]["content"]


def test_the_offline_backend_compacts_without_any_llm(api, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    run = queued_run(session_id)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    run.refresh_from_db()
    assert run.backend == "extractive"
    assert "[Compacted Context Summary]" in run.summary[-1]["content"]


# --- revert, events, sweeper ------------------------------------------------------------


def test_revert_restores_the_context_and_keeps_the_ledger(api, llm_server, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    before = context(api, session_id, max_tokens=100000)
    run = queued_run(session_id)
    compaction.compaction_execute(run_id=str(run.pk))
    assert context(api, session_id) != before

    response = api.post(f"/api/v1/sessions/{session_id}/compactions/{run.pk}/revert/")
    assert response.status_code == 200 and response.json()["status"] == "reverted"
    # Over the threshold again, the restored context is packed into the target as before.
    restored = context(api, session_id)
    assert not any("[Compacted Context Summary]" in str(m["content"]) for m in restored["messages"])
    ledger = api.get(f"/api/v1/sessions/{session_id}/compactions/").json()
    assert [r["status"] for r in ledger] == ["reverted"]
    again = api.post(f"/api/v1/sessions/{session_id}/compactions/{run.pk}/revert/")
    assert again.status_code == 409


def test_events_carry_the_compaction_event_fields(api, llm_server, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    compaction.compaction_execute(run_id=str(queued_run(session_id).pk))
    events = api.get("/api/v1/events/", {"session": session_id}).json()["results"]
    assert [e["kind"] for e in events] == ["compaction_started", "compaction_completed"]
    completed = events[1]["data"]
    for field in (
        "session_id",
        "agent_name",
        "status",
        "pre_tokens",
        "post_tokens",
        "pre_messages",
        "post_messages",
        "duration",
        "stages_run",
    ):
        assert field in completed
    assert completed["status"] == "completed" and completed["stages_run"] == ["summarization", "backward_packing"]
    later = api.get("/api/v1/events/", {"session": session_id, "after": events[0]["id"]}).json()["results"]
    assert [e["kind"] for e in later] == ["compaction_completed"]


def test_the_sweeper_resends_lost_pending_runs_and_requeues_dead_workers(api, sent_tasks, settings):
    from datetime import timedelta

    from django.utils import timezone

    session_id = new_session(api)
    append(api, session_id, *turns(6))
    run = queued_run(session_id)
    CompactionRun.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(hours=1))
    sent_tasks.clear()
    assert compaction.compaction_sweep()["resent"] == 1
    assert sent_tasks == [(str(run.pk), 0)]

    CompactionRun.objects.filter(pk=run.pk).update(
        status="running", attempts=1, started_at=timezone.now() - timedelta(hours=1)
    )
    assert compaction.compaction_sweep()["requeued"] == 1
    run.refresh_from_db()
    assert run.status == "pending"

    settings.COMPACTION_MAX_ATTEMPTS = 1
    CompactionRun.objects.filter(pk=run.pk).update(status="running", started_at=timezone.now() - timedelta(hours=1))
    assert compaction.compaction_sweep()["failed"] == 1
    run.refresh_from_db()
    assert run.status == "failed" and "worker lost" in run.error
    failed = MemoryEvent.objects.filter(session_id=session_id, kind="compaction_failed").get()
    assert failed.data["run_id"] == str(run.pk) and "worker lost" in failed.data["error"]


def test_the_started_event_counts_the_messages_it_will_compact(api, llm_server, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    compaction.compaction_execute(run_id=str(queued_run(session_id).pk))
    started = MemoryEvent.objects.get(session_id=session_id, kind="compaction_started").data
    assert started["pre_messages"] == 13  # the system prompt and 12 messages


def test_a_summary_longer_than_what_it_replaces_fails_and_changes_nothing(api, llm_server, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(6, words=5))
    before = context(api, session_id)
    assert api.post(f"/api/v1/sessions/{session_id}/compact/").status_code == 202
    llm_server.script(summary_reply(dict(SUMMARY, summary="padding " * 2000)))
    run = queued_run(session_id)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "failed"
    run.refresh_from_db()
    assert run.status == "failed" and "did not reduce" in run.error
    assert context(api, session_id) == before


def test_reset_reverts_summaries_and_says_so_in_its_event(api, llm_server, sent_tasks):
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    compaction.compaction_execute(run_id=str(queued_run(session_id).pk))
    assert api.post(f"/api/v1/sessions/{session_id}/reset/").status_code == 200
    reset = MemoryEvent.objects.get(session_id=session_id, kind="reset").data
    assert reset["deleted_messages"] == 12 and reset["reverted_compactions"] == 1
    assert reset["session_id"] == session_id
    assert [m["role"] for m in context(api, session_id)["messages"]] == ["system"]


# --- payload-too-large recovery -----------------------------------------------------------


def png(seed: int, size: int = 3000) -> str:
    data = b"\x89PNG\r\n\x1a\n" + bytes([seed % 256]) * size
    return "data:image/png;base64," + base64.b64encode(data).decode()


def test_payload_recovery_shrinks_bytes_and_keeps_at_most_five_images(api, llm_server, sent_tasks):
    session_id = new_session(api, memory_config={"threshold_tokens": 10_000_000})
    for i in range(8):
        append(
            api,
            session_id,
            {"role": "user", "content": f"look at picture {i}", "images": [png(i)]},
            {"role": "assistant", "content": f"picture {i} shows a chart"},
        )
    keep = [{"image_id": f"img_{i:04d}", "context": f"chart {i}"} for i in range(8)]
    llm_server.script(summary_reply({**SUMMARY, "keep_images": keep}))

    response = api.post(
        f"/api/v1/sessions/{session_id}/compact/", {}, format="json", QUERY_STRING="reason=payload_error"
    )
    assert response.status_code == 202 and response.json()["trigger"] == "payload_error"
    assert compaction.compaction_execute(run_id=response.json()["id"]) == "done"

    run = CompactionRun.objects.get(pk=response.json()["id"])
    assert run.post_bytes < run.pre_bytes
    # The original instruction is kept in front of the summary, its picture (the oldest, img_0000)
    # by its id; the five most recent pictures are retained.
    instruction, *rest = run.summary
    assert instruction["kind"] == "instruction"
    assert instruction["content"] == [
        {"type": "text", "text": "look at picture 0"},
        {"type": "text", "text": "[Image ID: img_0000]"},
    ]
    retained = [m for m in rest if isinstance(m["content"], list)]
    assert [m["content"][0]["text"].split("]")[0] for m in retained] == [
        f"[Retained image img_{i:04d}" for i in (7, 6, 5, 4, 3)
    ]


def test_payload_recovery_that_cannot_shrink_fails_and_changes_nothing(api, llm_server, sent_tasks):
    session_id = new_session(api, memory_config={"threshold_tokens": 10_000_000})
    append(
        api,
        session_id,
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
        {"role": "user", "content": "ok"},
        {"role": "assistant", "content": "fine"},
    )
    huge = {**SUMMARY, "summary": "x " * 5000}
    llm_server.script(summary_reply(huge))
    run_id = api.post(f"/api/v1/sessions/{session_id}/compact/?reason=payload_error").json()["id"]
    assert compaction.compaction_execute(run_id=run_id) == "failed"
    assert "payload not reduced" in CompactionRun.objects.get(pk=run_id).error
    assert [m["content"] for m in context(api, session_id)["messages"]][1:] == ["hi", "yo", "ok", "fine"]


def test_payload_bytes_are_the_size_of_the_json_an_llm_is_sent():
    import json

    from memory_app.compaction.services import payload_bytes
    from memory_client.vocabulary.messages import to_openai_message

    messages = [
        {"role": "system", "content": "Tu es prudent."},
        {"role": "user", "content": "Résumé: 北京 → ✓", "token_count": 9},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "/"}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "bin\netc"},
    ]
    for count in range(len(messages) + 1):
        sent = json.dumps([to_openai_message(m) for m in messages[:count]], ensure_ascii=False).encode()
        assert payload_bytes(messages[:count]) == len(sent)
