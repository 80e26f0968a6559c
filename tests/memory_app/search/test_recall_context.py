"""Recall in the served context: GET /sessions/{id}/context/?recall=... adds one "relevant memory"
message after the system prompt, inside the caller's budget, and the usage ledger records what
it injected. A session can make it automatic from its latest user message; it is off by default."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from memory_app.conversations import services
from memory_app.conversations.models import Message, Session
from memory_app.facts import services as facts
from memory_app.models import ContextServe
from memory_app.search.recall import HEADER
from tests.conftest import Tenant
from tests.memory_app.search.test_indexing import run_index

pytestmark = pytest.mark.usefixtures("job_outbox")  # sends are recorded, never reach a broker
SYSTEM_PROMPT = "You are a careful release engineer."
RECALL_START = HEADER.split("{")[0]  # "Relevant memory, recalled for: "


def new_session(tenant: Tenant, **fields: Any) -> Session:
    return services.session_create(team=tenant.team, system_prompt=SYSTEM_PROMPT, **fields)


def say(session: Session, *messages: dict[str, Any]) -> list[Message]:
    return list(services.message_append(session=session, messages=list(messages)).messages)


def turns(count: int, topic: str = "weather") -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for n in range(count):
        out.append({"role": "user", "content": f"question {n} about the {topic} " + "and more " * 10})
        out.append({"role": "assistant", "content": f"answer {n} about the {topic} " + "in detail " * 10})
    return out


def read(api: APIClient, session: Session, **params: Any) -> dict[str, Any]:
    response = api.get(f"/api/v1/sessions/{session.pk}/context/", params)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def remembered(tenant: Tenant) -> tuple[Session, Message]:
    """An earlier session of the team that knows why the kestrel migration failed, indexed."""
    earlier = new_session(tenant)
    _, answer = say(
        earlier,
        {"role": "user", "content": "why did the kestrel migration fail?"},
        {"role": "assistant", "content": "the kestrel migration failed because the disk quota was full"},
    )
    run_index(tenant.team.pk)
    return earlier, answer


def test_the_recall_message_follows_the_system_prompt_and_holds_the_hit_with_its_source(api, tenant, remembered):
    earlier, answer = remembered
    current = new_session(tenant)
    say(current, *turns(2))

    body = read(api, current, recall="kestrel migration disk")

    system, memory, *window = body["messages"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert memory["role"] == "system"
    assert memory["content"].startswith(f"{RECALL_START}kestrel migration disk")
    assert (
        f"the kestrel migration failed because the disk quota was full (session {earlier.pk}, seq 2"
        in (memory["content"])
    )
    assert [m["content"] for m in window] == [m["content"] for m in read(api, current)["messages"][1:]]
    recalled = body["recall"]
    assert (recalled["query"], recalled["automatic"]) == ("kestrel migration disk", False)
    assert recalled["memories"][0] | {"score": None, "item_id": None} == {
        "kind": "message",
        "id": str(answer.pk),
        "item_id": None,
        "session": str(earlier.pk),
        "seq": 2,
        "score": None,
    }


def test_recall_kinds_and_recall_k_narrow_what_is_recalled(api, tenant, remembered):
    facts.fact_add(team=tenant.team, role="ops", subject="kestrel migration", predicate="needs", object="disk space")
    run_index(tenant.team.pk)
    current = new_session(tenant)
    say(current, *turns(1))

    only_facts = read(api, current, recall="kestrel migration disk", recall_kinds="fact")["recall"]["memories"]
    just_one = read(api, current, recall="kestrel migration disk", recall_k=1)["recall"]["memories"]

    assert [m["kind"] for m in only_facts] == ["fact"]
    assert len(just_one) == 1


def test_recall_fits_in_max_tokens_by_shrinking_the_window(api, tenant, remembered):
    current = new_session(tenant)
    say(current, *turns(10))
    budget = 400
    without = read(api, current, max_tokens=budget)

    body = read(api, current, max_tokens=budget, recall="kestrel migration disk")

    assert body["token_count"] <= budget
    assert body["messages"][1]["content"].startswith(RECALL_START)
    assert body["recall"]["memories"]
    window = body["messages"][2:]
    assert 0 < len(window) < len(without["messages"]) - 1
    assert window == without["messages"][-len(window) :]  # the newest messages stay


def test_a_tight_budget_keeps_tool_calls_with_their_results(api, tenant, remembered):
    current = new_session(tenant)
    for n in range(4):
        call = {"id": f"call_{n}", "type": "function", "function": {"name": "probe", "arguments": "{}"}}
        say(
            current,
            {"role": "user", "content": f"probe host {n} " + "please " * 10},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{n}", "content": f"host {n} answers " + "ok " * 20},
            {"role": "assistant", "content": f"host {n} is fine"},
        )

    recalled = 0
    for budget in range(150, 700, 25):
        response = api.get(f"/api/v1/sessions/{current.pk}/context/", {"max_tokens": budget, "recall": "kestrel"})
        if response.status_code == 400:
            assert list(response.json()["fields"]) == ["max_tokens"]
            continue
        body = response.json()
        assert body["token_count"] <= budget
        window = body["messages"]
        calls = {c["id"] for m in window for c in m.get("tool_calls") or []}
        results = {m["tool_call_id"] for m in window if m["role"] == "tool"}
        assert calls == results, (budget, window)
        recalled += bool(body["recall"]["memories"])
    assert recalled > 5  # most budgets had room for a memory


def test_messages_the_window_serves_are_not_recalled_again(api, tenant):
    current = new_session(tenant)
    say(current, {"role": "user", "content": "the kestrel nest is on the north tower"}, *turns(1))
    run_index(tenant.team.pk)

    body = read(api, current, recall="kestrel nest")

    in_window = [m for m in body["messages"] if m["content"] == "the kestrel nest is on the north tower"]
    assert len(in_window) == 1
    assert all(memory["session"] != str(current.pk) for memory in body["recall"]["memories"])
    assert "kestrel nest is on the north tower" not in body["messages"][1]["content"]


def test_the_ledger_records_what_recall_injected(api, tenant, remembered):
    current = new_session(tenant)
    say(current, *turns(1))

    body = read(api, current, recall="kestrel migration disk")

    row = ContextServe.objects.filter(session=current).latest("created_at")
    assert row.recall_query == "kestrel migration disk"
    assert row.recalled == body["recall"]["memories"]
    assert row.served_tokens == body["token_count"]


def test_a_read_without_recall_records_none(api, tenant, remembered):
    current = new_session(tenant)
    say(current, *turns(1))

    body = read(api, current)

    assert "recall" not in body
    assert RECALL_START not in " ".join(str(m["content"]) for m in body["messages"])
    row = ContextServe.objects.get(session=current)
    assert (row.recall_query, row.recalled) == ("", [])


def test_automatic_recall_uses_the_latest_user_message(api, tenant, remembered):
    current = new_session(tenant)
    response = api.patch(f"/api/v1/sessions/{current.pk}/", {"recall": {"auto": True, "k": 3}}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["recall"] == {"auto": True, "k": 3, "kinds": []}
    say(
        current,
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
        {"role": "user", "content": "what happened to the kestrel migration?"},
    )

    body = read(api, current)

    assert body["recall"]["automatic"] is True
    assert body["recall"]["query"] == "what happened to the kestrel migration?"
    assert body["messages"][1]["content"].startswith(RECALL_START + "what happened to the kestrel migration?")
    assert 0 < len(body["recall"]["memories"]) <= 3
    assert "disk quota was full" in body["messages"][1]["content"]


def test_recall_is_off_by_default(api, tenant, remembered):
    current = new_session(tenant)
    say(current, {"role": "user", "content": "what happened to the kestrel migration?"})

    body = read(api, current)

    assert "recall" not in body
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert api.get(f"/api/v1/sessions/{current.pk}/").json()["recall"] == {"auto": False, "k": 5, "kinds": []}


@pytest.mark.parametrize("kinds", ["gossip", "message,gossip", ","])
def test_unknown_recall_kinds_are_refused_naming_recall_kinds(api, tenant, kinds):
    current = new_session(tenant)

    response = api.get(f"/api/v1/sessions/{current.pk}/context/", {"recall": "kestrel", "recall_kinds": kinds})

    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["recall_kinds"]
