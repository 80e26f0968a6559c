"""When a compaction runs and what it leaves: the context served after one stays within what
was served before it and is counted whole (the original instruction included, its image as a
retained image);
a compaction that cannot make progress is not queued again until the session changes; a
revert is not undone by the next append; a retried run announces itself once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import counting
from memory_app.events.models import MemoryEvent
from memory_app.tenancy.models import TeamMembership
from tests.llm_server import Fail
from tests.memory_app.compaction.test_compaction import (
    SUMMARY,
    append,
    context,
    new_session,
    png,
    queued_run,
    summary_reply,
    turns,
)

pytestmark = pytest.mark.django_db(transaction=True)


def image_urls(messages: list[dict]) -> list[str]:
    """Every image a served context sends, in order."""
    return [
        part["image_url"]["url"]
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


def text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if part.get("type") == "text")
    return str(content)


def runs(session_id: str) -> list[CompactionRun]:
    return list(CompactionRun.objects.filter(session_id=session_id).order_by("created_at"))


def active_runs(session_id: str) -> int:
    return CompactionRun.objects.filter(session_id=session_id, status__in=CompactionRun.ACTIVE).count()


def ended_ago(session_id: str, seconds: float) -> None:
    """Move the session's runs into the past, as if they had ended `seconds` ago."""
    past = timezone.now() - timedelta(seconds=seconds)
    CompactionRun.objects.filter(session_id=session_id).update(created_at=past, queued_at=past, finished_at=past)


# --- what a compaction leaves ---------------------------------------------------------------------


def test_after_a_compaction_the_context_is_counted_whole_and_serves_the_instruction_once(api, llm_server, sent_tasks):
    session_id = new_session(
        api,
        memory_config={
            "threshold_tokens": 5000,
            "active_context": {
                "summarization": {"grace_recent_messages": 2, "max_retained_images": 2},
                "backward_packing": {"grace_recent_messages": 2},
            },
        },
    )
    instruction_image = png(0)
    append(
        api,
        session_id,
        {"role": "user", "content": "Plan my route along this map.", "images": [instruction_image]},
        {"role": "assistant", "content": "I see the map. " + "route " * 150},
    )
    for i in range(1, 5):
        append(
            api,
            session_id,
            {"role": "user", "content": f"photo {i}: " + "detail " * 150, "images": [png(i)]},
            {"role": "assistant", "content": f"photo {i} shows " + "scenery " * 150},
        )
    grace_rounds = turns(2, words=150)
    append(api, session_id, *grace_rounds)
    before = context(api, session_id)
    run = queued_run(session_id)
    # The model asks to keep the instruction's map and one later photo.
    keep = [{"image_id": "img_0000", "context": "the route map"}, {"image_id": "img_0003", "context": "photo 3"}]
    llm_server.script(summary_reply({**SUMMARY, "keep_images": keep}))

    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"

    served = context(api, session_id)
    messages = served["messages"]
    # No more than before the compaction, and exactly what the messages served cost.
    assert served["token_count"] <= before["token_count"]
    assert served["token_count"] == sum(counting.message_tokens(m) for m in messages) + 3
    # The instruction is served in front of the summary, its map by its id (the map itself is a
    # retained image); nothing is packed away, so the session's active context is what is served
    # (the reply priming aside).
    assert text_of(messages[1]) == "Plan my route along this map. [Image ID: img_0000]"
    assert "[Compacted Context Summary]" in text_of(messages[3])
    active = api.get(f"/api/v1/sessions/{session_id}/").json()["active_tokens"]
    assert active == served["token_count"] - 3
    # The map is served once, and every image counts toward max_retained_images.
    urls = image_urls(messages)
    assert urls.count(instruction_image) == 1
    assert len(urls) <= 2
    # The two protected rounds (from the second newest answer on) are served as written.
    assert [text_of(m) for m in messages[-3:]] == [m["content"] for m in grace_rounds[1:]]


# --- compactions that cannot make progress ---------------------------------------------------------


@pytest.fixture
def member(client: Client, tenant) -> Client:
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    return client


