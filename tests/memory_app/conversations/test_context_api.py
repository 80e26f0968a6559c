"""GET /context/: the array to send to an LLM, exactly OpenAI's shape, within the budget."""

from __future__ import annotations

import base64

import pytest

from memory_app.conversations import tokens
from memory_app.usage import context_ledger

pytestmark = pytest.mark.django_db

PNG_URL = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 8).decode()
OPENAI_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id"}


def append(api, session_id, *messages):
    response = api.post(f"/api/v1/sessions/{session_id}/messages/", {"messages": list(messages)}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["messages"]


def context(api, session_id, **params):
    response = api.get(f"/api/v1/sessions/{session_id}/context/", params)
    assert response.status_code == 200, response.content
    return response.json()


def call(call_id):
    return {"id": call_id, "type": "function", "function": {"name": "run", "arguments": "{}"}}


def test_it_puts_the_system_prompt_first_and_uses_only_openai_keys(api, session_id):
    append(
        api,
        session_id,
        {"role": "user", "content": "hi", "meta": {"scratch": [1]}, "send_from": "u", "agent_calls": None},
        {"role": "assistant", "content": "yo", "reasoning_details": [{"sig": "x"}], "structured_data": {"a": 1}},
    )
    body = context(api, session_id)
    assert body["messages"] == [
        {"role": "system", "content": "You are helpful"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
    ]
    assert set(body) == {"context_id", "messages", "token_count"}


def test_images_become_image_url_parts_with_data_urls(api, session_id):
    append(api, session_id, {"role": "user", "content": "what is this?", "images": [PNG_URL]})
    user = context(api, session_id)["messages"][1]
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
        ],
    }


def test_last_limits_the_window(api, session_id):
    append(api, session_id, *({"role": "user", "content": f"m{i}"} for i in range(10)))
    messages = context(api, session_id, last=3)["messages"]
    assert [m["content"] for m in messages] == ["You are helpful", "m7", "m8", "m9"]


def test_the_token_count_is_the_sum_of_what_is_returned(api, session_id):
    append(api, session_id, {"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi!"})
    body = context(api, session_id)
    expected = sum(tokens.count_message(m) for m in body["messages"]) + tokens.REPLY_PRIMING_TOKENS
    assert body["token_count"] == expected


def test_max_tokens_keeps_the_newest_messages_that_fit(api, session_id):
    append(api, session_id, *({"role": "user", "content": f"message number {i}"} for i in range(10)))
    everything = context(api, session_id)
    budget = everything["token_count"] - 20
    trimmed = context(api, session_id, max_tokens=budget)
    assert trimmed["token_count"] <= budget
    assert trimmed["messages"][0]["role"] == "system"
    assert trimmed["messages"][-1]["content"] == "message number 9"
    assert len(trimmed["messages"]) < len(everything["messages"])


def test_a_budget_cut_never_separates_tool_calls_from_their_results(api, session_id):
    append(
        api,
        session_id,
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "a", "content": "result a " * 5},
        {"role": "tool", "tool_call_id": "b", "content": "result b " * 5},
        {"role": "assistant", "content": "done"},
    )
    full = context(api, session_id)["messages"]
    for budget in range(1, 200):
        response = api.get(f"/api/v1/sessions/{session_id}/context/", {"max_tokens": budget})
        if response.status_code == 400:  # below what the system prompt and "go" need
            assert list(response.json()["fields"]) == ["max_tokens"]
            continue
        body = response.json()
        assert body["token_count"] <= budget
        window = body["messages"]
        open_calls = {c["id"] for m in window for c in m.get("tool_calls", [])}
        for message in window:
            assert set(message) <= OPENAI_KEYS
            if message["role"] == "tool":
                assert message["tool_call_id"] in open_calls, (budget, window)
        if any(m.get("tool_calls") for m in window):
            assert sum(1 for m in window if m["role"] == "tool") == 2
    assert window == full


def test_results_of_a_deleted_tool_call_are_left_out(api, session_id):
    rows = append(
        api,
        session_id,
        {"role": "assistant", "tool_calls": [call("x")]},
        {"role": "tool", "tool_call_id": "x", "content": "r"},
        {"role": "user", "content": "next"},
    )
    api.delete(f"/api/v1/sessions/{session_id}/messages/{rows[0]['message_id']}/")
    messages = context(api, session_id)["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]


def test_context_query_parameters_are_validated(api, session_id):
    response = api.get(f"/api/v1/sessions/{session_id}/context/", {"last": 0})
    assert response.status_code == 400
    assert "last" in response.json()["fields"]


def test_context_reads_a_bounded_number_of_rows(api, session_id, django_assert_max_num_queries, settings):
    append(api, session_id, *({"role": "user", "content": f"m{i}"} for i in range(50)))
    settings.CONTEXT_LEDGER_FLUSH_SECONDS = 3600  # as deployed: the ledger row is written later, in a batch
    with django_assert_max_num_queries(3):  # key lookup, session, window
        api.get(f"/api/v1/sessions/{session_id}/context/", {"last": 5})
    assert context_ledger.flush() == 1


def test_a_budget_below_the_fixed_part_is_refused_naming_what_would_do(api, session_id):
    append(api, session_id, {"role": "user", "content": "go " * 50}, {"role": "assistant", "content": "ok"})
    response = api.get(f"/api/v1/sessions/{session_id}/context/", {"max_tokens": 10})
    assert response.status_code == 400
    message = response.json()["fields"]["max_tokens"][0]
    needed = int(message.split(" tokens")[0].rsplit(" ", 1)[1])
    # The smallest budget that works: the system prompt and the latest user message, borrowed.
    smallest = context(api, session_id, max_tokens=needed)
    assert [m["role"] for m in smallest["messages"]] == ["system", "user"]
    assert smallest["token_count"] == needed
    assert api.get(f"/api/v1/sessions/{session_id}/context/", {"max_tokens": needed - 1}).status_code == 400


def test_a_managed_session_serves_its_whole_active_context_without_last(api):
    created = api.post("/api/v1/sessions/", {"memory_type": "managed_conversation"}, format="json").json()
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(60)]
    append(api, created["id"], *turns)
    messages = context(api, created["id"])["messages"]
    assert [m["content"] for m in messages] == [f"m{i}" for i in range(60)]
