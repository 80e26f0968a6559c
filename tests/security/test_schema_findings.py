"""Each product bug the schemathesis runs found, pinned by a plain test of its own."""

from __future__ import annotations

import pytest

from memory_app.conversations.models import Session
from memory_app.rounds.models import Round

pytestmark = pytest.mark.django_db


def test_a_nul_character_anywhere_in_a_json_body_is_a_400_naming_where(api):
    # PostgreSQL cannot store U+0000 in jsonb: this was a 500 on PostgreSQL only.
    response = api.post("/api/v1/sessions/", {"metadata": {"k": ["ok", "a\x00b"]}}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["fields"] == {"metadata.k[1]": ["NUL characters (U+0000) are not allowed"]}
    assert not Session.objects.exists()


def test_a_nul_character_in_a_yaml_body_is_a_400(api, session_id):
    response = api.generic(
        "PUT",
        f"/api/v1/sessions/{session_id}/agents/dev/memory/",
        'version: "1"\nschema: agent-memory\ndiscoveries: []\nattempts: []\ndecisions: []\ncontext: {x: "a\\0b"}\n',
        content_type="application/yaml",
    )
    assert response.status_code == 400, response.content
    assert "context.x" in response.json()["fields"]


@pytest.mark.parametrize("state", [[None, None], "text", 3])
def test_additional_state_that_is_not_an_object_is_a_400_not_a_500(api, state):
    imported = api.post("/api/v1/sessions/import/", {"messages": [], "additional_state": state}, format="json")
    created = api.post("/api/v1/sessions/", {"additional_state": state}, format="json")
    assert (imported.status_code, created.status_code) == (400, 400)
    assert "additional_state" in imported.json()["fields"]
    assert not Session.objects.exists()


def test_an_imported_session_block_is_validated_like_a_create(api):
    response = api.post(
        "/api/v1/sessions/import/",
        {"messages": [], "session": {"external_id": {"a": 1}, "metadata": []}},
        format="json",
    )
    assert response.status_code == 400
    assert set(response.json()["fields"]) == {"session.external_id", "session.metadata"}


def test_an_id_that_does_not_fit_its_url_converter_is_a_json_404(api):
    response = api.get("/api/v1/sessions/not-a-uuid/")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "not_found", "detail": "Not found.", "fields": {}}


def test_pages_outside_the_api_keep_the_html_404(client):
    assert client.get("/no-such-page/")["Content-Type"].startswith("text/html")


@pytest.mark.parametrize(
    "path", ["agents/dev/memory/?format=yaml", "agents/dev/memory/prompt/?format=text", "conversation/?format=yaml"]
)
def test_errors_stay_json_when_yaml_or_text_is_asked_for(api, path):
    response = api.get(f"/api/v1/sessions/00000000-0000-0000-0000-000000000000/{path}")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == "not_found"


@pytest.mark.parametrize("round_id", ["a/b", "..", ".", "two words"])
def test_a_round_id_that_cannot_be_a_url_segment_is_refused(api, session_id, round_id):
    response = api.post(f"/api/v1/sessions/{session_id}/rounds/", {"user_query": "q", "id": round_id}, format="json")
    assert response.status_code == 400
    assert "id" in response.json()["fields"]
    imported = api.post(
        "/api/v1/sessions/conversation/import/",
        {"id": "conv-1", "rounds": [{"id": round_id, "user_query": "q", "post_list": []}]},
        format="json",
    )
    assert imported.status_code == 400
    assert "rounds[0].id" in imported.json()["fields"]
    assert not Round.objects.exists()


def test_the_schema_declares_the_error_answers_and_nullable_event_sessions(api):
    schema = api.get("/api/schema/?format=json").json()
    append = schema["paths"]["/api/v1/sessions/{session_id}/messages/"]["post"]["responses"]
    assert {"400", "401", "403", "404", "409", "413", "415"} <= set(append)
    assert append["404"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}
    listing = schema["paths"]["/api/v1/facts/"]["get"]["responses"]
    assert "404" in listing  # ?session= names a session
    assert schema["components"]["schemas"]["MemoryEvent"]["properties"]["session_id"]["nullable"] is True
