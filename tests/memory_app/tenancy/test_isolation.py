"""Team isolation over every API route: another team's key sees 404, no key sees 401.

The route list comes from the URL resolver, so a new route that this file does not
cover fails `test_every_api_route_is_covered` until it is added here.
"""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from experiences_app import services as experience_services
from experiences_app.models import Experience, SelectionLog, TeamExperienceConfig
from experiences_app.yaml_io import read_zip
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Message, Session
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.models import AgentMemoryEntry, Webhook, WebhookDelivery
from memory_app.rounds.models import Round, ScratchEntry, SharedMemoryEntry
from memory_app.webhooks import services as webhooks
from tests.url_routes import api_routes

pytestmark = pytest.mark.django_db

# route name -> methods that take ids from the URL (each must answer 404 cross-team)
SCOPED_ROUTES: dict[str, tuple[str, ...]] = {
    "session-detail": ("get", "patch", "delete"),
    "message-list": ("get", "post"),
    "message-detail": ("get", "patch", "delete"),
    "session-reset": ("post",),
    "session-context": ("get",),
    "context-replay": ("get",),
    "session-export": ("get",),
    "session-compact": ("post",),
    "compaction-list": ("get",),
    "compaction-revert": ("post",),
    "session-extract-facts": ("post",),
    "fact-detail": ("get", "patch", "delete"),
    "fact-extraction-detail": ("get",),
    "fact-extraction-retry": ("post",),
    "fact-extraction-accept": ("post",),
    "fact-extraction-discard": ("post",),
    "agent-memory": ("get", "put"),
    "agent-memory-discoveries": ("post",),
    "agent-memory-attempts": ("post",),
    "agent-memory-attempt-detail": ("get", "patch"),
    "agent-memory-context": ("get", "put", "patch", "delete"),
    "agent-memory-decisions": ("post",),
    "agent-memory-prompt": ("get",),
    "agent-memory-archive": ("get",),
    "session-arbiter-summary": ("get",),
    "experience-detail": ("get", "patch", "delete"),
    "experience-revisions": ("get",),
    "experience-diff": ("get",),
    "experience-approve": ("post",),
    "experience-selection-detail": ("get",),
    "experience-selection-download": ("get",),
    "round-list": ("get", "post"),
    "round-detail": ("get", "patch"),
    "round-posts": ("post",),
    "shared-memory": ("get", "post"),
    "conversation-export": ("get",),
    "session-scratch": ("get", "post"),
    "webhook-detail": ("get", "patch", "delete"),
    "webhook-delivery-list": ("get",),
    "webhook-redeliver": ("post",),
}
# routes without ids: checked for what they reveal or create across teams
COLLECTION_ROUTES = {
    "session-list": ("get", "post"),
    "session-import": ("post",),
    "event-list": ("get",),
    "fact-list": ("get", "post"),
    "fact-graph": ("get",),
    "fact-extraction-list": ("get",),
    "attempt-list": ("get",),
    "experience-list": ("get", "post"),
    "experience-import": ("post",),
    "experience-export": ("get",),
    "experience-select": ("post",),
    "experience-config": ("get", "put"),
    "experience-selection-list": ("get",),
    "conversation-import": ("post",),
    "usage": ("get",),
    "event-stream": ("get",),
    "webhook-list": ("get", "post"),
    "search": ("post",),
    "store-batch": ("post",),  # a session of another team is a 404: tests/memory_app/store
    "memory-file-list": ("get",),  # another team's paths find nothing: tests/memory_app/memory_files
    "memory-file-command": ("post",),
    "memory-file-versions": ("get",),
    "memory-file-revert": ("post",),
}


