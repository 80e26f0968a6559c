"""The search index follows what memsite remembers: written sources become searchable once the
index job has run, edits are found by their new words only, and every way a source goes (a
deletion, a reset, a revert, a session or team purge) takes its index rows with it."""

from __future__ import annotations

import importlib
from collections.abc import Sequence

import numpy as np
import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.db.models import Q

from experiences_app import services as experiences
from memory_app.agent_records import services as agent_records
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.conversations.models import Message, Session
from memory_app.facts import services as facts
from memory_app.rounds import services as rounds
from memory_app.search import schema
from memory_app.search import services as search
from memory_app.search.embeddings.base import EmbeddingPermanentError, EmbeddingTransientError, Purpose
from memory_app.search.embeddings.fake import FakeEmbeddings
from memory_app.search.engines import Filters
from memory_app.search.models import IndexRun, SearchItem, pending_items
from memory_app.search.selectors import search as search_memory
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import Team
from tests.conftest import Tenant, fill, managed_session

pytestmark = pytest.mark.usefixtures("job_outbox")  # sends are recorded, never reach a broker


def run_index(team_id: int) -> list[str]:
    """Run the team's index job in-process until it has nothing left; returns each run's outcome."""
    outcomes: list[str] = []
    search.index_request(team_id=team_id)
    for _ in range(20):
        run = IndexRun.objects.filter(team_id=team_id, status=IndexRun.Status.PENDING).first()
        if run is None:
            return outcomes
        outcomes.append(search.search_index_execute(run_id=str(run.pk)))
        if outcomes[-1] != "done":
            return outcomes
    raise AssertionError(f"the index job did not settle: {outcomes}")


def found(team_id: int, query: str, **filters: object) -> list[str]:
    """The texts a search finds by their words, best first (the vector engine proposes every
    item of so small an index, near or not)."""
    result = search_memory(filters=Filters(team_id=team_id, **filters), query=query, limit=20)  # type: ignore[arg-type]
    return [hit.item.text for hit in result.hits if hit.scored.ranked.lexical_rank is not None]


def top(team_id: int, query: str, **filters: object) -> str:
    """The text of a search's best result."""
    result = search_memory(filters=Filters(team_id=team_id, **filters), query=query, limit=1)  # type: ignore[arg-type]
    return result.hits[0].item.text


