"""POST /api/v1/search/: what a search returns for each filter, in what order and why, what it
refuses, who may search, and that it only ever reads the caller's team."""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from memory_app.agent_records import services as agent_records
from memory_app.conversations import services
from memory_app.conversations.models import Message, Session
from memory_app.facts import services as facts
from memory_app.search import schema
from memory_app.search import services as index
from memory_app.search.embeddings.base import EmbeddingPermanentError, Purpose
from memory_app.search.embeddings.fake import FakeEmbeddings
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey
from tests.conftest import Tenant, make_tenant
from tests.memory_app.search.test_indexing import run_index

pytestmark = pytest.mark.usefixtures("job_outbox")  # sends are recorded, never reach a broker
URL = "/api/v1/search/"


def search(client: APIClient, query: str, **body: Any) -> dict[str, Any]:
    response = client.post(URL, {"query": query, **body}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def texts(body: dict[str, Any], *, matched: bool = True) -> list[str]:
    """The results' texts, best first; `matched`: only those found by their words (in an index
    this small the vector engine proposes every item, near or not)."""
    return [
        hit["text"] for hit in body["results"] if not matched or hit.get("explain", {}).get("lexical_rank") is not None
    ]


def words(client: APIClient, query: str, **body: Any) -> list[str]:
    return texts(search(client, query, explain=True, **body))


def new_session(tenant: Tenant, **fields: Any) -> Session:
    return services.session_create(team=tenant.team, system_prompt="You are helpful.", **fields)


def say(session: Session, *messages: dict[str, Any]) -> list[Message]:
    return list(services.message_append(session=session, messages=list(messages)).messages)


def user(text: str, **fields: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **fields}


# --- filters ------------------------------------------------------------------------------------------


def test_it_finds_only_the_kinds_asked_for(api, tenant):
    session = new_session(tenant)
    say(session, user("the otter release ships on Friday"))
    facts.fact_add(team=tenant.team, role="ops", subject="otter release", predicate="ships_on", object="friday")
    run_index(tenant.team.pk)

    assert sorted(hit["kind"] for hit in search(api, "otter release")["results"]) == ["fact", "message"]
    assert [hit["kind"] for hit in search(api, "otter release", kinds=["fact"])["results"]] == ["fact"]


def test_it_finds_only_the_session_asked_for(api, tenant):
    first, second = new_session(tenant), new_session(tenant)
    say(first, user("otter notes from the first session"))
    say(second, user("otter notes from the second session"))
    run_index(tenant.team.pk)

    body = search(api, "otter", session=str(second.pk))

    assert texts(body, matched=False) == ["otter notes from the second session"]
    assert body["results"][0]["source"]["session"] == str(second.pk)


def test_it_finds_only_the_agent_asked_for(api, tenant):
    session = new_session(tenant)
    say(session, user("otter plan by the planner", name="Planner"), user("otter code by the coder", name="Coder"))
    run_index(tenant.team.pk)

    body = search(api, "otter", agent="Coder")

    assert texts(body, matched=False) == ["otter code by the coder"]
    assert body["results"][0]["source"]["agent"] == "Coder"


def test_it_finds_only_the_role_asked_for(api, tenant):
    session = new_session(tenant)
    say(session, user("otter question"), {"role": "assistant", "content": "otter answer"})
    run_index(tenant.team.pk)

    assert texts(search(api, "otter", role="assistant"), matched=False) == ["otter answer"]


def test_it_finds_only_what_was_written_between_from_and_to(api, tenant):
    session = new_session(tenant)
    old, recent = say(session, user("otter sighting last month"), user("otter sighting today"))
    month_ago = timezone.now() - timedelta(days=30)
    Message.objects.filter(pk=old.pk).update(created_at=month_ago)  # written a month ago
    run_index(tenant.team.pk)
    week_ago = (timezone.now() - timedelta(days=7)).isoformat()

    assert texts(search(api, "otter", **{"from": week_ago}), matched=False) == ["otter sighting today"]
    assert texts(search(api, "otter", to=week_ago), matched=False) == ["otter sighting last month"]
    assert search(api, "otter", **{"from": week_ago})["results"][0]["source"]["message_id"] == str(recent.pk)


def test_it_finds_what_was_true_as_of_a_moment(api, tenant):
    facts.fact_add(team=tenant.team, role="hr", subject="alice", predicate="lives in", object="paris")
    between = timezone.now()
    facts.fact_add(team=tenant.team, role="hr", subject="alice", predicate="lives in", object="berlin")
    run_index(tenant.team.pk)

    assert texts(search(api, "where does alice live", as_of=between.isoformat()), matched=False) == [
        "alice lives in paris"
    ]
    assert texts(search(api, "where does alice live"), matched=False) == ["alice lives in berlin"]


def test_it_returns_at_most_limit_results(api, tenant):
    session = new_session(tenant)
    say(session, *[user(f"otter report number {n}") for n in range(8)])
    run_index(tenant.team.pk)

    assert len(search(api, "otter report", limit=3)["results"]) == 3
    assert len(search(api, "otter report")["results"]) == 8  # all, under the default of 10


# --- order ---------------------------------------------------------------------------------------------


class RefusingEmbeddings(FakeEmbeddings):
    """Refuses any document that says "refused": those items are found by their words only."""

    def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        if purpose == "document" and any("refused" in text for text in texts):
            raise EmbeddingPermanentError("input rejected")
        return super().embed(texts, purpose=purpose)


def test_an_item_both_engines_find_outranks_one_that_only_one_finds(api, tenant, settings):
    settings.EMBEDDINGS_BACKEND = f"{__name__}.RefusingEmbeddings"
    session = new_session(tenant)
    say(session, user("kestrel refused"), user("the kestrel nest sits on the north tower of the old mill"))
    run_index(tenant.team.pk)

    results = search(api, "kestrel nest", explain=True)["results"]

    assert [hit["text"] for hit in results][:2] == [
        "the kestrel nest sits on the north tower of the old mill",
        "kestrel refused",
    ]
    both, lexical_only = results[0]["explain"], results[1]["explain"]
    assert both["lexical_rank"] is not None and both["vector_rank"] is not None
    assert lexical_only["lexical_rank"] is not None and lexical_only["vector_rank"] is None


def test_an_invalidated_fact_appears_only_when_asked_for_and_never_above_its_replacement(api, tenant):
    facts.fact_add(team=tenant.team, role="hr", subject="alice", predicate="lives in", object="paris")
    facts.fact_add(team=tenant.team, role="hr", subject="alice", predicate="lives in", object="berlin")
    run_index(tenant.team.pk)
    query = "alice lives in paris"  # every word of the old fact: it is the better match

    assert texts(search(api, query), matched=False) == ["alice lives in berlin"]
    results = search(api, query, include_invalidated=True, explain=True)["results"]
    assert [(hit["text"], hit["invalidated_at"] is not None) for hit in results] == [
        ("alice lives in berlin", False),
        ("alice lives in paris", True),
    ]
    assert results[1]["explain"]["lexical_rank"] == 1  # better by the words, still after the live fact


def test_it_explains_each_score_only_when_asked(api, tenant):
    session = new_session(tenant)
    say(session, user("the otter migration finished"))
    run_index(tenant.team.pk)

    plain = search(api, "otter migration")["results"][0]
    explained = search(api, "otter migration", explain=True)["results"][0]

    assert "explain" not in plain
    assert {
        "lexical_rank",
        "lexical_score",
        "vector_rank",
        "vector_similarity",
        "recency_factor",
        "fused_score",
    } <= set(explained["explain"])
    assert explained["explain"]["lexical_rank"] == 1 and explained["explain"]["vector_rank"] == 1
    assert 0.99 < explained["explain"]["recency_factor"] <= 1
    assert explained["explain"]["fused_score"] == pytest.approx(explained["score"])


def test_a_snippet_marks_the_matched_words(api, tenant):
    session = new_session(tenant)
    (message,) = say(session, user("We moved the Otter service to the new cluster last night."))
    run_index(tenant.team.pk)

    hit = search(api, "where is the otter service running")["results"][0]

    assert "**Otter** **service**" in hit["snippet"]
    assert (hit["kind"], hit["id"], hit["source"]["message_id"], hit["source"]["seq"]) == (
        "message",
        str(message.pk),
        str(message.pk),
        1,
    )


def test_a_hit_names_its_record_entry(api, tenant):
    session = new_session(tenant)
    entry = agent_records.agent_memory_entry_append(
        session=session,
        agent="Coder",
        kind="discovery",
        entry={"type": "code_pattern", "content": "otter uses asyncio"},
    )
    run_index(tenant.team.pk)

    hit = search(api, "otter asyncio", kinds=["record"])["results"][0]

    assert (hit["id"], hit["source"]["record_entry_id"], hit["source"]["agent"]) == (str(entry.pk), entry.pk, "Coder")


# --- bad input -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({}, "query"),
        ({"query": "x" * 1001}, "query"),
        ({"query": "otter", "kinds": ["gossip"]}, "kinds"),
        ({"query": "otter", "kinds": []}, "kinds"),
        ({"query": "otter", "session": "not-a-uuid"}, "session"),
        ({"query": "otter", "from": "2025-02-01T00:00:00Z", "to": "2025-01-01T00:00:00Z"}, "to"),
        ({"query": "otter", "as_of": "yesterday"}, "as_of"),
        ({"query": "otter", "limit": 0}, "limit"),
        ({"query": "otter", "limit": 51}, "limit"),
        ({"query": "otter", "include_invalidated": "perhaps"}, "include_invalidated"),
    ],
)
def test_bad_input_is_refused_naming_the_field(api, body, field):
    response = api.post(URL, body, format="json")

    assert response.status_code == 400, response.content
    assert any(name == field or name.startswith(f"{field}[") for name in response.json()["fields"]), response.json()


