"""What a managed session's settings change for the agent and the team: which compactions are
queued and paid for, what /context/ serves, what the summarizer is sent, which settings are
refused. Each test sets a setting through the API and looks at the outcome."""

from __future__ import annotations

import pytest

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Message
from tests.llm_server import Reply
from tests.memory_app.compaction.test_compaction import append, context, png, queued_run, turns

pytestmark = pytest.mark.django_db(transaction=True)

SYSTEM = "You are a travel agent."
SUMMARY_MARK = "[Compacted Context Summary]"
MARKER = " [truncated]"  # tool_truncation.append_marker's default
REPLY_PRIMING = 3  # every request's reply priming, counted in token_count on top of its messages


def managed(api, memory_config: dict) -> str:
    response = api.post(
        "/api/v1/sessions/",
        {"memory_type": "managed_conversation", "system_prompt": SYSTEM, "memory_config": memory_config},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()["id"]


def refused(response, *paths: str) -> None:
    """One 400 that names every path."""
    assert response.status_code == 400, response.content
    fields = response.json()["fields"]
    missing = [path for path in paths if path not in fields]
    assert not missing, f"not named: {missing}; named: {sorted(fields)}"


def served_text(api, session_id: str) -> list:
    return [m["content"] for m in context(api, session_id)["messages"]]


def tool_call(call_id: str, name: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


LONG_TOOL_OUTPUT = "flight row " * 273  # 3000 characters, about 500 tokens
LONG_PAYLOAD = "Tool hotels returned: " + "hotel row " * 250


def tool_conversation() -> list[dict]:
    """A search tool's output, then a user message carrying another tool's output, then a
    closing round (the protected tail)."""
    return [
        {"role": "user", "content": "find flights to Oslo"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("call_1", "search")]},
        {"role": "tool", "tool_call_id": "call_1", "content": LONG_TOOL_OUTPUT},
        {"role": "assistant", "content": "checking hotels"},
        {"role": "user", "content": LONG_PAYLOAD},
        {"role": "assistant", "content": "here is the plan"},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "welcome"},
    ]


# --- summarization switched off ------------------------------------------------------------


@pytest.mark.parametrize(
    "policy",
    [
        {"summarization": {"enabled": False}},
        {"excluded_processors": ["summarization"]},
        {"processor_order": ["tool_truncation", "backward_packing"]},
    ],
    ids=["summarization-disabled", "summarization-excluded", "summarization-not-in-processor-order"],
)
def test_with_summarization_off_no_llm_is_called_and_the_raw_messages_are_served_packed(
    api, llm_server, run_jobs_inline, policy
):
    worker = run_jobs_inline(compaction.JOB)
    session_id = managed(api, {"threshold_tokens": 300, "active_context": policy})
    sent = turns(6)
    append(api, session_id, *sent)
    served = context(api, session_id)  # a read is a trigger too (trigger_events has get_messages)
    worker.run_pending()

    assert CompactionRun.objects.filter(session_id=session_id).count() == 0
    assert worker.sent == []
    assert llm_server.requests == []
    # The agent gets its own newest messages, packed into compaction_target_tokens (300 x 0.6).
    contents = [m["content"] for m in served["messages"]]
    assert contents[0] == SYSTEM
    raw = [m["content"] for m in sent]
    assert contents[1:] == raw[len(raw) - len(contents) + 1 :]
    assert 1 < len(contents) < len(raw) + 1
    assert served["token_count"] - REPLY_PRIMING <= 180
    assert not any(SUMMARY_MARK in str(c) for c in contents)
    # Asking for one says why nothing can be compacted, without a call either.
    response = api.post(f"/api/v1/sessions/{session_id}/compact/")
    assert response.status_code == 409 and "summarization" in response.json()["detail"]
    worker.run_pending()
    assert llm_server.requests == [] and CompactionRun.objects.filter(session_id=session_id).count() == 0


def test_summarization_below_min_reduction_ratio_is_a_skipped_run_without_llm_call(api, llm_server, run_jobs_inline):
    worker = run_jobs_inline(compaction.JOB)
    order = ["summarization", "tool_truncation", "backward_packing"]
    # Summarizing all but the last round saves about 210 of the 420 tokens: below 0.9 x 300.
    session_id = managed(
        api, {"threshold_tokens": 300, "active_context": {"processor_order": order, "min_reduction_ratio": 0.9}}
    )
    append(api, session_id, *turns(6))
    worker.run_pending()

    run = CompactionRun.objects.get(session_id=session_id)
    assert run.status == "skipped"
    assert llm_server.requests == []
    assert [stage["processor"] for stage in run.stages] == order
    summarization = run.stages[0]
    assert summarization["ran"] is False and summarization["reason"] == "below min_reduction_ratio"
    assert "summarization" not in run.stages_run
    ledger = api.get(f"/api/v1/sessions/{session_id}/compactions/").json()
    assert [(r["status"], r["error"]) for r in ledger] == [("skipped", "below min_reduction_ratio")]
    assert not any(SUMMARY_MARK in str(c) for c in served_text(api, session_id))