def fill(route: str, ids: tuple[str, ...]) -> str:
    session_id, message_id, run_id, fact_id, extraction_id, exp_id, selection_id, webhook_id, delivery_id = ids[:9]
    return "/" + (
        route.replace("<uuid:session_id>", session_id)
        .replace("<uuid:context_id>", ids[9])  # the victim's served context
        .replace("<str:agent>", "developer")  # the victim's agent memory
        .replace("<str:attempt_id>", "attempt-001")
        .replace("<slug:exp_id>", exp_id)
        .replace("<uuid:selection_id>", selection_id)
        .replace("<str:round_id>", "round-secret")  # the victim's round
        .replace("<uuid:message_id>", message_id)
        .replace("<uuid:run_id>", run_id)
        .replace("<uuid:fact_id>", fact_id)
        .replace("<uuid:extraction_id>", extraction_id)
        .replace("<uuid:webhook_id>", webhook_id)
        .replace("<uuid:delivery_id>", delivery_id)
    )


@pytest.fixture
def victim(tenant):
    """A session of team alpha with one message, a compaction, a fact, a quarantined
    fact extraction, an approved experience and its selection log; the attacker is team beta."""
    session_id = tenant.client.post("/api/v1/sessions/", {"system_prompt": "secret"}, format="json").json()["id"]
    message = tenant.client.post(
        f"/api/v1/sessions/{session_id}/messages/", {"role": "user", "content": "secret"}, format="json"
    ).json()
    run = CompactionRun.objects.create(
        team=tenant.team, session_id=session_id, trigger="manual", status="done", covered_to_seq=1
    )
    fact = tenant.client.post(
        "/api/v1/facts/",
        {"role": "user", "subject": "secret", "predicate": "is", "object": "secret", "session": session_id},
        format="json",
    ).json()
    extraction = FactExtractionRun.objects.create(
        team=tenant.team, session_id=session_id, trigger="manual", status="quarantined", raw_output="secret"
    )
    experience = experience_services.experience_create(
        team=tenant.team, exp_id="secret-exp", who=[], when="secret", what="secret", actor="t", status="approved"
    )
    log = SelectionLog.objects.create(team=tenant.team, role="user", query="secret", raw_response="secret")
    tenant.client.post(
        f"/api/v1/sessions/{session_id}/agents/developer/memory/attempts/",
        {"planStep": 1, "description": "secret", "result": "failure", "output": "secret"},
        format="json",
    )
    rounds = f"/api/v1/sessions/{session_id}/rounds/"
    tenant.client.post(rounds, {"user_query": "secret", "id": "round-secret"}, format="json")
    tenant.client.post(
        f"/api/v1/sessions/{session_id}/shared-memory/",
        {"type": "plan", "content": "secret", "scope": "round"},
        format="json",
    )
    tenant.client.post(f"/api/v1/sessions/{session_id}/scratch/", {"action": "secret"}, format="json")
    webhook, _ = webhooks.webhook_create(team=tenant.team, url="http://127.0.0.1:9/secret", actor="t")
    delivery = WebhookDelivery.objects.create(
        team=tenant.team, webhook=webhook, kind="compaction_completed", payload={"data": "secret"}, status="failed"
    )
    served = tenant.client.get(f"/api/v1/sessions/{session_id}/context/").json()
    ids = (session_id, message["message_id"], str(run.pk), fact["id"], str(extraction.pk))
    return (*ids, experience.exp_id, str(log.pk), str(webhook.pk), str(delivery.pk), served["context_id"])


def test_every_api_route_is_covered():
    assert set(api_routes()) == set(SCOPED_ROUTES) | set(COLLECTION_ROUTES)


