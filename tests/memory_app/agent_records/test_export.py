"""The session directory zip (.rawko/sessions/{sessionId}/) and the cross-agent attempts query."""

from __future__ import annotations

import io
import zipfile

import pytest

from memory_app.agent_records import documents as agent_memory_yaml
from memory_app.tasks import archive_agent_memories
from tests.memory_app.agent_records.documents import examples_document, main_document

pytestmark = pytest.mark.django_db


def put_memory(api, session_id: str, agent: str, text: str) -> None:
    response = api.put(
        f"/api/v1/sessions/{session_id}/agents/{agent}/memory/", text.encode(), content_type="application/yaml"
    )
    assert response.status_code == 200, response.content


def attempt(api, session_id: str, agent: str, **fields) -> dict:
    response = api.post(f"/api/v1/sessions/{session_id}/agents/{agent}/memory/attempts/", fields, format="json")
    assert response.status_code == 201, response.content
    return response.json()


@pytest.fixture
def team_session(api) -> str:
    response = api.post(
        "/api/v1/sessions/", {"system_prompt": "You build auth.", "external_id": "auth-1"}, format="json"
    )
    session_id = response.json()["id"]
    api.post(
        f"/api/v1/sessions/{session_id}/messages/",
        {"messages": [{"role": "user", "content": "Add JWT auth"}, {"role": "assistant", "content": "On it"}]},
        format="json",
    )
    put_memory(api, session_id, "developer", main_document())
    put_memory(api, session_id, "tester", examples_document("tester"))
    return session_id


def unzip(response) -> dict[str, object]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        return {name: agent_memory_yaml.load(archive.read(name).decode()) for name in archive.namelist()}


def test_the_rawko_export_is_the_rawko_session_directory(api, team_session):
    response = api.get(f"/api/v1/sessions/{team_session}/export/", {"format": "rawko"})
    assert response["Content-Disposition"] == 'attachment; filename="auth-1.rawko.zip"'
    files = unzip(response)
    root = ".rawko/sessions/auth-1/"
    assert sorted(files) == sorted(
        root + name
        for name in (
            "context.yaml",
            "conversation.yaml",
            "plan.yaml",
            "metadata.yaml",
            "agents/developer/agent-memory.yaml",
            "agents/tester/agent-memory.yaml",
        )
    )
    for agent in ("developer", "tester"):
        served = api.get(f"/api/v1/sessions/{team_session}/agents/{agent}/memory/").json()
        assert files[f"{root}agents/{agent}/agent-memory.yaml"] == served

    exported = api.get(f"/api/v1/sessions/{team_session}/export/").json()
    assert files[root + "conversation.yaml"]["messages"] == exported["messages"]
    assert files[root + "context.yaml"]["systemPrompt"] == "You build auth."
    assert files[root + "context.yaml"]["activeContext"]["messages"][-1]["content"] == "On it"
    metadata = files[root + "metadata.yaml"]
    assert metadata["id"] == team_session and metadata["messageCount"] == 2
    assert [(a["name"], a["attempts"], a["failures"]) for a in metadata["agents"]] == [
        ("developer", 2, 0),
        ("tester", 1, 1),
    ]
    plan = files[root + "plan.yaml"]
    assert [step["planStep"] for step in plan["steps"]] == [1, 2]
    assert [(a["agent"], a["attempt"], a["result"]) for a in plan["steps"][1]["attempts"]] == [
        ("developer", "attempt-002", "in_progress"),
        ("tester", "attempt-oauth", "failure"),
    ]
    assert plan["current"]["developer"]["currentPlanStep"] == 2


def test_the_export_without_format_is_still_the_json_document(api, team_session):
    response = api.get(f"/api/v1/sessions/{team_session}/export/")
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["memory_type"] == "conversation_history"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant"]


def test_the_rawko_export_carries_each_agents_archive(api, team_session):
    attempt(api, team_session, "developer", description="late", timestamp="2026-01-23T20:00:00.000Z")
    archive_agent_memories()
    files = unzip(api.get(f"/api/v1/sessions/{team_session}/export/", {"format": "rawko"}))
    archived = files[".rawko/sessions/auth-1/agents/developer/agent-memory-archive.yaml"]
    assert [d["id"] for d in archived["discoveries"]] == [f"discovery-00{i}" for i in range(1, 5)]
    assert ".rawko/sessions/auth-1/agents/tester/agent-memory-archive.yaml" not in files


def test_the_failures_query_spans_the_teams_sessions_and_agents(api, team_session, other_tenant):
    other = api.post("/api/v1/sessions/", {}, format="json").json()["id"]
    attempt(
        api,
        other,
        "planner",
        planStep=2,
        description="Redis sessions",
        result="failure",
        timestamp="2026-01-24T09:00:00.000Z",
        output="no redis",
    )
    attempt(api, other, "planner", planStep=3, description="step three", result="failure")
    attempt(api, other, "planner", planStep=2, description="worked", result="success")
    foreign = other_tenant.client.post("/api/v1/sessions/", {}, format="json").json()["id"]
    attempt(other_tenant.client, foreign, "developer", planStep=2, description="secret", result="failure")

    found = api.get("/api/v1/attempts/", {"result": "failure", "plan_step": 2})
    assert found.status_code == 200
    hits = found.json()["results"]
    assert [(h["session"], h["agent"], h["attempt"]["description"]) for h in hits] == [
        (other, "planner", "Redis sessions"),
        (team_session, "tester", "Add OAuth2 integration"),
    ]
    assert hits[1]["attempt"]["id"] == "attempt-oauth" and hits[1]["archived"] is False

    only = api.get("/api/v1/attempts/", {"result": "failure", "plan_step": 2, "agent": "tester"}).json()["results"]
    assert [h["agent"] for h in only] == ["tester"]
    in_session = api.get("/api/v1/attempts/", {"plan_step": 2, "session": other}).json()["results"]
    assert {h["attempt"]["result"] for h in in_session} == {"failure", "success"}
    assert api.get("/api/v1/attempts/", {"result": "broken"}).json()["fields"] == {
        "result": ['"broken" is not a valid choice.']
    }
