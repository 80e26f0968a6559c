"""Sessions endpoints: create, list with filters, read, patch, delete."""

from __future__ import annotations

import uuid

import pytest

from memory_app.conversations.models import Message, Session

pytestmark = pytest.mark.django_db


def test_it_creates_a_session_with_defaults(api):
    response = api.post("/api/v1/sessions/", {}, format="json")
    assert response.status_code == 201
    body = response.json()
    uuid.UUID(body["id"])
    assert body["memory_type"] == "conversation_history"
    assert body["system_prompt"] == ""
    assert body["metadata"] == {}


def test_it_creates_a_session_with_every_field(api):
    response = api.post(
        "/api/v1/sessions/",
        {"system_prompt": "Be brief", "external_id": "run-1", "metadata": {"user": 7}, "memory_type": "kg"},
        format="json",
    )
    assert response.status_code == 201
    session = Session.objects.get(pk=response.json()["id"])
    assert (session.system_prompt, session.external_id, session.metadata, session.memory_type) == (
        "Be brief",
        "run-1",
        {"user": 7},
        "kg",
    )
    assert session.system_prompt_tokens > 0


def test_it_rejects_an_unknown_memory_type_naming_the_field(api):
    response = api.post("/api/v1/sessions/", {"memory_type": "vector"}, format="json")
    assert response.status_code == 400
    assert "memory_type" in response.json()["fields"]
    assert Session.objects.count() == 0


def test_it_rejects_metadata_that_is_not_an_object(api):
    response = api.post("/api/v1/sessions/", {"metadata": [1, 2]}, format="json")
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["metadata"]


def test_external_id_is_unique_per_team(api, other_tenant):
    assert api.post("/api/v1/sessions/", {"external_id": "x"}, format="json").status_code == 201
    duplicate = api.post("/api/v1/sessions/", {"external_id": "x"}, format="json")
    assert duplicate.status_code == 409
    assert "external_id" in duplicate.json()["fields"]
    # another team may use the same external id
    assert other_tenant.client.post("/api/v1/sessions/", {"external_id": "x"}, format="json").status_code == 201


def test_it_lists_filters_and_counts(api):
    first = api.post("/api/v1/sessions/", {"external_id": "a"}, format="json").json()["id"]
    api.post("/api/v1/sessions/", {"external_id": "b"}, format="json")
    api.post(f"/api/v1/sessions/{first}/messages/", {"role": "user", "content": "hi"}, format="json")

    listed = api.get("/api/v1/sessions/").json()
    assert listed["count"] == 2
    by_external = api.get("/api/v1/sessions/", {"external_id": "a"}).json()["results"]
    assert [(s["external_id"], s["message_count"]) for s in by_external] == [("a", 1)]
    created = Session.objects.get(pk=first).created_at
    after = api.get("/api/v1/sessions/", {"created_after": created.isoformat()}).json()
    assert after["count"] == 2
    before = api.get("/api/v1/sessions/", {"created_before": created.isoformat()}).json()
    assert before["count"] == 0
    bad = api.get("/api/v1/sessions/", {"created_after": "yesterday"})
    assert bad.status_code == 400 and "created_after" in bad.json()["fields"]


def test_it_patches_and_deletes_a_session(api, admin_api, session_id):
    api.post(f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": "hi"}, format="json")
    patched = api.patch(f"/api/v1/sessions/{session_id}/", {"system_prompt": "New"}, format="json")
    assert patched.status_code == 200
    assert patched.json()["system_prompt"] == "New"
    assert api.get(f"/api/v1/sessions/{session_id}/").json()["system_prompt"] == "New"

    assert api.delete(f"/api/v1/sessions/{session_id}/").status_code == 403  # agents reset, admins purge
    assert admin_api.delete(f"/api/v1/sessions/{session_id}/").status_code == 204
    assert api.get(f"/api/v1/sessions/{session_id}/").status_code == 404
    assert Message.objects.count() == 0


def test_a_patch_cannot_write_server_fields(api, session_id):
    response = api.patch(f"/api/v1/sessions/{session_id}/", {"last_seq": 99, "id": str(uuid.uuid4())}, format="json")
    assert response.status_code == 200
    session = Session.objects.get(pk=session_id)
    assert session.last_seq == 0