@pytest.mark.parametrize(("name", "method"), [(n, m) for n, ms in SCOPED_ROUTES.items() for m in ms])
def test_another_teams_ids_answer_404_and_change_nothing(victim, other_tenant, name, method):
    session_id = victim[0]
    path = fill(api_routes()[name], victim)
    body = {"role": "user", "content": "injected", "system_prompt": "pwned"}
    response = getattr(other_tenant.client, method)(path, body, format="json")
    assert response.status_code == 404, (path, response.status_code, response.content)
    assert b"secret" not in response.content
    session = Session.objects.get(pk=session_id)
    assert session.system_prompt == "secret"
    assert list(Message.objects.filter(session=session).values_list("content", flat=True)) == ["secret"]
    assert list(CompactionRun.objects.filter(session=session).values_list("status", flat=True)) == ["done"]
    assert list(Fact.objects.values_list("subject", "object", "invalidated_at")) == [("secret", "secret", None)]
    assert list(FactExtractionRun.objects.values_list("status", flat=True)) == ["quarantined"]
    assert list(Experience.objects.values_list("what", "status", "revision")) == [("secret", "approved", 1)]
    assert SelectionLog.objects.count() == 1
    assert [e.data["description"] for e in AgentMemoryEntry.objects.all()] == ["secret"]
    assert list(Round.objects.values_list("round_id", "state")) == [("round-secret", "created")]
    assert list(SharedMemoryEntry.objects.values_list("content", flat=True)) == ["secret"]
    assert [data["action"] for data in ScratchEntry.objects.values_list("data", flat=True)] == ["secret"]
    assert list(Webhook.objects.values_list("url", "active")) == [("http://127.0.0.1:9/secret", True)]
    assert list(WebhookDelivery.objects.values_list("status", flat=True)) == ["failed"]


@pytest.mark.parametrize(
    ("name", "method"),
    [(n, m) for routes in (SCOPED_ROUTES, COLLECTION_ROUTES) for n, ms in routes.items() for m in ms],
)
def test_every_route_needs_a_key(victim, name, method):
    response = getattr(APIClient(), method)(fill(api_routes()[name], victim), {}, format="json")
    assert response.status_code == 401


def test_listing_shows_only_the_callers_sessions(victim, other_tenant):
    listed = other_tenant.client.get("/api/v1/sessions/").json()
    assert listed["count"] == 0
    assert other_tenant.client.get("/api/v1/sessions/", {"search": "secret"}).json()["count"] == 0


def test_events_of_another_teams_session_are_404_and_never_listed(victim, other_tenant, tenant):
    tenant.client.post(f"/api/v1/sessions/{victim[0]}/reset/")
    assert other_tenant.client.get("/api/v1/events/", {"session": victim[0]}).status_code == 404
    assert other_tenant.client.get("/api/v1/events/").json()["results"] == []
    # oldest first: the victim's experience approval, then the reset
    assert [e["kind"] for e in tenant.client.get("/api/v1/events/").json()["results"]] == [
        "experience_approved",
        "reset",
    ]


def test_a_search_never_finds_another_teams_memory(victim, other_tenant, tenant):
    from memory_app.search import services as search
    from memory_app.search.models import IndexRun

    for run in IndexRun.objects.filter(status=IndexRun.Status.PENDING):
        search.search_index_execute(run_id=str(run.pk))
    assert search.search_index_sweep()["woken"] == 0  # the victim's memory is all indexed
    body = {"query": "secret", "include_invalidated": True, "limit": 50}
    assert other_tenant.client.post("/api/v1/search/", body, format="json").json()["results"] == []
    assert other_tenant.client.post("/api/v1/search/", {**body, "session": victim[0]}, format="json").status_code == 404
    kinds = {hit["kind"] for hit in tenant.client.post("/api/v1/search/", body, format="json").json()["results"]}
    assert {"message", "fact", "record", "shared_memory", "experience"} <= kinds


def test_creating_and_importing_land_in_the_callers_team(victim, other_tenant):
    created = other_tenant.client.post("/api/v1/sessions/", {"team": victim[0]}, format="json")
    imported = other_tenant.client.post(
        "/api/v1/sessions/import/", {"messages": [{"role": "user", "content": "x"}], "team": 1}, format="json"
    )
    for response in (created, imported):
        assert response.status_code == 201
        assert Session.objects.get(pk=response.json()["id"]).team == other_tenant.team


