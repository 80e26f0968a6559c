"""The facts API: add (or see again), validation, contradictions over time, filters,
staff curation, and the graph neighbourhood."""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from django.utils import timezone

from memory_app.events.models import MemoryEvent
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.tenancy.models import ApiKey
from tests.conftest import make_tenant

pytestmark = pytest.mark.django_db

FACT_KEYS = {
    "id",
    "session",
    "role",
    "subject",
    "predicate",
    "object",
    "curated",
    "source_message",
    "extraction_run",
    "extractor",
    "confidence",
    "times_seen",
    "last_seen_at",
    "valid_from",
    "invalidated_at",
    "invalidated_by",
    "created_at",
    "updated_at",
}


def add(api, expect: int = 201, **body):
    response = api.post("/api/v1/facts/", {"role": "user", **body}, format="json")
    assert response.status_code == expect, response.content
    return response.json()


def listed(api, **params) -> list[dict]:
    response = api.get("/api/v1/facts/", params)
    assert response.status_code == 200, response.content
    return response.json()["results"]


@pytest.fixture
def admin(tenant):
    return make_tenant(tenant.team.name, role=ApiKey.Role.ADMIN).client


def test_adding_a_fact_answers_201_in_the_contract_shape(api, session_id):
    fact = add(api, subject="Paris", predicate="is capital of", object="France", session=session_id, confidence=0.9)
    assert set(fact) == FACT_KEYS
    assert (fact["subject"], fact["predicate"], fact["object"]) == ("Paris", "is capital of", "France")
    assert fact["session"] == session_id and fact["extractor"] == "manual" and fact["confidence"] == 0.9
    assert fact["times_seen"] == 1 and fact["invalidated_at"] is None and fact["source_message"] is None


def test_the_same_live_fact_again_is_200_with_times_seen_counted(api):
    first = add(api, subject="Paris", predicate="is capital of", object="France")
    fullwidth_f = "\uff26"  # NFKC folds it to "F"
    again = add(api, 200, subject="  paris ", predicate="IS   capital of", object=f"{fullwidth_f}RANCE")
    assert again["id"] == first["id"] and again["times_seen"] == 2
    assert again["subject"] == "Paris"  # stored as first written
    assert Fact.objects.count() == 1


def test_a_fact_stated_again_is_listed_first_by_last_sighting_and_keeps_its_first(api, session_id):
    paris = add(api, subject="Paris", predicate="is capital of", object="France", session=session_id)
    bob = add(api, subject="Bob", predicate="works at", object="Acme", session=session_id)
    again = add(api, 200, subject="Paris", predicate="is capital of", object="France", session=session_id)

    assert again["created_at"] == paris["created_at"]
    assert datetime.fromisoformat(again["last_seen_at"]) > datetime.fromisoformat(paris["last_seen_at"])
    assert [f["id"] for f in listed(api, session=session_id)] == [bob["id"], paris["id"]]
    assert [f["id"] for f in listed(api, session=session_id, order="last_seen")] == [paris["id"], bob["id"]]
    refused = api.get("/api/v1/facts/", {"order": "oldest"})
    assert refused.status_code == 400 and "order" in refused.json()["fields"]


