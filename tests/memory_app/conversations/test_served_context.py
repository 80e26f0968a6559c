"""The served context: one token truth across the API and the page, `last`, long histories,
and its invariants over random conversations and random valid configs."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import context, services, tokens
from memory_app.conversations.models import Message, Session
from memory_app.tenancy.models import TeamMembership
from memory_app.usage.models import ContextServe
from tests.conftest import make_tenant
from tests.memory_app.compaction.test_compaction import SUMMARY, append, new_session, summary_reply, turns
from tests.memory_app.conversations.test_context_invariants import check_invariants, conversations

pytestmark = pytest.mark.django_db(transaction=True)


def call(call_id: str, name: str = "search") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def served(api, session_id, **params) -> dict:
    response = api.get(f"/api/v1/sessions/{session_id}/context/", params)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def member(client: Client, tenant) -> Client:
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    return client


def session_json(api, session_id) -> dict:
    return api.get(f"/api/v1/sessions/{session_id}/").json()


# --- one token truth ---------------------------------------------------------------------------


def figures_agree(api, member, session_id, *, page: bool = True) -> None:
    """The API's active_tokens, the /context/ count, the page's gauge, panel and raw history,
    and the usage ledger all come from the one served context."""
    answer = served(api, session_id)
    active = session_json(api, session_id)["active_tokens"]
    session = Session.objects.get(pk=session_id)
    # Nothing is packed under the threshold: the served window is the active context, plus the
    # reply priming every request pays.
    assert answer["token_count"] == active + tokens.REPLY_PRIMING_TOKENS
    assert active == compaction.active_tokens(session, compaction.latest_done_run(session.pk))
    if not page:
        return
    html = member.get(f"/sessions/{session_id}/").content.decode()
    # Each figure carries a title saying what it counts (its element may be an <abbr>).
    assert re.search(rf'class="gauge-tokens"[^>]*>{active:,}<', html)
    assert re.search(rf'class="served-tokens"[^>]*>{answer["token_count"]}<', html)
    history = sum(Message.objects.filter(session_id=session_id).values_list("token_count", flat=True))
    assert f"<dt>Raw history</dt><dd>{history + session.system_prompt_tokens} tokens" in html
    latest = ContextServe.objects.filter(session_id=session_id).order_by("-created_at").first()
    if latest is not None:
        assert latest.served_tokens == answer["token_count"]


def test_every_token_figure_of_a_session_comes_from_the_served_context(api, member, llm_server, job_outbox):
    session_id = new_session(api, memory_config={"threshold_tokens": 1500})
    append(api, session_id, {"role": "user", "content": "Plan my Oslo trip. " + "detail " * 60})
    append(api, session_id, *turns(8))
    figures_agree(api, member, session_id, page=False)

    llm_server.script(summary_reply(SUMMARY))
    run, _ = compaction.compaction_request(session=Session.objects.get(pk=session_id), trigger="manual")
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    figures_agree(api, member, session_id, page=False)
    # The original instruction is kept with the summary, and counted with it.
    answer = served(api, session_id)
    assert answer["messages"][1]["content"].startswith("Plan my Oslo trip.")
    run.refresh_from_db()
    assert answer["token_count"] < run.pre_tokens

    append(api, session_id, *turns(2))
    figures_agree(api, member, session_id)
    compaction.compaction_revert(run=CompactionRun.objects.get(pk=run.pk))
    figures_agree(api, member, session_id)


# --- ?last=N --------------------------------------------------------------------------------------


def test_last_serves_exactly_the_newest_messages_and_keeps_a_tool_pair_whole(api):
    session_id = api.post("/api/v1/sessions/", {"system_prompt": "sys"}, format="json").json()["id"]
    append(
        api,
        session_id,
        {"role": "user", "content": "find flights"},
        {"role": "assistant", "content": "Looking."},
        {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "SK4021"},
    )

    two = served(api, session_id, last=2)["messages"]
    # The newest two are the call and its result: no older user message borrowed in front.
    assert [m["role"] for m in two] == ["system", "assistant", "tool"]
    assert two[1]["tool_calls"][0]["id"] == "c1" and two[2]["tool_call_id"] == "c1"

    one = served(api, session_id, last=1)["messages"]
    # The newest one is a result: the cut moves back to the call it answers.
    assert [m["role"] for m in one] == ["system", "assistant", "tool"]

    three = served(api, session_id, last=3)["messages"]
    assert [m.get("content") for m in three[1:2]] == ["Looking."]


def test_last_on_a_managed_session_is_the_newest_messages_of_its_context(api, llm_server):
    session_id = new_session(api, memory_config={"threshold_tokens": 100_000})
    append(api, session_id, *turns(3))
    append(
        api,
        session_id,
        {"role": "assistant", "content": None, "tool_calls": [call("c9")]},
        {"role": "tool", "tool_call_id": "c9", "content": "done"},
    )
    messages = served(api, session_id, last=2)["messages"]
    assert [m["role"] for m in messages] == ["system", "assistant", "tool"]


# --- a long history over its threshold ---------------------------------------------------------------


def bulk_session(tenant, count: int, config: dict) -> Session:
    session = services.session_create(
        team=tenant.team, system_prompt="sys", memory_type="managed_conversation", memory_config=config
    )
    rows = []
    for seq in range(1, count + 1):
        role = "user" if seq % 2 else "assistant"
        rows.append(Message(session=session, seq=seq, role=role, content=f"message {seq} " + "x " * 40, token_count=50))
    Message.objects.bulk_create(rows, batch_size=2000)
    Session.objects.filter(pk=session.pk).update(
        last_seq=count, active_tokens=session.system_prompt_tokens + 50 * count, history_tokens=50 * count
    )
    return Session.objects.get(pk=session.pk)


def test_a_long_history_over_its_threshold_reads_only_the_rows_it_serves(tenant):
    # 5000 messages of 50 tokens over a 10k threshold, summarization off: the read packs the
    # newest messages into the compaction target (6k) from the cached counts.
    config = {"threshold_tokens": 10_000, "active_context": {"summarization": {"enabled": False}}}
    session = bulk_session(tenant, 5000, config)

    with CaptureQueriesContext(connection) as queries:
        built = context.served_context(session=session)
    body = [part for part in built.parts if part.kind == "message"]
    assert 100 <= len(body) <= 120 and body[-1].seq == 5000
    assert [part.seq for part in body] == list(range(5001 - len(body), 5001))
    assert built.token_count <= 6000 + tokens.REPLY_PRIMING_TOKENS
    assert [stage.processor for stage in built.stages if stage.ran] == ["backward_packing"]
    # Metadata of one chunk of the newest rows, then the served rows: never the whole history.
    fetched = sum(1 for q in queries.captured_queries if "FROM" in q["sql"] and "messages" in q["sql"].lower())
    assert fetched <= 3


# --- invariants over random conversations and configs --------------------------------------------------


@st.composite
def configs(draw) -> dict:
    processors = ["tool_truncation", "summarization", "backward_packing"]
    order = draw(st.permutations(processors))
    return {
        "threshold_tokens": draw(st.integers(150, 2000)),
        "active_context": {
            "processor_order": order,
            "excluded_processors": draw(st.lists(st.sampled_from(["tool_truncation", "summarization"]), unique=True)),
            "min_reduction_ratio": draw(st.sampled_from([0.05, 0.2, 0.4, 0.8])),
            "tool_truncation": {
                "enabled": draw(st.booleans()),
                "max_tool_message_tokens": draw(st.integers(5, 80)),
                "grace_recent_messages": draw(st.integers(0, 3)),
            },
            "summarization": {"grace_recent_messages": draw(st.integers(0, 3))},
            "backward_packing": {"grace_recent_messages": draw(st.integers(0, 3))},
        },
    }


def protected_rounds(session: Session, grace: int) -> tuple[list[int], int]:
    """The rounds backward packing must keep, as the seqs of their raw messages and the tokens of
    all of them (a summary message counts as a round too): the newest `grace` assistant rounds
    of the active context (whole tool turns; a turn still waiting for results is in no context)."""
    from memory_app.compaction import pipeline

    run = compaction.latest_done_run(session.pk)
    head = [pipeline.Item(role=m["role"], tokens=m["token_count"]) for m in (run.summary or [])] if run else []
    rows = list(
        Message.objects.filter(session=session, seq__gt=(run.covered_to_seq if run else 0))
        .order_by("seq")
        .values("seq", "role", "tool_calls", "tool_call_id", "token_count")
    )
    items = head + [
        pipeline.Item(
            role=row["role"],
            tokens=row["token_count"],
            seq=row["seq"],
            call_ids=tuple(c["id"] for c in row["tool_calls"] or []),
            tool_call_id=row["tool_call_id"],
        )
        for row in rows
    ]
    complete = [items[i] for i in pipeline.complete_turns(items, list(range(len(items))))]
    kept = [complete[i] for i in pipeline.pack(complete, 0, grace_rounds=grace)]
    return [item.seq for item in kept if item.seq is not None], sum(item.tokens for item in kept)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conversations(), configs(), st.booleans())
def test_the_served_context_keeps_its_invariants_for_any_valid_config(job_outbox, conversation, config, compact):
    tenant = make_tenant("props-config")
    session = services.session_create(
        team=tenant.team, system_prompt="system", memory_type="managed_conversation", memory_config=config
    )
    services.message_append(session=session, messages=conversation)
    session.refresh_from_db()
    if compact and compaction.compaction_blocker(session=session) is None:
        run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
        compaction.compaction_execute(run_id=str(run.pk))  # offline backend
    session.refresh_from_db()
    built = context.served_context(session=session)

    # It starts with the system prompt, holds no orphan tool message and a user message to answer.
    check_invariants(built.messages, system_first=True)
    # Its count is the sum of its parts, each counted by the one counter (a raw message's part is
    # its cached count unless tool truncation shortened it).
    assert built.token_count == sum(p.token_count for p in built.parts) + tokens.REPLY_PRIMING_TOKENS
    stored = dict(Message.objects.filter(session=session).values_list("seq", "token_count"))
    for part in built.parts:
        if part.kind == "message" and not part.truncated:
            assert part.token_count == stored[part.seq]
    # Within the threshold, unless packing did not run (a gate the config set) or the rounds it
    # must protect are themselves over the budget; and those rounds are always served.
    packing = next((s for s in built.stages if s.processor == "backward_packing"), None)
    served_seqs = {p.seq for p in built.parts if p.kind == "message"}
    size = built.token_count - tokens.REPLY_PRIMING_TOKENS
    if packing is not None and packing.ran:
        grace = config["active_context"]["backward_packing"]["grace_recent_messages"]
        protected, protected_tokens = protected_rounds(session, grace)
        assert set(protected) <= served_seqs
        borrowed = sum(p.token_count for p in built.parts if p.kind == "borrowed")
        floor = session.system_prompt_tokens + protected_tokens + borrowed
        assert size <= max(config["threshold_tokens"], floor)
    elif size > config["threshold_tokens"]:
        assert packing is not None and packing.reason  # skipped, and the read says why
    json.dumps(built.messages)  # what an agent receives is plain JSON
    Session.objects.filter(pk=session.pk).delete()
    tenant.team.delete()