def test_a_run_queued_before_summarization_was_switched_off_is_skipped_without_llm_call(
    api, llm_server, run_jobs_inline
):
    worker = run_jobs_inline(compaction.JOB)
    session_id = managed(api, {"threshold_tokens": 300})
    append(api, session_id, *turns(6))
    assert worker.sent == [str(queued_run(session_id).pk)]
    patched = api.patch(
        f"/api/v1/sessions/{session_id}/",
        {"memory_config": {"active_context": {"summarization": {"enabled": False}}}},
        format="json",
    )
    assert patched.status_code == 200, patched.content
    worker.run_pending()

    run = CompactionRun.objects.get(session_id=session_id)
    assert run.status == "skipped" and run.error == "disabled"
    assert llm_server.requests == []
    assert {"processor": "summarization", "ran": False, "reason": "disabled"} in run.stages
    assert not any(SUMMARY_MARK in str(c) for c in served_text(api, session_id))


# --- trigger_events ------------------------------------------------------------------------


def test_empty_trigger_events_never_queue_a_compaction(api, llm_server, sent_tasks):
    session_id = managed(api, {"threshold_tokens": 300, "trigger_events": []})
    append(api, session_id, *turns(6))
    context(api, session_id)
    append(api, session_id, *turns(2))
    assert CompactionRun.objects.filter(session_id=session_id).count() == 0
    assert sent_tasks == []


def test_get_messages_trigger_queues_on_a_read_over_the_threshold_not_on_append(api, sent_tasks):
    session_id = managed(api, {"threshold_tokens": 300, "trigger_events": ["get_messages"]})
    append(api, session_id, *turns(1))
    context(api, session_id)  # under the threshold: nothing to do
    assert sent_tasks == []
    append(api, session_id, *turns(5))
    assert CompactionRun.objects.filter(session_id=session_id).count() == 0
    assert sent_tasks == []

    context(api, session_id)
    context(api, session_id)
    run = queued_run(session_id)
    assert run.trigger == "threshold"
    assert sent_tasks == [(str(run.pk), 0)]


# --- settings refused rather than ignored ------------------------------------------------------


def test_a_session_image_token_estimate_other_than_the_servers_is_refused(api, settings):
    other = settings.IMAGE_TOKEN_ESTIMATE + 100
    response = api.post(
        "/api/v1/sessions/",
        {"memory_type": "managed_conversation", "memory_config": {"image_token_estimate": other}},
        format="json",
    )
    refused(response, "memory_config.image_token_estimate")
    assert str(settings.IMAGE_TOKEN_ESTIMATE) in response.json()["fields"]["memory_config.image_token_estimate"][0]
    session_id = managed(api, {"image_token_estimate": settings.IMAGE_TOKEN_ESTIMATE})
    patched = api.patch(
        f"/api/v1/sessions/{session_id}/", {"memory_config": {"image_token_estimate": other}}, format="json"
    )
    refused(patched, "memory_config.image_token_estimate")
    stored = api.get(f"/api/v1/sessions/{session_id}/").json()["memory_config"]
    assert stored["image_token_estimate"] == settings.IMAGE_TOKEN_ESTIMATE


def test_a_prompt_mode_other_than_generic_is_refused(api):
    response = api.post(
        "/api/v1/sessions/",
        {
            "memory_type": "managed_conversation",
            "memory_config": {"active_context": {"summarization": {"prompt_mode": "coding"}}},
        },
        format="json",
    )
    refused(response, "memory_config.active_context.summarization.prompt_mode")
    managed(api, {"active_context": {"summarization": {"prompt_mode": "generic"}}})


def test_cache_invalidation_events_that_leave_an_event_out_are_refused(api):
    # The server keeps no context cache (every read is derived anew): a list that leaves an event
    # out would ask for a stale context it never serves.
    response = api.post(
        "/api/v1/sessions/",
        {"memory_type": "managed_conversation", "memory_config": {"cache_invalidation_events": ["add"]}},
        format="json",
    )
    refused(response, "memory_config.cache_invalidation_events")
    managed(api, {"cache_invalidation_events": ["delete_memory", "add", "remove_by_id"]})