def test_scopes_keep_their_own_copy_of_a_fact(api, session_id, other_tenant):
    team_wide = add(api, subject="sky", predicate="has colour", object="blue")
    in_session = add(api, subject="sky", predicate="has colour", object="blue", session=session_id)
    elsewhere = add(other_tenant.client, subject="sky", predicate="has colour", object="blue")
    assert len({team_wide["id"], in_session["id"], elsewhere["id"]}) == 3
    assert in_session["times_seen"] == team_wide["times_seen"] == 1
    assert [f["id"] for f in listed(other_tenant.client)] == [elsewhere["id"]]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"subject": 5, "predicate": "is", "object": "x"}, "subject"),
        ({"subject": "a", "predicate": ["is"], "object": "x"}, "predicate"),
        ({"subject": "a", "predicate": "is", "object": "x" * 1001}, "object"),
        ({"subject": "a", "predicate": "is", "object": "x", "role": None}, "role"),
        ({"subject": "a", "predicate": "is", "object": "x", "role": "r" * 201}, "role"),
        ({"subject": "a", "predicate": "is", "object": "x", "confidence": 1.5}, "confidence"),
        ({"subject": "a", "predicate": "is", "object": "x", "confidence": "0.5"}, "confidence"),
        ({"subject": "a", "predicate": "is", "object": "x", "confidence": True}, "confidence"),
        ({"subject": "a", "predicate": "is", "object": "x", "session": "nope"}, "session"),
        ({"subject": "   ", "predicate": "is", "object": "x"}, "subject"),
        ({"predicate": "is", "object": "x"}, "subject"),
    ],
)
def test_a_bad_fact_is_400_naming_the_field(api, body, field):
    response = api.post("/api/v1/facts/", {"role": "user", **body}, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"], response.json()
    assert Fact.objects.count() == 0


def test_another_teams_session_is_404_and_a_read_key_cannot_add(api, other_tenant, session_id, tenant):
    body = {"role": "user", "subject": "a", "predicate": "b", "object": "c", "session": session_id}
    assert other_tenant.client.post("/api/v1/facts/", body, format="json").status_code == 404
    reader = make_tenant(tenant.team.name, role=ApiKey.Role.READ).client
    assert reader.post("/api/v1/facts/", body, format="json").status_code == 403
    assert Fact.objects.count() == 0


def test_a_contradiction_invalidates_the_old_fact_and_as_of_tells_what_was_true(api):
    old = add(api, subject="Alice", predicate="lives in", object="Paris")
    time.sleep(0.01)
    between = timezone.now().isoformat()
    time.sleep(0.01)
    new = add(api, subject="alice", predicate="Lives In", object="Oslo")

    stored_old = api.get(f"/api/v1/facts/{old['id']}/").json()
    assert stored_old["invalidated_at"] is not None and stored_old["invalidated_by"] == new["id"]
    assert [f["object"] for f in listed(api, subject="ALICE")] == ["Oslo"]
    assert [f["object"] for f in listed(api, subject="alice", as_of=between)] == ["Paris"]
    assert [f["object"] for f in listed(api, subject="alice", as_of=timezone.now().isoformat())] == ["Oslo"]
    assert {f["object"] for f in listed(api, include_invalidated="true")} == {"Paris", "Oslo"}
    event = MemoryEvent.objects.get(kind=MemoryEvent.Kind.FACT_INVALIDATED)
    assert event.data["fact_id"] == old["id"] and event.data["invalidated_by"] == new["id"]

    back = add(api, subject="Alice", predicate="lives in", object="Paris")  # moved back: a new fact
    assert back["id"] != old["id"]
    assert [f["object"] for f in listed(api, subject="alice")] == ["Paris"]
    assert Fact.objects.count() == 3


def test_multi_valued_predicates_keep_every_value(api):
    add(api, subject="Alice", predicate="likes", object="tea")
    add(api, subject="Alice", predicate="likes", object="coffee")
    assert {f["object"] for f in listed(api, subject="alice")} == {"tea", "coffee"}


def test_the_single_valued_predicates_come_from_settings(api, settings):
    settings.FACTS_SINGLE_VALUED_PREDICATES = ["Favourite  Colour"]
    add(api, subject="Bob", predicate="favourite colour", object="red")
    add(api, subject="Bob", predicate="favourite colour", object="green")
    add(api, subject="Bob", predicate="lives in", object="Rome")
    add(api, subject="Bob", predicate="lives in", object="Bern")  # no longer single-valued
    assert {f["object"] for f in listed(api, subject="bob")} == {"green", "Rome", "Bern"}


def test_filters_search_and_pagination(api, session_id):
    add(api, subject="Paris", predicate="is capital of", object="France", session=session_id)
    add(api, subject="Berlin", predicate="is capital of", object="Germany", role="assistant")
    add(api, subject="Ada", predicate="wrote", object="the first program")
    assert [f["subject"] for f in listed(api, predicate="IS CAPITAL OF")] == ["Berlin", "Paris"]
    assert [f["subject"] for f in listed(api, object="germany")] == ["Berlin"]
    assert [f["subject"] for f in listed(api, role="assistant")] == ["Berlin"]
    assert [f["subject"] for f in listed(api, session=session_id)] == ["Paris"]
    assert [f["subject"] for f in listed(api, q="FIRST prog")] == ["Ada"]
    page = api.get("/api/v1/facts/", {"limit": 2}).json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    assert api.get("/api/v1/facts/", {"as_of": "yesterday"}).status_code == 400
    assert "as_of" in api.get("/api/v1/facts/", {"as_of": "yesterday"}).json()["fields"]


def test_staff_edit_invalidate_and_restore_facts_other_keys_get_403(api, admin):
    fact = add(api, subject="Ada", predicate="works at", object="Acme")
    url = f"/api/v1/facts/{fact['id']}/"
    assert api.delete(url).status_code == 403
    assert api.patch(url, {"object": "Initech"}, format="json").status_code == 403

    edited = admin.patch(url, {"object": "Initech", "confidence": 0.5}, format="json")
    assert edited.status_code == 200 and edited.json()["object"] == "Initech"
    assert [f["object"] for f in listed(api, object="initech")] == ["Initech"]
    assert admin.patch(url, {"confidence": "high"}, format="json").status_code == 400

    assert admin.delete(url).status_code == 204
    assert Fact.objects.filter(pk=fact["id"]).exists()  # never a hard delete
    assert listed(api) == []
    restored = admin.patch(url, {"invalidated": False}, format="json")
    assert restored.status_code == 200 and restored.json()["invalidated_at"] is None
    assert [f["id"] for f in listed(api)] == [fact["id"]]

    admin.delete(url)
    add(api, subject="ada", predicate="works at", object="initech")  # an identical fact is live again
    conflict = admin.patch(url, {"invalidated": False}, format="json")
    assert conflict.status_code == 409, conflict.content


def test_restoring_a_replaced_value_replaces_the_current_one(api, admin):
    paris = add(api, subject="Alice", predicate="lives in", object="Paris")
    oslo = add(api, subject="Alice", predicate="lives in", object="Oslo")
    admin.patch(f"/api/v1/facts/{paris['id']}/", {"invalidated": False}, format="json")
    assert [f["id"] for f in listed(api, subject="alice")] == [paris["id"]]
    assert api.get(f"/api/v1/facts/{oslo['id']}/").json()["invalidated_by"] == paris["id"]


def test_a_write_key_cannot_supersede_a_curated_fact_its_contradiction_waits_for_review(api, admin):
    curated = admin.post(
        "/api/v1/facts/", {"role": "user", "subject": "Ada", "predicate": "works at", "object": "Acme"}, format="json"
    ).json()
    assert curated["curated"] is True

    contradiction = add(api, subject="Ada", predicate="works at", object="Initech")

    assert contradiction["curated"] is False
    assert contradiction["invalidated_by"] == curated["id"] and contradiction["invalidated_at"] is not None
    assert [f["object"] for f in listed(api, subject="ada")] == ["Acme"]
    event = MemoryEvent.objects.filter(kind="fact_invalidated").get()
    assert event.data == {
        "fact_id": contradiction["id"],
        "reason": "contradicts_curated",
        "invalidated_by": curated["id"],
    }
    # An admin who agrees restores the contradiction, which then supersedes the curated value.
    admin.patch(f"/api/v1/facts/{contradiction['id']}/", {"invalidated": False}, format="json")
    assert [f["object"] for f in listed(api, subject="ada")] == ["Initech"]


def test_a_fact_an_admin_edited_is_curated_and_an_agent_does_not_replace_it(api, admin):
    fact = add(api, subject="Ada", predicate="lives in", object="Oslo")
    admin.patch(f"/api/v1/facts/{fact['id']}/", {"object": "Bergen"}, format="json")
    add(api, subject="Ada", predicate="lives in", object="Paris")
    assert [f["object"] for f in listed(api, subject="ada")] == ["Bergen"]
    # An admin's own new value does supersede it.
    admin.post(
        "/api/v1/facts/", {"role": "user", "subject": "Ada", "predicate": "lives in", "object": "Rome"}, format="json"
    )
    assert [f["object"] for f in listed(api, subject="ada")] == ["Rome"]


def test_the_graph_grows_with_depth(api):
    add(api, subject="Alice", predicate="knows", object="Bob")
    add(api, subject="Bob", predicate="works at", object="Acme")
    add(api, subject="Acme", predicate="is located in", object="Oslo")
    add(api, subject="Carol", predicate="knows", object="Dave")

    def graph(**params):
        response = api.get("/api/v1/facts/graph/", params)
        assert response.status_code == 200, response.content
        return response.json()

    one = graph(entity="alice")
    assert one["nodes"] == [{"id": "alice", "label": "Alice"}, {"id": "bob", "label": "Bob"}]
    assert [(e["source"], e["predicate"], e["target"]) for e in one["edges"]] == [("alice", "knows", "bob")]
    assert {node["id"] for node in graph(entity="Alice", depth=2)["nodes"]} == {"alice", "bob", "acme"}
    three = graph(entity="ALICE", depth=3)
    assert {node["id"] for node in three["nodes"]} == {"alice", "bob", "acme", "oslo"}
    assert len(three["edges"]) == 3 and all(set(e) == {"id", "source", "target", "predicate"} for e in three["edges"])
    assert {node["id"] for node in graph(entity="oslo", depth=2)["nodes"]} == {"oslo", "acme", "bob"}
    assert graph(entity="nobody") == {"nodes": [{"id": "nobody", "label": "nobody"}], "edges": [], "truncated": False}
    for bad in ({"entity": "alice", "depth": 4}, {"entity": "alice", "depth": 0}, {}):
        response = api.get("/api/v1/facts/graph/", bad)
        assert response.status_code == 400, bad


def test_the_graph_follows_live_facts_or_those_valid_as_of(api):
    add(api, subject="Alice", predicate="lives in", object="Paris")
    time.sleep(0.01)
    before = timezone.now().isoformat()
    time.sleep(0.01)
    add(api, subject="Alice", predicate="lives in", object="Oslo")
    now = api.get("/api/v1/facts/graph/", {"entity": "alice"}).json()
    assert [e["target"] for e in now["edges"]] == ["oslo"]
    then = api.get("/api/v1/facts/graph/", {"entity": "alice", "as_of": before}).json()
    assert [e["target"] for e in then["edges"]] == ["paris"]


def test_the_admin_shows_facts_and_runs_read_only(api, admin_client, tenant):
    fact = add(api, subject="Ada", predicate="works at", object="Acme")
    run = FactExtractionRun.objects.create(team=tenant.team, trigger="text", status="quarantined", raw_output="x")
    for name, pk in (("fact", fact["id"]), ("factextractionrun", run.pk)):
        assert admin_client.get(f"/admin/memory_app/{name}/").status_code == 200
        page = admin_client.get(f"/admin/memory_app/{name}/{pk}/change/")
        assert page.status_code == 200 and b'type="submit" value="Save"' not in page.content
    admin_client.post(
        "/admin/memory_app/fact/", {"action": "invalidate_selected", "_selected_action": [fact["id"]]}, follow=True
    )
    assert Fact.objects.get(pk=fact["id"]).invalidated_at is not None
    admin_client.post(
        "/admin/memory_app/factextractionrun/", {"action": "discard_selected", "_selected_action": [run.pk]}
    )
    assert FactExtractionRun.objects.get(pk=run.pk).status == "discarded"