def test_facts_and_extractions_of_another_team_are_never_listed(victim, other_tenant, tenant):
    attacker = other_tenant.client
    assert attacker.get("/api/v1/facts/", {"include_invalidated": "true"}).json()["count"] == 0
    assert attacker.get("/api/v1/facts/", {"session": victim[0]}).status_code == 404
    assert attacker.get("/api/v1/facts/graph/", {"entity": "secret"}).json()["edges"] == []
    assert attacker.get("/api/v1/fact-extractions/").json()["count"] == 0
    assert attacker.get("/api/v1/fact-extractions/", {"session": victim[0]}).status_code == 404
    assert tenant.client.get("/api/v1/facts/").json()["count"] == 1


def test_experiences_and_selections_of_another_team_are_never_listed_or_selected(victim, other_tenant, settings):
    settings.LLM_BASE_URL, settings.LLM_BACKEND = "", ""
    attacker = other_tenant.client
    assert attacker.get("/api/v1/experiences/").json()["count"] == 0
    assert attacker.get("/api/v1/experience-selections/").json()["count"] == 0
    assert attacker.get("/api/v1/experience-selections/", {"session": victim[0]}).status_code == 404
    assert read_zip(attacker.get("/api/v1/experiences/export/").content) == []
    selected = attacker.post("/api/v1/experiences/select/", {"role": "user", "query": "secret"}, format="json").json()
    assert selected["candidates"] == [] and b"secret" not in json.dumps(selected["candidates"]).encode()
    other_session = attacker.post("/api/v1/sessions/", {}, format="json").json()["id"]
    assert (
        attacker.post(
            "/api/v1/experiences/select/", {"role": "user", "query": "q", "session_id": victim[0]}, format="json"
        ).status_code
        == 404
    )
    assert attacker.get("/api/v1/experiences/config/").json()["use_experience"] == {}
    # the attacker's own experience with the victim's exp_id is a separate row
    created = attacker.post("/api/v1/experiences/", {"exp_id": "secret-exp", "when": "w", "what": "w"}, format="json")
    assert created.status_code == 201 and other_session
    assert Experience.objects.filter(exp_id="secret-exp").count() == 2
    assert not TeamExperienceConfig.objects.exists()


def test_usage_of_another_team_is_never_counted(victim, other_tenant, tenant):
    tenant.client.get(f"/api/v1/sessions/{victim[0]}/context/")
    attacker = other_tenant.client
    assert attacker.get("/api/v1/usage/").json()["totals"]["contexts_served"] == 0
    assert attacker.get("/api/v1/usage/", {"session": victim[0]}).status_code == 404
    # the victim fixture read its context once too
    assert tenant.client.get("/api/v1/usage/").json()["totals"]["contexts_served"] == 2


def test_attempts_of_another_team_are_never_listed(victim, other_tenant, tenant):
    attacker = other_tenant.client
    assert attacker.get("/api/v1/attempts/", {"result": "failure", "plan_step": 1}).json()["results"] == []
    assert attacker.get("/api/v1/attempts/", {"session": victim[0]}).status_code == 404
    assert len(tenant.client.get("/api/v1/attempts/", {"result": "failure"}).json()["results"]) == 1


def test_rounds_and_shared_memory_of_another_team_stay_hidden_and_imports_land_in_the_callers_team(
    victim, other_tenant
):
    attacker = other_tenant.client
    conversation = {"rounds": [{"id": "round-secret", "user_query": "x", "state": "created", "post_list": []}]}
    imported = attacker.post("/api/v1/sessions/conversation/import/", {**conversation, "team": 1}, format="json")
    assert imported.status_code == 201
    own = imported.json()["session_id"]
    assert Session.objects.get(pk=own).team == other_tenant.team
    assert attacker.get(f"/api/v1/sessions/{own}/shared-memory/").json() == []
    assert [r["user_query"] for r in attacker.get(f"/api/v1/sessions/{own}/rounds/").json()["results"]] == ["x"]
