"""Property tests: every context returned keeps OpenAI's structural invariants.

Conversations are generated with parallel tool calls (results in any order, some still
missing at the end); contexts are built under random budgets, windows and compactions.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_app.compaction import pipeline
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.context import context_build
from memory_app.conversations.models import Session
from memsite.errors import InvalidInput
from tests.conftest import make_tenant


@st.composite
def conversations(draw) -> list[dict]:
    messages: list[dict] = []
    call_number = 0
    for turn in range(draw(st.integers(1, 6))):
        messages.append({"role": "user", "content": f"u{turn} " + "w " * draw(st.integers(0, 40))})
        for _ in range(draw(st.integers(0, 2))):
            width = draw(st.integers(1, 3))
            ids = [f"call_{call_number + k}" for k in range(width)]
            call_number += width
            calls = [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            answered = draw(st.permutations(ids))
            last_turn = turn > 0 and draw(st.booleans())
            if last_turn:  # results still arriving
                answered = answered[: draw(st.integers(0, len(answered)))]
            for call_id in answered:
                messages.append({"role": "tool", "tool_call_id": call_id, "content": "r " * draw(st.integers(1, 60))})
        messages.append({"role": "assistant", "content": f"a{turn} " + "w " * draw(st.integers(0, 40))})
    return messages


def check_invariants(messages: list[dict], *, system_first: bool, require_user: bool = True) -> None:
    if system_first:
        assert messages[0]["role"] == "system"
    if require_user:
        assert any(m["role"] == "user" for m in messages)
    open_calls: set[str] = set()
    for index, message in enumerate(messages):
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, f"orphan tool result at {index}"
        for call in message.get("tool_calls") or []:
            open_calls.add(call["id"])
            answers = [m for m in messages[index + 1 :] if m.get("tool_call_id") == call["id"]]
            assert answers, f"tool call {call['id']} without its result"


def items_of(conversation: list[dict]) -> list[pipeline.Item]:
    return [
        pipeline.Item(
            role=m["role"],
            tokens=len(json.dumps(m)) // 4 + 3,
            seq=index + 1,
            call_ids=tuple(c["id"] for c in m.get("tool_calls") or []),
            tool_call_id=m.get("tool_call_id"),
        )
        for index, m in enumerate(conversation)
    ]


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(0, 2000))
def test_packing_never_splits_a_turn(conversation, budget):
    items = items_of(conversation)
    kept = pipeline.pack(items, budget, grace_rounds=None, newest_always=False)
    assert sum(items[i].tokens for i in kept) <= budget
    check_invariants([conversation[i] for i in kept], system_first=False, require_user=False)
    # what is kept is the newest stretch of the conversation, in order
    assert kept == sorted(kept)


@settings(max_examples=300, deadline=None)
@given(conversations(), st.integers(0, 40))
def test_the_compaction_split_lands_on_a_turn_boundary(conversation, grace):
    from memory_client.vocabulary.config import ManagedMemoryConfig

    config = ManagedMemoryConfig()
    config.active_context.summarization.grace_recent_messages = grace
    split = pipeline.summarization_prefix_end(items_of(conversation), config)
    prefix_calls = {c["id"] for m in conversation[:split] for c in m.get("tool_calls") or []}
    assert not any(m.get("tool_call_id") in prefix_calls for m in conversation[split:])


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conversations(), st.one_of(st.none(), st.integers(30, 3000)), st.booleans(), st.sampled_from([None, 3, 50]))
def test_every_served_context_keeps_the_invariants(job_outbox, conversation, max_tokens, compact, last):
    tenant = make_tenant("props")
    session = services.session_create(
        team=tenant.team,
        system_prompt="system",
        memory_type="managed_conversation",
        memory_config={"threshold_tokens": 400},
    )
    services.message_append(session=session, messages=conversation)
    if compact:
        run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
        compaction.compaction_execute(run_id=str(run.pk))  # offline backend
    fresh = Session.objects.get(pk=session.pk)
    try:
        built = context_build(session=fresh, last=last, max_tokens=max_tokens)
    except InvalidInput as error:
        # Only a budget below the fixed part (system prompt, summary, latest user message) is
        # refused, and the refusal names the field and the size that would do.
        assert max_tokens is not None and list(error.fields) == ["max_tokens"]
        needed = int(error.fields["max_tokens"][0].split(" tokens")[0].rsplit(" ", 1)[1])
        assert needed > max_tokens
        built = context_build(session=fresh, last=last, max_tokens=needed)
        max_tokens = needed
    # `last` is exactly the newest messages (whole turns): no user message is borrowed for it.
    check_invariants(built.messages, system_first=True, require_user=last is None)
    if max_tokens is not None:
        assert built.token_count <= max_tokens
    Session.objects.filter(pk=session.pk).delete()
    tenant.team.delete()