def test_a_query_of_1000_characters_is_accepted(api):
    assert api.post(URL, {"query": "otter " * 166 + "otte"}, format="json").status_code == 200


def test_a_session_of_another_team_is_not_found(api, other_tenant):
    theirs = new_session(other_tenant)

    assert api.post(URL, {"query": "otter", "session": str(theirs.pk)}, format="json").status_code == 404
    assert api.post(URL, {"query": "otter", "session": str(uuid.uuid4())}, format="json").status_code == 404


# --- who may search, and what -----------------------------------------------------------------------


def test_a_read_key_may_search(tenant):
    session = new_session(tenant)
    say(session, user("otter readers welcome"))
    run_index(tenant.team.pk)
    reader = APIClient()
    _, raw = tenancy.api_key_create(team=tenant.team, name="reader", role=ApiKey.Role.READ)
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")

    assert texts(search(reader, "otter"), matched=False) == ["otter readers welcome"]


def test_a_search_needs_a_key(db):
    assert APIClient().post(URL, {"query": "otter"}, format="json").status_code in (401, 403)


def test_a_search_never_returns_another_teams_rows(api, tenant):
    other = make_tenant("gamma")
    for owner in (tenant, other):
        session = new_session(owner)
        say(session, user("the shared secret phrase is quokka"))
        facts.fact_add(team=owner.team, role="ops", subject="quokka", predicate="guards", object="vault")
        run_index(owner.team.pk)

    mine = search(api, "quokka", include_invalidated=True, limit=50)
    theirs = search(other.client, "quokka", include_invalidated=True, limit=50)

    mine_sessions = {hit["source"]["session"] for hit in mine["results"]} - {None}
    theirs_sessions = {hit["source"]["session"] for hit in theirs["results"]} - {None}
    assert len(mine["results"]) == len(theirs["results"]) == 2
    assert mine_sessions == {str(s) for s in Session.objects.filter(team=tenant.team).values_list("pk", flat=True)}
    assert theirs_sessions == {str(s) for s in Session.objects.filter(team=other.team).values_list("pk", flat=True)}
    assert {hit["item_id"] for hit in mine["results"]}.isdisjoint(hit["item_id"] for hit in theirs["results"])


