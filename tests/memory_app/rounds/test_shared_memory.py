"""Shared memory (TaskWeaver's get_shared_memory_entries): both scopes, the current round, each role's latest."""

from __future__ import annotations

import pytest

from memory_app.rounds.models import SharedMemoryEntry

pytestmark = pytest.mark.django_db


def start_round(api, session_id: str, round_id: str) -> None:
    response = api.post(
        f"/api/v1/sessions/{session_id}/rounds/", {"user_query": round_id, "id": round_id}, format="json"
    )
    assert response.status_code == 201


def share(api, session_id: str, content: str, scope: str, created_by: str, type_: str = "plan", **extra) -> dict:
    body = {"type": type_, "content": content, "scope": scope, "created_by": created_by, **extra}
    response = api.post(f"/api/v1/sessions/{session_id}/shared-memory/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def entries(api, session_id: str, **params) -> list[tuple[str, str]]:
    response = api.get(f"/api/v1/sessions/{session_id}/shared-memory/", params)
    assert response.status_code == 200
    return [(e["content"], e["scope"]) for e in response.json()]


def test_conversation_scope_counts_from_every_round_round_scope_only_from_the_current_one(api, session_id):
    start_round(api, session_id, "round-1")
    share(api, session_id, "overall plan", "conversation", "Planner")
    share(api, session_id, "step plan of round 1", "round", "CodeInterpreter")
    start_round(api, session_id, "round-2")
    share(api, session_id, "step plan of round 2", "round", "WebExplorer")
    assert entries(api, session_id, type="plan") == [
        ("overall plan", "conversation"),
        ("step plan of round 2", "round"),
    ]
    start_round(api, session_id, "round-3")  # round 2's round-scoped entry no longer counts
    assert entries(api, session_id, type="plan") == [("overall plan", "conversation")]


def fail_round(api, session_id: str, round_id: str) -> None:
    response = api.patch(f"/api/v1/sessions/{session_id}/rounds/{round_id}/", {"state": "failed"}, format="json")
    assert response.status_code == 200, response.content


def test_a_failed_round_still_shares_like_taskweaver_shared_memory(api, session_id):
    # TaskWeaver's get_shared_memory_entries reads every round, failed or not (only get_role_rounds
    # skips failures): a conversation plan written in a failed round stays in effect, and a failed
    # round that is still the latest keeps its round-scoped entries until the next round starts.
    start_round(api, session_id, "round-1")
    share(api, session_id, "overall plan", "conversation", "Planner")
    fail_round(api, session_id, "round-1")
    start_round(api, session_id, "round-2")
    share(api, session_id, "retry plan", "conversation", "CodeInterpreter")
    share(api, session_id, "step plan of the failing round", "round", "WebExplorer")
    fail_round(api, session_id, "round-2")
    assert entries(api, session_id, type="plan") == [
        ("overall plan", "conversation"),
        ("retry plan", "conversation"),
        ("step plan of the failing round", "round"),
    ]
    start_round(api, session_id, "round-3")
    assert entries(api, session_id, type="plan") == [("overall plan", "conversation"), ("retry plan", "conversation")]
    # get_role_rounds, by contrast, leaves the failed rounds out unless asked.
    rounds = api.get(f"/api/v1/sessions/{session_id}/rounds/", {"include_failure_rounds": "false"}).json()
    assert [r["id"] for r in rounds["results"]] == ["round-3"]


def test_only_each_roles_latest_entry_is_kept_in_the_order_they_were_written(api, session_id):
    start_round(api, session_id, "round-1")
    share(api, session_id, "planner v1", "conversation", "Planner")
    share(api, session_id, "coder v1", "conversation", "CodeInterpreter")
    start_round(api, session_id, "round-2")
    share(api, session_id, "planner v2", "conversation", "Planner")
    assert entries(api, session_id, type="plan") == [("coder v1", "conversation"), ("planner v2", "conversation")]
    every = entries(api, session_id, type="plan", latest_per_role="false")
    assert [content for content, _ in every] == ["planner v1", "coder v1", "planner v2"]


def test_entries_of_other_types_are_left_out(api, session_id):
    start_round(api, session_id, "round-1")
    share(api, session_id, "the plan", "conversation", "Planner")
    share(api, session_id, "exp/sub/path", "conversation", "Planner", type_="experience_sub_path")
    assert entries(api, session_id, type="experience_sub_path") == [("exp/sub/path", "conversation")]
    assert len(entries(api, session_id)) == 2  # no type: the latest of each type and role


def test_entries_carried_by_post_attachments_count_like_direct_ones(api, session_id):
    start_round(api, session_id, "round-1")
    extra = {"type": "plan", "content": "carried plan", "scope": "round"}
    body = {
        "message": "plan attached",
        "send_from": "Planner",
        "send_to": "CodeInterpreter",
        "attachment_list": [{"type": "shared_memory_entry", "content": "add it", "extra": extra}],
    }
    assert api.post(f"/api/v1/sessions/{session_id}/rounds/round-1/posts/", body, format="json").status_code == 201
    [entry] = api.get(f"/api/v1/sessions/{session_id}/shared-memory/", {"type": "plan"}).json()
    assert (entry["content"], entry["created_by"], entry["round"]) == ("carried plan", "Planner", "round-1")
    start_round(api, session_id, "round-2")
    assert entries(api, session_id, type="plan") == []


def test_a_round_scoped_entry_needs_a_round(api, session_id):
    response = api.post(
        f"/api/v1/sessions/{session_id}/shared-memory/",
        {"type": "plan", "content": "p", "scope": "round"},
        format="json",
    )
    assert response.status_code == 400
    assert "scope" in response.json()["fields"]
    conversation_wide = share(api, session_id, "p", "conversation", "Planner")
    assert conversation_wide["round"] is None


def test_an_entry_goes_to_the_round_named_or_the_current_one(api, session_id):
    start_round(api, session_id, "round-1")
    start_round(api, session_id, "round-2")
    assert share(api, session_id, "a", "round", "Planner")["round"] == "round-2"
    assert share(api, session_id, "b", "round", "Planner", round="round-1")["round"] == "round-1"
    missing = api.post(
        f"/api/v1/sessions/{session_id}/shared-memory/",
        {"type": "plan", "content": "c", "scope": "round", "round": "round-9"},
        format="json",
    )
    assert missing.status_code == 404


def test_resending_an_entry_id_returns_the_stored_entry(api, session_id):
    start_round(api, session_id, "round-1")
    body = {"type": "plan", "content": "p", "scope": "conversation", "id": "sme-1"}
    url = f"/api/v1/sessions/{session_id}/shared-memory/"
    assert api.post(url, body, format="json").status_code == 201
    assert api.post(url, body, format="json").status_code == 200
    assert api.post(url, {**body, "content": "other"}, format="json").status_code == 409
    assert SharedMemoryEntry.objects.count() == 1


def test_created_by_defaults_to_the_keys_agent_name(tenant, session_id):
    tenant.api_key.agent_name = "Planner"
    tenant.api_key.save()
    start_round(tenant.client, session_id, "round-1")
    answer = tenant.client.post(
        f"/api/v1/sessions/{session_id}/shared-memory/",
        {"type": "plan", "content": "p", "scope": "conversation"},
        format="json",
    ).json()
    assert answer["created_by"] == "Planner"
    assert answer["id"].startswith("sme-")
