"""An attempt over the API while it runs and once it concludes: GET and PATCH .../memory/attempts/{id}/.

The format records an attempt at its start, updates it while it runs ("changing approach ->
update attempt entry": approach, status, progress, subTasks, currentIssue, nextStep) and records
it again at its completion (result, output/error, lessons, ...). A concluded attempt is the record
the prompts and the arbiter rely on, so it no longer changes.
"""

from __future__ import annotations

import json

import pytest

from memory_app.agent_records import documents as agent_memory_yaml
from memory_app.agent_records.models import AgentMemoryEntry
from memory_app.tenancy.models import ApiKey
from tests.conftest import make_tenant
from tests.memory_app.agent_records.documents import main_document

pytestmark = pytest.mark.django_db
YAML = "application/yaml"


def memory_url(session_id: str, tail: str = "", agent: str = "developer") -> str:
    return f"/api/v1/sessions/{session_id}/agents/{agent}/memory/{tail}"


def attempt_url(session_id: str, attempt_id: str) -> str:
    return memory_url(session_id, f"attempts/{attempt_id}/")


@pytest.fixture
def memory(api, session_id) -> dict:
    """The conventions' document: attempt-001 succeeded, attempt-002 is in progress."""
    response = api.put(memory_url(session_id), data=main_document().encode(), content_type=YAML)
    assert response.status_code == 200, response.content
    return response.json()


def stored_attempt(api, session_id: str, attempt_id: str) -> dict:
    attempts = api.get(memory_url(session_id)).json()["attempts"]
    return next(attempt for attempt in attempts if attempt["id"] == attempt_id)


# --- updates while the attempt runs -------------------------------------------------------------