def test_pending_items_are_counted_and_found_by_their_words(api, tenant):
    session = new_session(tenant)
    say(session, user("otter indexed already"))
    run_index(tenant.team.pk)
    say(session, user("otter not embedded yet"))
    index._materialize_messages(team_id=tenant.team.pk)  # turned into items, not embedded yet

    body = search(api, "otter", explain=True)
    assert body["pending"] == 1
    assert sorted(texts(body)) == ["otter indexed already", "otter not embedded yet"]


# --- engines --------------------------------------------------------------------------------------------


def test_it_reports_the_engines_it_used(api, tenant):
    body = search(api, "otter")

    lexical = "postgres-fts" if connection.vendor == "postgresql" else "sqlite-fts5"
    vector = "pgvector" if schema.pgvector_installed() else "faiss-ivf"
    assert body["engines"] == {"lexical": lexical, "vector": vector, "model": FakeEmbeddings.model, "vector_error": ""}
    if os.environ.get("MEMSITE_EXPECT_PGVECTOR") == "1":  # set by test_pgvector_engine on its pgvector server
        assert body["engines"]["vector"] == "pgvector"


def test_the_vector_engine_finds_by_meaning_what_the_words_miss(api, tenant):
    session = new_session(tenant)
    say(session, user("relocating the kestrels"), user("an unrelated note about taxes"))
    run_index(tenant.team.pk)

    results = search(api, "relocated kestrel", explain=True)["results"]

    assert results[0]["text"] == "relocating the kestrels"
    assert results[0]["explain"]["vector_rank"] == 1
    if schema.pgvector_installed():
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {schema.TABLE} WHERE embedding_vec IS NOT NULL")  # noqa: S608
            assert cursor.fetchone()[0] == 2  # the job wrote the vectors pgvector searches