def test_one_400_names_every_bad_setting_on_create_and_on_patch(api, settings):
    # A mistyped setting next to out-of-range ones: each is named, not only the first kind found.
    bad = {
        "threshold_tokens": "lots",
        "image_token_estimate": settings.IMAGE_TOKEN_ESTIMATE + 1,
        "trigger_events": ["sometimes"],
        "active_context": {
            "min_reduction_ratio": 2,
            "summarization": {"prompt_mode": "coding"},
            "tool_truncation": {"max_tool_message_tokens": 0},
        },
    }
    paths = [
        "memory_config.threshold_tokens",
        "memory_config.image_token_estimate",
        "memory_config.trigger_events",
        "memory_config.active_context.min_reduction_ratio",
        "memory_config.active_context.summarization.prompt_mode",
        "memory_config.active_context.tool_truncation.max_tool_message_tokens",
    ]
    created = api.post(
        "/api/v1/sessions/", {"memory_type": "managed_conversation", "memory_config": bad}, format="json"
    )
    refused(created, *paths)

    session_id = managed(api, {"threshold_tokens": 300})
    before = api.get(f"/api/v1/sessions/{session_id}/").json()["memory_config"]
    patched = api.patch(f"/api/v1/sessions/{session_id}/", {"memory_config": bad}, format="json")
    refused(patched, *paths)
    assert api.get(f"/api/v1/sessions/{session_id}/").json()["memory_config"] == before


# --- tool truncation ---------------------------------------------------------------------------


def test_include_tool_payload_user_messages_decides_whether_a_tool_payload_user_message_is_cut(api):
    payload = "Tool search returned: " + "flight row " * 100
    # Not a tool payload: the reference library looks for "Tool " with a capital T.
    remark = "tool search returned: " + "hotel row " * 100
    served = {}
    for include in (True, False):
        truncation = {"max_tool_message_tokens": 20, "include_tool_payload_user_messages": include}
        session_id = managed(
            api,
            {
                "threshold_tokens": 300,
                "active_context": {"processor_order": ["tool_truncation"], "tool_truncation": truncation},
            },
        )
        append(
            api,
            session_id,
            {"role": "user", "content": payload},
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": remark},
            {"role": "assistant", "content": "noted too"},
            *turns(1),
        )
        served[include] = served_text(api, session_id)

    assert served[False][1] == payload
    assert served[True][1].startswith("Tool search returned: flight row") and served[True][1].endswith(MARKER)
    assert len(served[True][1]) < len(payload) // 4
    assert served[True][3] == served[False][3] == remark


def test_tool_truncation_runs_only_when_its_saving_reaches_min_reduction_ratio(api, sent_tasks):
    output = "flight row " * 100  # about 215 tokens; cut to 20 it saves about 0.6 of the threshold
    served = {}
    for ratio in (0.3, 0.8):
        session_id = managed(
            api,
            {
                "threshold_tokens": 300,
                "active_context": {
                    "min_reduction_ratio": ratio,
                    "processor_order": ["tool_truncation", "summarization"],
                    "tool_truncation": {"max_tool_message_tokens": 20},
                },
            },
        )
        append(api, session_id, *turns(1))
        append(
            api,
            session_id,
            {"role": "user", "content": "find flights"},
            {"role": "assistant", "content": None, "tool_calls": [tool_call("call_1", "search")]},
            {"role": "tool", "tool_call_id": "call_1", "content": output},
            {"role": "assistant", "content": "found some"},
            {"role": "user", "content": "thanks"},
            {"role": "assistant", "content": "welcome"},
        )
        body = context(api, session_id)
        served[ratio] = next(m["content"] for m in body["messages"] if m["role"] == "tool")

    # Over the threshold (the context served whole is), below the ratio: not cut.
    assert served[0.8] == output and body["token_count"] > 300
    assert served[0.3].endswith(MARKER) and len(served[0.3]) < len(output) // 4


