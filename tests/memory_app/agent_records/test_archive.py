"""The archive job (the file size guidelines by session length): old entries move to the archive with a
history summary, and the API still returns them."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from memory_app.agent_records import documents as agent_memory_yaml
from memory_app.agent_records.models import AgentMemoryEntry
from memory_app.tasks import archive_agent_memories
from memsite.celery import app
from tests.memory_app.agent_records.documents import main_document

pytestmark = pytest.mark.django_db

STAMPS = {
    "discovery-001": "06:00",
    "discovery-002": "07:00",
    "discovery-003": "10:30",
    "discovery-004": "11:00",
    "attempt-001": "06:30",
    "attempt-002": "06:40",  # in progress: stays however old it is
    "decision-001": "06:05",
    "decision-002": "10:45",
}


def stamped(document: dict, stamps: dict[str, str]) -> dict:
    for section in ("discoveries", "attempts", "decisions"):
        for entry in document[section]:
            entry["timestamp"] = f"2026-01-23T{stamps[entry['id']]}:00.000Z"
    return document


def memory_url(session_id: str, tail: str = "") -> str:
    return f"/api/v1/sessions/{session_id}/agents/developer/memory/{tail}"


@pytest.fixture
def long_memory(api, session_id) -> dict:
    """The reference document spread over five hours, plus an old failed attempt appended later."""
    document = stamped(agent_memory_yaml.load(main_document()), STAMPS)
    assert api.put(memory_url(session_id), document, format="json").status_code == 200
    failed = {
        "timestamp": "2026-01-23T06:50:00.000Z",
        "planStep": 1,
        "description": "Use sessions",
        "result": "failure",
        "output": "Store missing\nTraceback ...",
    }
    response = api.post(memory_url(session_id, "attempts/"), failed, format="json")
    assert response.json()["id"] == "attempt-003"
    return api.get(memory_url(session_id)).json()


def test_the_job_is_on_the_beat_schedule():
    entry = next(e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"].endswith("archive_agent_memories"))
    app.loader.import_default_modules()
    assert entry["task"] in app.tasks


def test_old_entries_move_to_the_archive_with_a_history_summary(api, session_id, long_memory):
    assert archive_agent_memories() == "checked=1, archived_memories=1, archived_entries=5"

    live = api.get(memory_url(session_id)).json()
    assert [d["id"] for d in live["discoveries"]] == ["discovery-003", "discovery-004"]
    assert [a["id"] for a in live["attempts"]] == ["attempt-002"]
    assert [d["id"] for d in live["decisions"]] == ["decision-002"]
    (history,) = live["history"]
    assert history["from"] == "2026-01-23T06:00:00.000Z" and history["to"] == "2026-01-23T07:00:00.000Z"
    assert history["archive"] == "agent-memory-archive.yaml"
    assert history["entries"] == {
        "discoveries": ["discovery-001", "discovery-002"],
        "attempts": ["attempt-001", "attempt-003"],
        "decisions": ["decision-001"],
    }
    assert history["summary"] == [
        "discovery-001 [codebase_structure/high] Project uses TypeScript with Deno.",
        "decision-001 [architectural] Choose JWT over session-based auth",
        "attempt-001 step 1 (success) Implement authentication middleware",
        "attempt-003 step 1 (failure) Use sessions: Store missing",
        "discovery-002 [dependency_check/high] Dependencies available:",
    ]
    assert list(live)[-1] == "history"

    archive = api.get(memory_url(session_id, "archive/"), {"format": "yaml"})
    assert archive.status_code == 200
    archived = agent_memory_yaml.load(archive.content.decode())
    assert archived["schema"] == "agent-memory-archive" and archived["agent"] == "developer"
    # Nothing is lost: live + archive hold every entry, each exactly as written, in its order.
    for section in ("discoveries", "attempts", "decisions"):
        order = [entry["id"] for entry in long_memory[section]]
        rejoined = sorted(live[section] + archived[section], key=lambda entry: order.index(entry["id"]))
        assert json.dumps(rejoined) == json.dumps(long_memory[section])


def test_archived_entries_still_answer_the_attempts_query_and_keep_their_ids(api, session_id, long_memory):
    archive_agent_memories()
    found = api.get("/api/v1/attempts/", {"result": "failure", "plan_step": 1}).json()["results"]
    assert [(hit["attempt"]["id"], hit["archived"]) for hit in found] == [("attempt-003", True)]

    response = api.put(memory_url(session_id), long_memory, format="json")  # the document before archiving
    assert response.status_code == 400
    assert set(response.json()["fields"]) >= {"discoveries[0].id", "attempts[0].id", "decisions[0].id"}
    appended = api.post(memory_url(session_id, "attempts/"), {"description": "again"}, format="json")
    assert appended.json()["id"] == "attempt-004"  # archived ids stay taken


def test_the_job_is_idempotent_and_leaves_recent_work_alone(api, session_id, long_memory):
    archive_agent_memories()
    assert archive_agent_memories() == "checked=1, archived_memories=0, archived_entries=0"
    assert len(api.get(memory_url(session_id)).json()["history"]) == 1
    assert AgentMemoryEntry.objects.filter(archived_at__isnull=False).count() == 5


def test_a_medium_memory_within_its_size_is_not_archived(api, session_id):
    three_hours = {key: "09:00" for key in STAMPS} | {"discovery-004": "12:00"}
    document = stamped(agent_memory_yaml.load(main_document()), three_hours)
    api.put(memory_url(session_id), document, format="json")
    assert archive_agent_memories() == "checked=1, archived_memories=0, archived_entries=0"
    assert "history" not in api.get(memory_url(session_id)).json()


def test_a_medium_memory_over_100_kb_is_archived_down_to_its_last_two_hours(api, session_id, settings):
    three_hours = {key: "09:00" for key in STAMPS} | {"discovery-004": "12:00"}
    document = stamped(agent_memory_yaml.load(main_document()), three_hours)
    document["discoveries"][0]["content"] = "big\n" + "x" * 110_000
    api.put(memory_url(session_id), document, format="json")
    assert archive_agent_memories() == "checked=1, archived_memories=1, archived_entries=6"
    live = api.get(memory_url(session_id)).json()
    assert [d["id"] for d in live["discoveries"]] == ["discovery-004"]
    assert [a["id"] for a in live["attempts"]] == ["attempt-002"]  # in progress
    archived = api.get(memory_url(session_id, "archive/")).json()
    assert archived["discoveries"][0]["content"] == document["discoveries"][0]["content"]
