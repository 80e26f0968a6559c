"""A failed round stays out of what a session's context serves, as it stays out of a role's
rounds (TaskWeaver's get_role_rounds(include_failure_rounds=False)), unless the read asks for
failure rounds with `include_failure_rounds=true`."""

from __future__ import annotations

import pytest

from tests.memory_app.rounds.test_api import new_round, post, set_state

pytestmark = pytest.mark.django_db


def context(api, session_id: str, **params) -> dict:
    response = api.get(f"/api/v1/sessions/{session_id}/context/", params)
    assert response.status_code == 200, response.content
    return response.json()


def texts(answer: dict) -> list[str]:
    return [m["content"] for m in answer["messages"] if m["role"] != "system"]


@pytest.fixture
def rounds(api, session_id: str) -> str:
    """A finished round, a failed one, and one still running, with a plain message between."""
    done = new_round(api, session_id, "count rows")["id"]
    post(api, session_id, done, "count the rows", "User", "Planner")
    post(api, session_id, done, "42 rows", "Planner", "User")
    set_state(api, session_id, done, "finished")
    failed = new_round(api, session_id, "plot them")["id"]
    post(api, session_id, failed, "plot the rows", "User", "Planner")
    post(api, session_id, failed, "matplotlib is missing", "Planner", "User")
    set_state(api, session_id, failed, "failed")
    api.post(f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": "try again"}, format="json")
    running = new_round(api, session_id, "plot again")["id"]
    post(api, session_id, running, "plot with pandas", "User", "Planner")
    return session_id


def test_a_failed_rounds_posts_are_left_out_of_the_context(api, rounds):
    assert texts(context(api, rounds)) == ["count the rows", "42 rows", "try again", "plot with pandas"]


def test_the_context_serves_failed_rounds_when_asked(api, rounds):
    everything = context(api, rounds, include_failure_rounds="true")
    assert texts(everything) == [
        "count the rows",
        "42 rows",
        "plot the rows",
        "matplotlib is missing",
        "try again",
        "plot with pandas",
    ]
    assert everything["token_count"] > context(api, rounds)["token_count"]


def test_last_counts_only_the_messages_served(api, rounds):
    assert texts(context(api, rounds, last=3)) == ["42 rows", "try again", "plot with pandas"]


def test_a_round_that_fails_later_leaves_the_context_then(api, rounds):
    running = api.get(f"/api/v1/sessions/{rounds}/rounds/").json()["results"][-1]["id"]
    set_state(api, rounds, running, "failed")
    assert texts(context(api, rounds)) == ["count the rows", "42 rows", "try again"]


def test_include_failure_rounds_must_be_a_boolean(api, rounds):
    refused = api.get(f"/api/v1/sessions/{rounds}/context/", {"include_failure_rounds": "maybe"})
    assert refused.status_code == 400
    assert "include_failure_rounds" in refused.json()["fields"]