def test_tool_output_is_served_whole_under_the_threshold_and_cut_over_it(api, sent_tasks):
    served = {}
    for threshold in (100_000, 1000):
        session_id = managed(
            api,
            {
                "threshold_tokens": threshold,
                "active_context": {"min_reduction_ratio": 0.1, "tool_truncation": {"max_tool_message_tokens": 50}},
            },
        )
        append(api, session_id, *tool_conversation())
        served[threshold] = served_text(api, session_id)

    # Served: the system prompt, then the conversation as appended (nothing is packed away).
    under, over = served[100_000], served[1000]
    tool, payload = 3, 5
    assert under[tool] == LONG_TOOL_OUTPUT and under[payload] == LONG_PAYLOAD
    assert over[tool].startswith("flight row") and over[tool].endswith(MARKER)
    assert len(over[tool]) < len(LONG_TOOL_OUTPUT) // 4
    assert over[payload].startswith("Tool hotels returned:") and over[payload].endswith(MARKER)
    assert len(over[payload]) < len(LONG_PAYLOAD) // 4
    # The rest, and the protected last round, are served as written.
    written = [m["content"] for m in tool_conversation()]
    assert [c for i, c in enumerate(over) if i not in (tool, payload)] == [SYSTEM] + [
        c for i, c in enumerate(written, start=1) if i not in (tool, payload)
    ]


# --- what the summarizer is sent and what it answers ------------------------------------------


def test_include_image_payload_bytes_sends_the_images_to_the_summarizer(api, llm_server):
    picture = png(1)
    sent = {}
    for include in (True, False):
        session_id = managed(
            api,
            {
                "threshold_tokens": 10_000_000,
                "active_context": {"summarization": {"include_image_payload_bytes": include}},
            },
        )
        append(
            api,
            session_id,
            {"role": "user", "content": "plan a trip to Oslo"},
            {"role": "assistant", "content": "sure"},
            {"role": "user", "content": "this is the fare chart", "images": [picture]},
            {"role": "assistant", "content": "the chart shows March is cheapest"},
            {"role": "user", "content": "book it"},
            {"role": "assistant", "content": "booked"},
        )
        response = api.post(f"/api/v1/sessions/{session_id}/compact/")
        assert response.status_code == 202, response.content
        assert compaction.compaction_execute(run_id=response.json()["id"]) == "done"
        sent[include] = llm_server.requests[-1]["messages"][-1]["content"]

    assert isinstance(sent[True], list)
    images = [p["image_url"]["url"] for p in sent[True] if p.get("type") == "image_url"]
    assert images == [picture]
    assert any(p.get("text") == "[image img_0000]" for p in sent[True])
    assert isinstance(sent[False], str)
    assert "[image img_0000]" in sent[False] and "data:image" not in sent[False]


def test_a_summary_answered_in_prose_is_kept_after_one_call(api, llm_server, sent_tasks):
    session_id = managed(
        api, {"threshold_tokens": 300, "active_context": {"summarization": {"grace_recent_messages": 1}}}
    )
    append(api, session_id, *turns(6))
    run = queued_run(session_id)
    prose = "The user is planning a trip to Oslo in March; flights were compared and SK4021 chosen."
    llm_server.script(Reply(prose))

    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"

    assert len(llm_server.requests) == 1
    run.refresh_from_db()
    assert run.status == "done" and run.attempts == 1
    stage = next(s for s in run.stages if s["processor"] == "summarization")
    assert stage["ran"] is True and "prose" in stage["reason"]
    served = served_text(api, session_id)
    assert f"{SUMMARY_MARK}\n{prose}" in served
    assert served[-1].startswith("answer 5")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "the model's answer was empty"),
        ("{}", "no non-empty 'summary' string"),
        ('```json\n{"summary": ""}\n```', "no non-empty 'summary' string"),
        ('{"user_request_summary": "Plan a trip to Oslo", "summary": "The user pla', "invalid JSON"),
    ],
    ids=["empty", "object-without-summary", "fenced-empty-summary", "cut-off-object"],
)
def test_an_empty_summary_answer_fails_the_run_after_one_call(api, llm_server, sent_tasks, answer, reason):
    session_id = managed(
        api, {"threshold_tokens": 300, "active_context": {"summarization": {"grace_recent_messages": 1}}}
    )
    append(api, session_id, *turns(6))
    before = context(api, session_id)
    run = queued_run(session_id)
    llm_server.script(Reply(answer))

    assert compaction.compaction_execute(run_id=str(run.pk)) == "failed"

    assert len(llm_server.requests) == 1
    run.refresh_from_db()
    assert run.status == "failed" and run.attempts == 1
    assert "unusable summary" in run.error and reason in run.error
    assert sent_tasks == [(str(run.pk), 0)]  # queued once, never re-sent for a retry
    # The agent keeps its own messages: nothing stands in for them.
    assert context(api, session_id) == before
    assert Message.objects.filter(session_id=session_id).count() == 12
