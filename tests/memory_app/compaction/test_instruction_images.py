"""The original instruction a summary keeps fits the budget and the image cap like every other
message: its images become ids the model may ask to keep, the cap keeps the newest first (the
instruction's are the oldest), and the instruction is served with a placeholder in place of each
image, as the summarization processor's compaction payload writes it ("[Image ID: img_0000]")."""

from __future__ import annotations

from typing import Any

import pytest

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from tests.memory_app.compaction.test_compaction import (
    SUMMARY,
    append,
    context,
    new_session,
    png,
    queued_run,
    summary_reply,
)
from tests.memory_app.compaction.test_compaction_policy import image_urls, text_of

pytestmark = pytest.mark.django_db(transaction=True)

INSTRUCTION = "Compare the hotels in these photos and book the best one."


def instruction(images: int) -> dict[str, Any]:
    return {"role": "user", "content": INSTRUCTION, "images": [png(seed) for seed in range(images)]}


def tool_turn(index: int) -> list[dict[str, Any]]:
    call_id = f"call_{index}"
    call = {"id": call_id, "type": "function", "function": {"name": "search", "arguments": '{"page": 1}'}}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": f"result {index}: " + "room " * 20, "tool_call_id": call_id, "name": "search"},
        {"role": "assistant", "content": f"hotel {index} looks fine"},
    ]


def tool_turns(start: int, count: int) -> list[dict[str, Any]]:
    return [message for index in range(start, start + count) for message in tool_turn(index)]


def keep_all(images: int) -> dict[str, Any]:
    return {**SUMMARY, "keep_images": [{"image_id": f"img_{i:04d}", "context": f"photo {i}"} for i in range(images)]}


def retained_ids(messages: list[dict[str, Any]]) -> list[str]:
    return [
        text_of(m).split("]")[0].removeprefix("[Retained image ") for m in messages if "[Retained image" in text_of(m)
    ]


def active_tokens(api, session_id: str) -> int:
    return api.get(f"/api/v1/sessions/{session_id}/").json()["active_tokens"]


def test_the_instructions_images_leave_a_summarised_context_within_its_threshold(api, llm_server, sent_tasks):
    session_id = new_session(api, memory_config={"threshold_tokens": 600})
    append(api, session_id, instruction(2), *tool_turns(0, 6))
    llm_server.script(summary_reply())
    assert compaction.compaction_execute(run_id=str(queued_run(session_id).pk)) == "done"

    served = context(api, session_id)
    # Two images are 1,600 tokens: served verbatim, they would keep the context over 600 for good.
    assert image_urls(served["messages"]) == []
    assert text_of(served["messages"][1]) == f"{INSTRUCTION} [Image ID: img_0000] [Image ID: img_0001]"
    assert active_tokens(api, session_id) <= 600 and served["token_count"] <= 600

    # The context grows past the threshold again: the next run has something to summarise.
    append(api, session_id, *tool_turns(6, 10))
    llm_server.script(summary_reply())
    assert compaction.compaction_execute(run_id=str(queued_run(session_id).pk)) == "done"
    assert active_tokens(api, session_id) <= 600
    assert context(api, session_id)["token_count"] <= 600


def test_max_retained_images_counts_the_instructions_images_newest_first(api, llm_server, sent_tasks):
    config = {"threshold_tokens": 600, "active_context": {"summarization": {"max_retained_images": 2}}}
    session_id = new_session(api, memory_config=config)
    append(api, session_id, instruction(6), *tool_turns(0, 6))
    llm_server.script(summary_reply(keep_all(6)))
    assert compaction.compaction_execute(run_id=str(queued_run(session_id).pk)) == "done"

    messages = context(api, session_id)["messages"]
    assert image_urls(messages) == [png(5), png(4)]
    assert retained_ids(messages) == ["img_0005", "img_0004"]
    assert "[Image ID: img_0005]" in text_of(messages[1]) and image_urls(messages[1:2]) == []


def test_payload_recovery_keeps_at_most_five_of_the_instructions_images(api, llm_server, sent_tasks):
    session_id = new_session(api, memory_config={"threshold_tokens": 10_000_000})
    append(api, session_id, instruction(6), *tool_turns(0, 2))
    llm_server.script(summary_reply(keep_all(6)))
    answer = api.post(f"/api/v1/sessions/{session_id}/compact/?reason=payload_error").json()
    assert compaction.compaction_execute(run_id=answer["id"]) == "done"

    messages = context(api, session_id)["messages"]
    assert retained_ids(messages) == [f"img_{i:04d}" for i in (5, 4, 3, 2, 1)]
    assert len(image_urls(messages)) == 5
    run = CompactionRun.objects.get(pk=answer["id"])
    assert run.post_bytes < run.pre_bytes


def test_an_instruction_too_long_to_leave_the_summary_room_is_left_to_the_summary(api, llm_server, sent_tasks):
    session_id = new_session(api, memory_config={"threshold_tokens": 600})
    long_instruction = {"role": "user", "content": "Book a hotel. " + "requirement " * 300}
    append(api, session_id, long_instruction, *tool_turns(0, 6))
    llm_server.script(summary_reply())
    assert compaction.compaction_execute(run_id=str(queued_run(session_id).pk)) == "done"

    messages = context(api, session_id)["messages"]
    # Its 300 tokens would not leave the summary its room within the target (360 tokens).
    assert text_of(messages[1]).startswith("[User Requests Summary]\nPlan a trip to Oslo")
    assert all(not text_of(m).startswith("Book a hotel.") for m in messages)
    assert active_tokens(api, session_id) <= 600