def test_an_attempt_in_progress_takes_partial_updates_of_its_working_fields(api, session_id, memory):
    before = stored_attempt(api, session_id, "attempt-002")
    sub_tasks = [
        {"description": "Create login route", "status": "complete"},
        {"description": "Implement password validation", "status": "complete"},
        {"description": "Generate JWT token", "status": "complete"},
        {"description": "Test endpoint", "status": "in_progress"},
    ]
    response = api.patch(
        attempt_url(session_id, "attempt-002"),
        {
            "progress": "85%",
            "subTasks": sub_tasks,
            "currentIssue": "curl gets 500 on a wrong password",
            "nextStep": "Map a bad password to 401",
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    after = stored_attempt(api, session_id, "attempt-002")
    assert response.json() == after
    assert after == {
        **before,
        "progress": "85%",
        "subTasks": sub_tasks,
        "currentIssue": "curl gets 500 on a wrong password",
        "nextStep": "Map a bad password to 401",
    }
    assert list(after) == list(before)  # updated in place: every key where the agent wrote it
    assert after["result"] == "in_progress"
    assert stored_attempt(api, session_id, "attempt-001") == memory["attempts"][0]
    assert AgentMemoryEntry.objects.filter(kind="attempt").count() == 2


def test_changing_the_approach_updates_the_attempt_entry(api, session_id, memory):
    response = api.patch(
        attempt_url(session_id, "attempt-002"),
        data=b"approach: |\n  Reuse the middleware's verify() for tokens\n  and sign with HS256\nstatus: rethinking\n",
        content_type=YAML,
    )
    assert response.status_code == 200, response.content
    attempt = stored_attempt(api, session_id, "attempt-002")
    assert attempt["approach"] == "Reuse the middleware's verify() for tokens\nand sign with HS256\n"
    assert attempt["status"] == "rethinking"
    assert attempt["id"] == "attempt-002" and attempt["timestamp"] == "2026-01-23T10:33:00.000Z"


def test_a_progress_update_can_add_fields_the_attempt_did_not_have_yet(api, session_id):
    started = api.post(
        memory_url(session_id, "attempts/"), {"planStep": 3, "description": "Session store"}, format="json"
    ).json()
    response = api.patch(
        attempt_url(session_id, started["id"]),
        {"approach": "Use express-session", "progress": 10, "notes": "kept as written"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json() == {**started, "approach": "Use express-session", "progress": 10, "notes": "kept as written"}
    assert list(response.json())[-3:] == ["approach", "progress", "notes"]


def test_the_current_issue_and_next_step_can_be_cleared_with_null(api, session_id, memory):
    url = attempt_url(session_id, "attempt-002")
    assert api.patch(url, {"currentIssue": "JWT secret missing"}, format="json").status_code == 200
    assert stored_attempt(api, session_id, "attempt-002")["currentIssue"] == "JWT secret missing"
    response = api.patch(url, {"currentIssue": None, "nextStep": None}, format="json")
    assert response.status_code == 200, response.content
    attempt = stored_attempt(api, session_id, "attempt-002")
    assert attempt["currentIssue"] is None and attempt["nextStep"] is None


def test_saying_the_attempt_is_still_in_progress_is_a_progress_update(api, session_id, memory):
    response = api.patch(
        attempt_url(session_id, "attempt-002"), {"result": "in_progress", "progress": "70%"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["result"] == "in_progress" and response.json()["progress"] == "70%"


def test_a_progress_update_is_validated_naming_each_field(api, session_id, memory):
    response = api.patch(
        attempt_url(session_id, "attempt-002"),
        {
            "approach": 5,
            "progress": True,
            "subTasks": [{"status": "complete"}, "Test endpoint"],
            "currentIssue": ["two", "issues"],
            "nextStep": 3,
            "result": "done",
        },
        format="json",
    )
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "validation_error"
    assert set(body["fields"]) == {
        "approach",
        "progress",
        "subTasks[0].description",
        "subTasks[1]",
        "currentIssue",
        "nextStep",
        "result",
    }
    assert body["fields"]["approach"] == ["must be text, not a number"]
    assert body["fields"]["subTasks[0].description"] == ["is required"]
    assert body["fields"]["result"] == ['must be one of success, failure, partial, in_progress, not "done"']
    assert stored_attempt(api, session_id, "attempt-002") == memory["attempts"][1]  # nothing stored


def test_a_field_that_cannot_be_null_says_so(api, session_id, memory):
    response = api.patch(attempt_url(session_id, "attempt-002"), {"approach": None}, format="json")
    assert response.status_code == 400
    assert response.json()["fields"] == {"approach": ["must be text, not null"]}


def test_outcome_fields_wait_for_the_attempt_to_conclude(api, session_id, memory):
    response = api.patch(
        attempt_url(session_id, "attempt-002"),
        {"nextStep": "Test endpoint", "output": "half done", "lessons": "Read the spec", "duration_ms": 1000},
        format="json",
    )
    assert response.status_code == 400
    fields = response.json()["fields"]
    assert set(fields) == {"output", "lessons", "duration_ms"}
    assert fields["lessons"] == [
        "is recorded when the attempt concludes: send it with result success, failure or partial"
    ]
    assert stored_attempt(api, session_id, "attempt-002") == memory["attempts"][1]


def test_an_attempt_keeps_its_id_and_timestamp(api, session_id, memory):
    response = api.patch(
        attempt_url(session_id, "attempt-002"),
        {"id": "attempt-009", "timestamp": "2026-01-24T00:00:00.000Z", "progress": "70%"},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["fields"] == {"id": ["cannot be changed"], "timestamp": ["cannot be changed"]}
    same = api.patch(
        attempt_url(session_id, "attempt-002"),
        {"id": "attempt-002", "timestamp": "2026-01-23T10:33:00.000Z", "progress": "70%"},
        format="json",
    )
    assert same.status_code == 200, same.content


def test_the_body_must_be_a_mapping(api, session_id, memory):
    response = api.patch(attempt_url(session_id, "attempt-002"), ["progress", "70%"], format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"non_field_errors"}


def test_an_unknown_attempt_is_404(api, session_id, memory):
    assert api.patch(attempt_url(session_id, "attempt-999"), {"progress": "1%"}, format="json").status_code == 404
    assert api.get(attempt_url(session_id, "attempt-999")).status_code == 404
    assert api.get(attempt_url(session_id, "discovery-001")).status_code == 404  # not an attempt
    other_agent = memory_url(session_id, "attempts/attempt-002/", agent="tester")
    assert api.patch(other_agent, {"progress": "1%"}, format="json").status_code == 404


# --- concluding -----------------------------------------------------------------------------------


def test_the_concluding_update_may_carry_the_last_working_fields(api, session_id, memory):
    response = api.patch(
        attempt_url(session_id, "attempt-002"),
        {
            "result": "success",
            "progress": "100%",
            "subTasks": [{"description": "Test endpoint", "status": "complete"}],
            "nextStep": None,
            "output": "POST /login answers a JWT",
            "lessons": ["Sign with the configured secret"],
            "duration_ms": 90000,
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    attempt = stored_attempt(api, session_id, "attempt-002")
    assert attempt["result"] == "success" and attempt["progress"] == "100%" and attempt["nextStep"] is None
    assert attempt["lessons"] == ["Sign with the configured secret"]
    assert AgentMemoryEntry.objects.get(entry_id="attempt-002").result == "success"
    found = api.get("/api/v1/attempts/", {"result": "success", "plan_step": 2}).json()["results"]
    assert [hit["attempt"]["id"] for hit in found] == ["attempt-002"]


def test_a_concluded_attempt_refuses_further_updates(api, session_id, memory):
    url = attempt_url(session_id, "attempt-002")
    assert api.patch(url, {"result": "failure", "error": "Token library missing"}, format="json").status_code == 200
    concluded = stored_attempt(api, session_id, "attempt-002")

    for changes in ({"nextStep": "Try again"}, {"result": "success"}, {"lessons": "Check the libraries first"}):
        response = api.patch(url, changes, format="json")
        assert response.status_code == 409, (changes, response.content)
        body = response.json()
        assert body["error"] == "conflict"
        assert "attempt-002" in body["detail"] and "failure" in body["detail"]
        assert "new attempt" in body["detail"]
    # the conventions' first attempt was written concluded (success)
    assert api.patch(attempt_url(session_id, "attempt-001"), {"approach": "x"}, format="json").status_code == 409
    assert stored_attempt(api, session_id, "attempt-002") == concluded
    assert stored_attempt(api, session_id, "attempt-001") == memory["attempts"][0]


def test_sending_the_concluding_update_again_succeeds_without_changing_anything(api, session_id, memory):
    """A client that lost the answer to its concluding PATCH can send it again."""
    url = attempt_url(session_id, "attempt-002")
    changes = {"result": "partial", "output": "Login works; tests pending", "iterations": 2}
    first = api.patch(url, changes, format="json")
    assert first.status_code == 200, first.content
    again = api.patch(url, changes, format="json")
    assert again.status_code == 200, again.content
    assert again.json() == first.json()
    assert api.patch(url, {**changes, "iterations": 3}, format="json").status_code == 409


def test_a_validation_problem_is_reported_before_the_conflict(api, session_id, memory):
    response = api.patch(attempt_url(session_id, "attempt-001"), {"duration_ms": "long"}, format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"duration_ms"}


# --- reading one attempt ---------------------------------------------------------------------------


def test_an_attempt_can_be_read_on_its_own(api, session_id, memory):
    response = api.get(attempt_url(session_id, "attempt-002"))
    assert response.status_code == 200, response.content
    assert json.dumps(response.json()) == json.dumps(memory["attempts"][1])
    as_yaml = api.get(attempt_url(session_id, "attempt-002"), {"format": "yaml"})
    assert as_yaml["Content-Type"].startswith(YAML)
    assert agent_memory_yaml.load(as_yaml.content.decode()) == memory["attempts"][1]


# --- teams and keys -----------------------------------------------------------------------------


def test_another_team_can_neither_read_nor_update_an_attempt(session_id, memory, other_tenant):
    url = attempt_url(session_id, "attempt-002")
    assert other_tenant.client.get(url).status_code == 404
    assert other_tenant.client.patch(url, {"progress": "99%"}, format="json").status_code == 404


def test_a_read_key_reads_an_attempt_but_cannot_update_it(api, session_id, memory, tenant):
    reader = make_tenant(tenant.team.name, role=ApiKey.Role.READ).client
    url = attempt_url(session_id, "attempt-002")
    assert reader.get(url).status_code == 200
    assert reader.patch(url, {"progress": "99%"}, format="json").status_code == 403
    assert stored_attempt(api, session_id, "attempt-002") == memory["attempts"][1]


def test_a_key_of_another_team_with_the_same_agent_name_sees_its_own_memory_only(session_id, memory):
    stranger = make_tenant("gamma")
    own_session = stranger.client.post("/api/v1/sessions/", {"system_prompt": "x"}, format="json").json()["id"]
    stranger.client.post(memory_url(own_session, "attempts/"), {"description": "Mine"}, format="json")
    assert stranger.client.get(attempt_url(own_session, "attempt-001")).json()["description"] == "Mine"
    assert stranger.client.get(attempt_url(session_id, "attempt-001")).status_code == 404