def test_a_compaction_without_progress_is_not_repeated_until_the_session_changes(
    api, member, llm_server, sent_tasks, settings
):
    settings.COMPACTION_MIN_INTERVAL = 60
    settings.COMPACTION_MAX_BACKOFF = 3600
    # The agent spoke first and every answer is in the protected tail: nothing can be summarised.
    protected = {"threshold_tokens": 300, "active_context": {"summarization": {"grace_recent_messages": 10}}}
    session_id = new_session(api, memory_config=protected)
    append(api, session_id, {"role": "assistant", "content": "Hello! Where do you want to go?"}, *turns(4))
    assert compaction.compaction_execute(run_id=str(queued_run(session_id).pk)) != "done"
    ended_ago(session_id, 3600)
    for _ in range(3):
        compaction.compaction_sweep()
        context(api, session_id)
    assert active_runs(session_id) == 0 and len(runs(session_id)) == 1
    refused = api.post(f"/api/v1/sessions/{session_id}/compact/")
    assert refused.status_code == 409
    assert "protected tail" in refused.json()["detail"]
    page = member.get(reverse("dashboard:session", args=[session_id])).content.decode()
    # "Compact now" is a disabled button that says why, not a form that would be refused.
    assert f"/sessions/{session_id}/compact/" not in page and "Nothing to compact now" in page
    # Other settings are a change: the sweeper queues a run again.
    api.patch(
        f"/api/v1/sessions/{session_id}/",
        {"memory_config": {"active_context": {"summarization": {"grace_recent_messages": 1}}}},
        format="json",
    )
    compaction.compaction_sweep()
    assert active_runs(session_id) == 1 and len(runs(session_id)) == 2
    assert llm_server.requests == []

    # A summary that cannot shrink the context (threshold 1): one paid call, not one per sweep.
    grows = {"threshold_tokens": 1, "active_context": {"summarization": {"grace_recent_messages": 1}}}
    session_id = new_session(api, memory_config=grows)
    padded = summary_reply({**SUMMARY, "summary": "padding " * 2000})
    llm_server.script(*[padded] * 10)
    append(api, session_id, *turns(2))
    assert compaction.compaction_execute(run_id=str(queued_run(session_id).pk)) == "failed"
    ended_ago(session_id, 3600)
    for _ in range(3):
        compaction.compaction_sweep()
        context(api, session_id)
    assert [r.status for r in runs(session_id)] == ["failed"]
    assert len(llm_server.requests) == 1
    # A new message is a change: one more try, then each try waits twice as long.
    append(api, session_id, {"role": "user", "content": "one more thing"})
    assert compaction.compaction_execute(run_id=str(queued_run(session_id).pk)) == "failed"
    assert len(llm_server.requests) == 2
    ended_ago(session_id, 90)  # two runs without progress: the next waits 120 s
    append(api, session_id, {"role": "user", "content": "and another"})
    compaction.compaction_sweep()
    assert [r.status for r in runs(session_id)] == ["failed", "failed"]
    ended_ago(session_id, 130)
    compaction.compaction_sweep()
    assert compaction.compaction_execute(run_id=str(queued_run(session_id).pk)) == "failed"
    ended_ago(session_id, 200)  # three: the next waits 240 s
    append(api, session_id, {"role": "user", "content": "last one"})
    compaction.compaction_sweep()
    assert [r.status for r in runs(session_id)] == ["failed", "failed", "failed"]
    ended_ago(session_id, 250)
    compaction.compaction_sweep()
    assert [r.status for r in runs(session_id)] == ["failed", "failed", "failed", "pending"]
    assert len(llm_server.requests) == 3


# --- revert -------------------------------------------------------------------------------------


def test_a_reverted_compaction_is_not_redone_until_new_messages_are_worth_one(api, llm_server, sent_tasks, settings):
    settings.COMPACTION_MIN_INTERVAL = 0
    session_id = new_session(api)  # threshold 300, target 180: a compaction is worth 120 tokens
    append(api, session_id, *turns(6))
    run = queued_run(session_id)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    assert api.post(f"/api/v1/sessions/{session_id}/compactions/{run.pk}/revert/").status_code == 200

    # Still over the threshold: appends, reads and the sweeper queue nothing for a while.
    for i in range(4):
        append(api, session_id, {"role": "user", "content": f"note {i}: " + "word " * 10})
        context(api, session_id)
        compaction.compaction_sweep()
    assert [r.status for r in runs(session_id)] == ["reverted"]
    # Once new messages add threshold - target tokens, one is queued again.
    append(api, session_id, {"role": "assistant", "content": "a long answer " + "text " * 80})
    assert [r.status for r in runs(session_id)] == ["reverted", "pending"]
    assert compaction.compaction_execute(run_id=str(queued_run(session_id).pk)) == "done"

    # Compact now works at once after a revert, and lifts the hold.
    latest = runs(session_id)[-1]
    assert api.post(f"/api/v1/sessions/{session_id}/compactions/{latest.pk}/revert/").status_code == 200
    append(api, session_id, {"role": "user", "content": "a short note"})
    assert [r.status for r in runs(session_id)] == ["reverted", "reverted"]
    llm_server.script(Fail(400))
    manual = api.post(f"/api/v1/sessions/{session_id}/compact/")
    assert manual.status_code == 202 and manual.json()["trigger"] == "manual"
    assert compaction.compaction_execute(run_id=manual.json()["id"]) == "failed"
    append(api, session_id, {"role": "user", "content": "another short note"})
    assert [r.status for r in runs(session_id)] == ["reverted", "reverted", "failed", "pending"]


# --- events --------------------------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["done", "failed"])
def test_a_retried_compaction_is_started_once_and_ends_once(api, llm_server, sent_tasks, settings, outcome):
    settings.COMPACTION_MAX_ATTEMPTS = 4
    session_id = new_session(api)
    append(api, session_id, *turns(6))
    run = queued_run(session_id)
    last = summary_reply() if outcome == "done" else Fail(503)
    llm_server.script(Fail(503), Fail(429), Fail(500), last)

    results = [compaction.compaction_execute(run_id=str(run.pk)) for _ in range(4)]

    assert [r.split("-in-")[0] for r in results] == ["retry", "retry", "retry", outcome]
    assert len(llm_server.requests) == 4
    kinds = list(MemoryEvent.objects.filter(session_id=session_id).order_by("pk").values_list("kind", flat=True))
    ended = "compaction_completed" if outcome == "done" else "compaction_failed"
    assert kinds == ["compaction_started", ended]
    events = api.get("/api/v1/events/", {"session": session_id}).json()["results"]
    assert [e["data"]["run_id"] for e in events] == [str(run.pk), str(run.pk)]