def fts_matches(word: str) -> int:
    """Rows the full-text index itself (not the item table) still answers for `word`."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"SELECT count(*) FROM {schema.TABLE} WHERE search_tsv @@ to_tsquery('english', %s)",  # noqa: S608
                [word],
            )
        else:
            cursor.execute(f"SELECT count(*) FROM {schema.FTS_TABLE} WHERE {schema.FTS_TABLE} MATCH %s", [word])  # noqa: S608
        return int(cursor.fetchone()[0])


def leaves_nothing(word: str) -> bool:
    """No item holds the word, in its text or in its context (a neighbour's words), nor does the full-text index."""
    held = SearchItem.objects.filter(Q(text__icontains=word) | Q(context__icontains=word)).exists()
    return not held and fts_matches(word) == 0


def new_session(tenant: Tenant, **fields: object) -> Session:
    return services.session_create(team=tenant.team, system_prompt="You are helpful.", **fields)  # type: ignore[arg-type]


def say(session: Session, *texts: str, role: str = "user") -> list[Message]:
    result = services.message_append(session=session, messages=[{"role": role, "content": text} for text in texts])
    return list(result.messages)


# --- becoming searchable ------------------------------------------------------------------------------


def test_it_makes_appended_messages_searchable_once_the_job_has_run(tenant, django_capture_on_commit_callbacks):
    session = new_session(tenant)
    with django_capture_on_commit_callbacks(execute=True):
        say(session, "the staging database password rotates every Tuesday")
    assert IndexRun.objects.filter(team=tenant.team, status="pending").exists()  # the append woke the indexer
    assert not SearchItem.objects.filter(team=tenant.team).exists()  # items are the job's work, not the append's

    assert run_index(tenant.team.pk) == ["done"]

    item = SearchItem.objects.get(team=tenant.team)
    assert (item.kind, item.state, item.session_id, item.seq, item.role) == (
        "message",
        "indexed",
        session.pk,
        1,
        "user",
    )
    assert (item.embedding_model, item.embedding_dim) == (FakeEmbeddings.model, FakeEmbeddings.dimension)
    assert np.frombuffer(bytes(item.embedding), dtype="<f4").shape == (FakeEmbeddings.dimension,)
    assert found(tenant.team.pk, "when does the database password rotate?") == [item.text]


def test_it_indexes_a_tool_call_its_output_and_a_text_attachment(tenant):
    session = new_session(tenant)
    call = {"id": "call_1", "type": "function", "function": {"name": "run_migration", "arguments": '{"step": 4}'}}
    services.message_append(
        session=session,
        messages=[
            {"role": "user", "content": "apply the schema change"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "migration 0042 applied in 3 seconds"},
        ],
    )
    round_, _ = rounds.round_create(session=session, user_query="plan the release")
    post = rounds.post_create(
        round_=round_,
        post={
            "message": "here is my plan",
            "send_from": "Planner",
            "send_to": "User",
            "attachment_list": [{"type": "plan", "content": "freeze the branch, then tag the zeppelin release"}],
        },
    )
    run_index(tenant.team.pk)

    assert top(tenant.team.pk, "run_migration step") == 'run_migration({"step": 4})'
    assert found(tenant.team.pk, "migration 0042 applied", kinds=("message",))[0].startswith("migration 0042")
    attachment = SearchItem.objects.get(kind="attachment")
    assert (attachment.attachment_id, attachment.message_id, attachment.role) == (
        post.attachments[0].pk,
        post.message.pk,
        "plan",
    )
    assert found(tenant.team.pk, "zeppelin", kinds=("attachment",)) == [attachment.text]


def test_it_indexes_a_long_message_in_chunks_with_their_positions(tenant):
    session = new_session(tenant)
    words = [f"word{n}" for n in range(600)]
    (message,) = say(session, " ".join(words))
    run_index(tenant.team.pk)

    pieces = list(SearchItem.objects.filter(message=message).order_by("chunk"))
    assert len(pieces) > 2
    assert [piece.chunk for piece in pieces] == list(range(len(pieces)))
    assert all(len(piece.text) <= 1000 and piece.state == "indexed" for piece in pieces)
    assert pieces[0].text.startswith("word0 ") and pieces[-1].text.endswith("word599")
    assert found(tenant.team.pk, "word599") == [pieces[-1].text]


# --- changes ------------------------------------------------------------------------------------------


class CountingEmbeddings(FakeEmbeddings):
    """The fake model, counting the document texts it was asked to embed."""

    embedded: list[str] = []

    def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        if purpose == "document":
            CountingEmbeddings.embedded.extend(texts)
        return super().embed(texts, purpose=purpose)


def test_it_does_not_embed_an_unchanged_text_again(tenant, settings):
    settings.EMBEDDINGS_BACKEND = f"{__name__}.CountingEmbeddings"
    CountingEmbeddings.embedded = []
    fact, _ = facts.fact_add(team=tenant.team, role="ops", subject="backup", predicate="runs_at", object="midnight")
    run_index(tenant.team.pk)
    assert CountingEmbeddings.embedded == ["backup runs at midnight"]

    facts.fact_update(fact=fact, data={"confidence": 0.5})  # a change the sentence does not show
    run_index(tenant.team.pk)

    assert CountingEmbeddings.embedded == ["backup runs at midnight"]
    assert SearchItem.objects.get(fact=fact).state == "indexed"


def test_it_reindexes_an_edited_message(tenant):
    session = new_session(tenant)
    (message,) = say(session, "deploy through the blue cluster")
    run_index(tenant.team.pk)

    services.message_update(message=message, data={"content": "deploy through the green cluster"})
    run_index(tenant.team.pk)

    assert found(tenant.team.pk, "green") == ["deploy through the green cluster"]
    assert found(tenant.team.pk, "blue") == []
    assert leaves_nothing("blue")


def test_it_reindexes_an_edited_fact(tenant):
    fact, _ = facts.fact_add(team=tenant.team, role="ops", subject="deploys", predicate="use", object="jenkins")
    run_index(tenant.team.pk)

    facts.fact_update(fact=fact, data={"object": "buildkite"})
    run_index(tenant.team.pk)

    assert found(tenant.team.pk, "buildkite") == ["deploys use buildkite"]
    assert leaves_nothing("jenkins")


def test_it_reindexes_an_edited_experience(tenant):
    experience = experiences.experience_create(
        team=tenant.team,
        exp_id="exp-1",
        who=["Planner"],
        when="when a flaky test blocks the merge",
        what="rerun it",
        actor="t",
    )
    run_index(tenant.team.pk)
    assert found(tenant.team.pk, "flaky", kinds=("experience",)) == ["when a flaky test blocks the merge"]

    experiences.experience_update(
        experience=experience, data={"when": "when a slow query times out"}, actor="test", note="reworded"
    )
    run_index(tenant.team.pk)

    assert found(tenant.team.pk, "slow query", kinds=("experience",)) == ["when a slow query times out"]
    assert leaves_nothing("flaky")


def test_it_reindexes_an_updated_agent_record_attempt(tenant):
    session = new_session(tenant)
    entry = agent_records.agent_memory_entry_append(
        session=session,
        agent="Coder",
        kind="attempt",
        entry={"description": "find the crash", "approach": "bisect the parser with printf"},
    )
    run_index(tenant.team.pk)
    assert found(tenant.team.pk, "printf", kinds=("record",))

    agent_records.agent_memory_attempt_update(
        session=session,
        agent="Coder",
        attempt_id=entry.data["id"],
        changes={"approach": "bisect the parser with a debugger"},
    )
    run_index(tenant.team.pk)

    (text,) = found(tenant.team.pk, "debugger", kinds=("record",))
    assert "bisect the parser with a debugger" in text
    assert SearchItem.objects.get(kind="record").record_entry_id == entry.pk
    assert leaves_nothing("printf")


# --- deletions and purges -----------------------------------------------------------------------------


def test_deleting_a_message_leaves_no_index_row(tenant):
    session = new_session(tenant)
    (message, _) = say(session, "the vault key is kept in quokka", "thanks")
    run_index(tenant.team.pk)
    assert found(tenant.team.pk, "quokka")

    services.message_delete(message=message)

    assert found(tenant.team.pk, "quokka") == []
    assert leaves_nothing("quokka")


def test_resetting_a_session_leaves_no_index_row(tenant):
    session = new_session(tenant)
    say(session, "the vault key is kept in quokka")
    run_index(tenant.team.pk)

    deleted = services.session_reset(session=session)

    assert deleted == 1  # the messages, not the index rows that went with them
    assert not SearchItem.objects.filter(session=session).exists()
    assert leaves_nothing("quokka")


def test_reverting_a_compaction_takes_its_summary_out_of_the_index(db):
    session = managed_session(threshold=300)
    fill(session, turns=8)
    run, _ = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    assert compaction.compaction_execute(run_id=str(run.pk)) == "done"
    run_index(session.team_id)
    assert SearchItem.objects.filter(kind="summary", compaction_run=run, state="indexed").exists()

    run.refresh_from_db()
    compaction.compaction_revert(run=run)

    assert not SearchItem.objects.filter(kind="summary").exists()
    assert found(session.team_id, "question", kinds=("summary",)) == []


def test_deleting_a_session_leaves_no_index_row(tenant, django_capture_on_commit_callbacks):
    session = new_session(tenant)
    say(session, "the vault key is kept in quokka")
    facts.fact_add(team=tenant.team, role="ops", subject="quokka", predicate="guards", object="vault", session=session)
    agent_records.agent_memory_entry_append(
        session=session,
        agent="Coder",
        kind="discovery",
        entry={"type": "code_pattern", "content": "quokka vault layout"},
    )
    run_index(tenant.team.pk)
    assert set(SearchItem.objects.values_list("kind", flat=True)) == {"message", "fact", "record"}

    with django_capture_on_commit_callbacks(execute=True):
        services.session_delete(session=session)

    assert leaves_nothing("quokka")


def test_deleting_a_team_leaves_no_index_row(tenant, django_capture_on_commit_callbacks):
    session = new_session(tenant)
    say(session, "the vault key is kept in quokka")
    experiences.experience_create(
        team=tenant.team, exp_id="exp-q", who=[], when="when the quokka vault is locked", what="ask ops", actor="test"
    )
    run_index(tenant.team.pk)

    with django_capture_on_commit_callbacks(execute=True):
        tenancy.team_delete(team=Team.objects.get(pk=tenant.team.pk))

    assert not SearchItem.objects.exists()
    assert leaves_nothing("quokka")


def test_deleting_an_experience_leaves_no_index_row(tenant):
    experience = experiences.experience_create(
        team=tenant.team, exp_id="exp-q", who=[], when="when the quokka vault is locked", what="ask ops", actor="test"
    )
    run_index(tenant.team.pk)

    experiences.experience_delete(experience=experience)

    assert leaves_nothing("quokka")


# --- the job's discipline -----------------------------------------------------------------------------


class FlakyEmbeddings(FakeEmbeddings):
    """Fails its first `failures` document calls as a rate-limited server would."""

    failures = 0

    def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        if purpose == "document" and FlakyEmbeddings.failures > 0:
            FlakyEmbeddings.failures -= 1
            raise EmbeddingTransientError("rate limited", retry_after=7)
        return super().embed(texts, purpose=purpose)


class PickyEmbeddings(FakeEmbeddings):
    """Refuses any text that mentions "forbidden", as a server rejecting an input would."""

    def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        if any("forbidden" in text for text in texts):
            raise EmbeddingPermanentError("input rejected by the embeddings server")
        return super().embed(texts, purpose=purpose)


def test_the_job_retries_a_transient_embedding_error(tenant, settings, job_outbox):
    settings.EMBEDDINGS_BACKEND = f"{__name__}.FlakyEmbeddings"
    FlakyEmbeddings.failures = 1
    session = new_session(tenant)
    say(session, "the retry path works")
    search.index_request(team_id=tenant.team.pk)
    run = IndexRun.objects.get(team=tenant.team, status="pending")

    assert search.search_index_execute(run_id=str(run.pk)).startswith("retry-in-7")

    run.refresh_from_db()
    assert (run.status, run.attempts, run.error) == ("pending", 1, "rate limited")
    assert [(sent.job_id, sent.countdown) for sent in job_outbox if sent.task == search.JOB.task][-1] == (
        str(run.pk),
        7,
    )
    IndexRun.objects.filter(pk=run.pk).update(queued_at=run.created_at)  # the backoff has passed
    assert search.search_index_execute(run_id=str(run.pk)) == "done"
    assert SearchItem.objects.get(team=tenant.team).state == "indexed"


def test_the_job_marks_a_refused_text_failed_and_indexes_the_others(tenant, settings):
    settings.EMBEDDINGS_BACKEND = f"{__name__}.PickyEmbeddings"
    session = new_session(tenant)
    say(session, "an ordinary sentence", "a forbidden sentence", "another ordinary one")

    assert run_index(tenant.team.pk) == ["done"]

    states = dict(SearchItem.objects.values_list("text", "state"))
    assert states == {
        "an ordinary sentence": "indexed",
        "a forbidden sentence": "failed",
        "another ordinary one": "indexed",
    }
    assert SearchItem.objects.get(state="failed").error == "input rejected by the embeddings server"
    run = IndexRun.objects.get(team=tenant.team)
    assert (run.items_indexed, run.items_failed) == (2, 1)
    # Still found by its words, first (the reply after it is found through it, as the turn it answers).
    assert found(tenant.team.pk, "forbidden")[0] == "a forbidden sentence"


def test_the_sweep_wakes_a_team_whose_index_run_was_lost(tenant):
    session = new_session(tenant)
    say(session, "nobody sent the job for this")
    search.index_request(team_id=tenant.team.pk)
    IndexRun.objects.filter(team=tenant.team).delete()  # the run was lost before any worker saw it

    assert search.search_index_sweep()["woken"] == 1

    run = IndexRun.objects.get(team=tenant.team, status="pending")
    assert run.trigger == "sweep"
    assert search.search_index_execute(run_id=str(run.pk)) == "done"
    assert found(tenant.team.pk, "nobody sent the job") == ["nobody sent the job for this"]
    assert search.search_index_sweep()["woken"] == 0


def test_the_backlog_is_read_from_its_partial_index_not_the_whole_team(tenant):
    """Every index run and every search asks whether the team has items waiting for a vector:
    at 200k items, reading the team's items instead of the small backlog index cost ~0.7 s."""
    session = new_session(tenant)
    say(session, "the vault key is kept in quokka")
    sql, params = pending_items(tenant.team.pk).query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("EXPLAIN " + sql, params)
        else:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        plan = " ".join(str(part) for row in cursor.fetchall() for part in row)
    assert "search_item_backlog" in plan, plan
    assert search.has_backlog(tenant.team.pk)
    run_index(tenant.team.pk)
    assert not search.has_backlog(tenant.team.pk)


@pytest.mark.django_db
def test_items_the_former_offline_model_embedded_are_embedded_again_after_the_upgrade(tenant: Tenant) -> None:
    """The upgrade's migration marks the former offline model's vectors pending (a search compares
    only the configured model's), and the next index run embeds them with the configured model;
    another model's vectors are left alone."""
    upgrade = importlib.import_module("memory_app.migrations.0031_reembed_offline_int8_vectors")
    session = services.session_create(team=tenant.team)
    services.message_append(
        session=session,
        messages=[{"role": "user", "content": "the quokka vault opens at dawn"}, {"role": "user", "content": "noted"}],
    )
    run_index(tenant.team.pk)
    old, kept = SearchItem.objects.filter(team=tenant.team).order_by("seq")
    SearchItem.objects.filter(pk=old.pk).update(embedding_model=upgrade.FORMER_OFFLINE_MODEL)
    SearchItem.objects.filter(pk=kept.pk).update(embedding_model="text-embedding-3-small")

    upgrade.embed_again(django_apps, connection.schema_editor())

    old.refresh_from_db()
    kept.refresh_from_db()
    assert (old.state, kept.state) == (SearchItem.State.PENDING, SearchItem.State.INDEXED)
    assert run_index(tenant.team.pk) == ["done"]
    old.refresh_from_db()
    assert (old.state, old.embedding_model) == (SearchItem.State.INDEXED, FakeEmbeddings.model)
