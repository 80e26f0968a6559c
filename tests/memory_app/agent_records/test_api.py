"""Agent memory documents (discoveries, attempts, decisions) over the API: PUT/GET round trips, validation, appends."""

from __future__ import annotations

import json

import pytest

from memory_app.agent_records import documents as agent_memory_yaml
from memory_app.agent_records.models import AgentMemoryEntry
from tests.memory_app.agent_records.documents import (
    all_blocks,
    block,
    examples_document,
    main_document,
    versioning_document,
)

pytestmark = pytest.mark.django_db
YAML = "application/yaml"


def memory_url(session_id: str, agent: str = "developer", tail: str = "") -> str:
    return f"/api/v1/sessions/{session_id}/agents/{agent}/memory/{tail}"


def put_yaml(api, session_id: str, text: str, agent: str = "developer"):
    return api.put(memory_url(session_id, agent), data=text.encode(), content_type=YAML)


def get_yaml(api, session_id: str, agent: str = "developer"):
    response = api.get(memory_url(session_id, agent), {"format": "yaml"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith(YAML)
    return agent_memory_yaml.load(response.content.decode())


def test_the_documents_use_every_yaml_block_of_the_agent_memory_conventions():
    assert all_blocks() == [
        "1_header",
        "2_discoveries",
        "3_attempts",
        "4_decisions",
        "5_context",
        "6_example_1_discovery",
        "7_example_2_failed_attempt",
        "8_example_3_decision",
        "9_versioning",
    ]
    used = main_document() + examples_document("developer") + versioning_document()
    assert all(block(name) in used for name in all_blocks())


def test_the_reference_document_round_trips_through_yaml_without_loss(api, session_id):
    written = agent_memory_yaml.load(main_document())
    response = put_yaml(api, session_id, main_document())
    assert response.status_code == 200, response.content

    read = get_yaml(api, session_id)
    # Order-sensitive: every key of every entry comes back where it was written.
    assert json.dumps(read) == json.dumps(written)
    assert read["discoveries"][1]["content"].startswith("Dependencies available:\n- jsonwebtoken@9.0.0")
    assert read["attempts"][0]["artifacts"][0]["content"].startswith('import jwt from "jsonwebtoken";\n')
    assert read["attempts"][1]["currentIssue"] is None
    assert read["decisions"][0]["alternatives"][1] == {
        "name": "OAuth2",
        "reason": "Not chosen - scope too large for this task",
    }
    assert read["context"]["codebaseUnderstanding"]["existingPatterns"][2] == "Type safety with interfaces"


def test_the_reference_document_round_trips_through_json_without_loss(api, session_id):
    written = agent_memory_yaml.load(main_document())
    response = api.put(memory_url(session_id), data=json.dumps(written), content_type="application/json")
    assert response.status_code == 200, response.content
    assert json.dumps(response.json()) == json.dumps(written)
    assert json.dumps(api.get(memory_url(session_id)).json()) == json.dumps(written)
    assert get_yaml(api, session_id) == written
    # A document read back as YAML can be PUT again unchanged.
    again = api.get(memory_url(session_id), HTTP_ACCEPT=YAML).content
    assert put_yaml(api, session_id, again.decode()).status_code == 200
    assert get_yaml(api, session_id) == written


def test_the_reference_examples_round_trip_and_the_missing_sections_are_filled_in(api, session_id):
    written = agent_memory_yaml.load(examples_document("tester"))
    assert put_yaml(api, session_id, examples_document("tester"), agent="tester").status_code == 200
    read = get_yaml(api, session_id, agent="tester")
    assert read == {**written, "context": None}
    assert read["decisions"][0]["alternatives"] == [
        "Session-based auth (complexity vs. simplicity)",
        "OAuth2 (scope too large)",
        "API keys (not user-centric)",
    ]
    assert read["attempts"][0]["nextAttempt"] == "Return to JWT implementation"


def test_the_versioning_block_alone_is_an_empty_memory(api, session_id, tenant):
    assert put_yaml(api, session_id, versioning_document()).status_code == 200
    read = api.get(memory_url(session_id)).json()
    assert read["version"] == "1" and read["schema"] == "agent-memory"
    assert read["agent"] == "developer" and read["sessionId"] == session_id
    assert (read["discoveries"], read["attempts"], read["decisions"], read["context"]) == ([], [], [], None)


def test_a_put_replaces_the_entries(api, session_id):
    put_yaml(api, session_id, main_document())
    put_yaml(api, session_id, examples_document("developer"))
    read = api.get(memory_url(session_id)).json()
    assert [d["id"] for d in read["discoveries"]] == ["disc-auth-001"]
    assert AgentMemoryEntry.objects.count() == 3


def test_an_unknown_agent_memory_is_404(api, session_id):
    assert api.get(memory_url(session_id, "nobody")).status_code == 404
    assert api.get(memory_url(session_id, "nobody", "prompt/")).status_code == 404


# --- validation -------------------------------------------------------------------------


def broken(document: dict) -> dict:
    document = json.loads(json.dumps(document))
    document["version"] = "2"
    document["discoveries"][0]["importance"] = "urgent"
    del document["discoveries"][1]["content"]
    document["attempts"][1]["result"] = "done"
    document["attempts"][0]["artifacts"][0] = {"action": "create"}
    document["attempts"][0]["tokensUsed"]["input"] = -5
    document["decisions"][1]["id"] = "decision-001"
    document["decisions"][0]["reversible"] = "yes"
    document["context"]["currentPlanStep"] = "two"
    document["context"]["blockers"] = [42]
    return document


def test_validation_errors_name_every_path(api, session_id):
    document = broken(agent_memory_yaml.load(main_document()))
    response = api.put(memory_url(session_id), document, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "validation_error"
    assert set(body["fields"]) == {
        "version",
        "discoveries[0].importance",
        "discoveries[1].content",
        "attempts[1].result",
        "attempts[0].artifacts[0].path",
        "attempts[0].tokensUsed.input",
        "decisions[1].id",
        "decisions[0].reversible",
        "context.currentPlanStep",
        "context.blockers[0]",
    }
    assert body["fields"]["attempts[1].result"] == ['must be one of success, failure, partial, in_progress, not "done"']
    assert "decision-001" in body["fields"]["decisions[1].id"][0]
    assert AgentMemoryEntry.objects.count() == 0  # nothing of a refused document is stored


def test_a_yaml_error_names_the_line_and_stores_nothing(api, session_id):
    response = put_yaml(api, session_id, 'version: "1"\nschema: "agent-memory"\ndiscoveries:\n  - id: [\n')
    assert response.status_code == 400
    assert response.json()["error"] == "parse_error"
    assert "line" in response.json()["detail"]
    assert put_yaml(api, session_id, 'version: "1"\nversion: "1"\n').status_code == 400


def test_the_header_must_name_the_schema_and_this_agent(api, session_id):
    response = api.put(memory_url(session_id), {"agent": "tester", "attempts": {}}, format="json")
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"version", "schema", "agent", "attempts"}
    response = api.put(memory_url(session_id), ["not", "a", "mapping"], format="json")
    assert response.status_code == 400
    assert api.put(memory_url(session_id, "bad agent!"), {}, format="json").status_code == 400


# --- appends and completion -----------------------------------------------------------------


def test_appends_get_the_next_id_of_their_kind(api, session_id):
    first = api.post(
        memory_url(session_id, tail="discoveries/"), {"type": "api_surface", "content": "GET /users"}, format="json"
    )
    second = api.post(
        memory_url(session_id, tail="discoveries/"),
        data=b"type: data_model\nimportance: low\ncontent: |\n  User has id, email\n",
        content_type=YAML,
    )
    decision = api.post(
        memory_url(session_id, tail="decisions/"),
        {"type": "skip", "description": "No OAuth", "relatedDiscoveries": ["discovery-001"]},
        format="json",
    )
    assert (first.status_code, second.status_code, decision.status_code) == (201, 201, 201)
    assert first.json()["id"] == "discovery-001" and second.json()["id"] == "discovery-002"
    assert decision.json()["id"] == "decision-001"
    assert list(first.json()) == ["id", "timestamp", "type", "content"]
    assert first.json()["timestamp"].endswith("Z")

    put_yaml(api, session_id, main_document())  # ids up to discovery-004, attempt-002, decision-002
    third = api.post(
        memory_url(session_id, tail="discoveries/"), {"type": "code_pattern", "content": "x"}, format="json"
    )
    assert third.json()["id"] == "discovery-005"
    read = api.get(memory_url(session_id)).json()
    assert [d["id"] for d in read["discoveries"]][-2:] == ["discovery-004", "discovery-005"]


def test_an_attempt_is_recorded_at_its_start_and_completed_later(api, session_id):
    put_yaml(api, session_id, main_document())
    started = api.post(
        memory_url(session_id, tail="attempts/"),
        {"planStep": 3, "description": "Session store", "approach": "Use express-session"},
        format="json",
    )
    assert started.status_code == 201
    assert started.json()["id"] == "attempt-003" and started.json()["result"] == "in_progress"

    done = api.patch(
        memory_url(session_id, tail="attempts/attempt-003/"),
        {
            "result": "failure",
            "output": "Store not configured\nstack...",
            "lessons": ["Configure the store first"],
            "duration_ms": 1200,
        },
        format="json",
    )
    assert done.status_code == 200, done.content
    attempt = api.get(memory_url(session_id)).json()["attempts"][-1]
    assert attempt == {**started.json(), **done.json()} and attempt["result"] == "failure"
    assert list(attempt)[:2] == ["id", "timestamp"]
    assert AgentMemoryEntry.objects.get(entry_id="attempt-003").plan_step == 3


def test_outcomes_need_a_final_result_and_an_attempt_keeps_its_identity(api, session_id):
    put_yaml(api, session_id, main_document())
    url = memory_url(session_id, tail="attempts/attempt-002/")
    missing = api.patch(url, {"output": "x"}, format="json")
    assert missing.status_code == 400 and set(missing.json()["fields"]) == {"output"}
    wrong = api.patch(url, {"result": "in_progress", "id": "other", "duration_ms": "long"}, format="json")
    assert wrong.status_code == 400
    assert set(wrong.json()["fields"]) == {"id", "duration_ms"}
    bad_field = api.patch(url, {"result": "success", "duration_ms": "long"}, format="json")
    assert set(bad_field.json()["fields"]) == {"duration_ms"}
    assert (
        api.patch(
            memory_url(session_id, tail="attempts/attempt-999/"), {"result": "success"}, format="json"
        ).status_code
        == 404
    )
    assert api.get(memory_url(session_id)).json()["attempts"][1]["result"] == "in_progress"


def test_an_appended_entry_is_validated_with_paths(api, session_id):
    response = api.post(
        memory_url(session_id, tail="decisions/"),
        {"type": "guess", "alternatives": [{"reason": "no name"}]},
        format="json",
    )
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"type", "description", "alternatives[0].name"}
    taken = api.post(
        memory_url(session_id, tail="discoveries/"), {"id": "d1", "type": "data_model", "content": "a"}, format="json"
    )
    assert taken.status_code == 201
    again = api.post(
        memory_url(session_id, tail="discoveries/"), {"id": "d1", "type": "data_model", "content": "b"}, format="json"
    )
    assert again.status_code == 409


def test_a_read_key_cannot_write_agent_memory(session_id, tenant):
    from tests.conftest import make_tenant

    reader = make_tenant("alpha", role="read")
    assert (
        reader.client.put(memory_url(session_id), {"version": "1", "schema": "agent-memory"}, format="json").status_code
        == 403
    )
