"""PostgreSQL's postings: one row per live item and word, kept by the database itself from the item
table, and the lexical engine reading a word's newest matches from them. What is kept must always be
what the item table says (an edit, an invalidation, a delete, a truncate), and a search through the
postings must rank exactly as one through the full-text index over the whole team."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.utils import timezone

from memory_app.conversations import services
from memory_app.conversations.models import Message, Session
from memory_app.search import engines, schema
from memory_app.search.engines import Filters
from memory_app.search.models import SearchItem, SearchKind
from tests.conftest import Tenant
from tests.memory_app.search.test_indexing import run_index

pytestmark = [pytest.mark.usefixtures("job_outbox"), pytest.mark.postgresql]

START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def said(tenant: Tenant, text: str, hours: int, session: Session | None = None) -> Message:
    session = session or services.session_create(team=tenant.team)
    message = {"role": "user", "content": text, "occurred_at": START + timedelta(hours=hours)}
    return services.message_append(session=session, messages=[message]).messages[0]


def postings(item_id: int) -> dict[str, tuple[int, int]]:
    """The item's postings: word -> (places in its text, places in its context)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT lexeme, own, context FROM {schema.POSTINGS_TABLE} WHERE item_id = %s",  # noqa: S608
            [item_id],
        )
        return {lexeme: (own, context) for lexeme, own, context in cursor.fetchall()}


def item_of(message: Message) -> SearchItem:
    return SearchItem.objects.get(message_id=message.pk)


def test_an_items_postings_follow_its_text_its_invalidation_and_its_delete(tenant: Tenant) -> None:
    session = services.session_create(team=tenant.team)
    question = said(tenant, "which bucket holds the deploy logs?", hours=0, session=session)
    answer = said(tenant, "the deploy logs go to the bucket zephyrine, deploy after deploy", hours=1, session=session)
    run_index(tenant.team.pk)
    item = item_of(answer)

    kept = postings(item.pk)
    assert kept["zephyrin"] == (1, 0)
    assert kept["deploy"][0] == 3  # three places in its own text
    assert kept["bucket"][0] == 1 and kept["bucket"][1] >= 1  # and in the turn it answers (its context)

    SearchItem.objects.filter(pk=item.pk).update(text="the logs moved to the bucket quillfeather")
    assert "zephyrin" not in postings(item.pk)
    assert postings(item.pk)["quillfeath"] == (1, 0)

    SearchItem.objects.filter(pk=item.pk).update(invalidated_at=timezone.now())
    assert postings(item.pk) == {}
    SearchItem.objects.filter(pk=item.pk).update(invalidated_at=None)
    assert "quillfeath" in postings(item.pk)

    question_item = item_of(question)
    session.delete()  # its items go by CASCADE, their postings with them
    assert postings(item.pk) == {} and postings(question_item.pk) == {}


def test_the_indexers_writes_leave_the_postings_alone(tenant: Tenant) -> None:
    message = said(tenant, "the cello lesson moved to thursday", hours=0)
    run_index(tenant.team.pk)
    kept = places()
    assert kept

    # Embedded again: the item's state, vector and time of indexing are written twice.
    SearchItem.objects.filter(message_id=message.pk).update(state=SearchItem.State.PENDING)
    run_index(tenant.team.pk)

    assert item_of(message).state == SearchItem.State.INDEXED
    assert places() == kept  # not rewritten: the same rows, where they were


def places() -> list[str]:
    """Where each posting row lies in the table (a rewritten row moves)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT ctid::text FROM {schema.POSTINGS_TABLE} ORDER BY ctid")  # noqa: S608
        return [place for (place,) in cursor.fetchall()]


@pytest.mark.django_db(transaction=True)
def test_a_truncated_item_table_leaves_no_postings(tenant: Tenant) -> None:
    said(tenant, "the cello lesson moved to thursday", hours=0)
    run_index(tenant.team.pk)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {schema.POSTINGS_TABLE}")  # noqa: S608
        assert cursor.fetchone()[0] > 0
        cursor.execute(f"TRUNCATE {schema.TABLE} CASCADE")
        cursor.execute(f"SELECT count(*) FROM {schema.POSTINGS_TABLE}")  # noqa: S608
        assert cursor.fetchone()[0] == 0


def whole_team(filters: Filters, terms: list[str], limit: int) -> list[tuple[int, float]]:
    """The full-text index's ranking over every match of the team (no window, no postings)."""
    lexemes = engines._postgres_lexemes(terms)
    team = engines._postgres_team_statistics(filters.team_id)
    windows = [None] * len(lexemes)
    ranked, _ = engines._postgres_ranked(filters, lexemes, windows, windows, team, 2000, limit)
    return ranked


def test_a_search_through_the_postings_ranks_as_one_through_the_full_text_index(tenant: Tenant) -> None:
    session = services.session_create(team=tenant.team)
    texts = [
        "the deploy of the billing service failed twice",
        "who owns the billing service?",
        "Rosa owns billing, she fixed the deploy script",
        "lunch was great, the deploy can wait",
        "the rollback of the deploy finished at noon",
        "billing invoices are sent on the first",
        "nothing about it here",
    ]
    for hour, text in enumerate(texts * 3):
        said(tenant, text, hours=hour, session=session)
    run_index(tenant.team.pk)
    filters = Filters(team_id=tenant.team.pk)
    engines._word_counts.clear()

    for terms in (["deploy"], ["billing", "deploy"], ["who", "owns", "billing"], ["rollback", "noon", "rosa"]):
        through_postings = engines.lexical(filters, terms, 40)
        reference = whole_team(filters, terms, 40)
        assert [item_id for item_id, _ in through_postings] == [item_id for item_id, _ in reference], terms
        for (_, score), (_, expected) in zip(through_postings, reference, strict=True):
            assert score == pytest.approx(expected, rel=1e-6)  # ts_rank_cd's weights are float4


def test_the_postings_keep_a_searchs_kinds_and_times(tenant: Tenant) -> None:
    early = said(tenant, "the deploy window opens at nine", hours=0)
    late = said(tenant, "the deploy window closes at five", hours=48)
    run_index(tenant.team.pk)
    team = tenant.team.pk

    def found(filters: Filters) -> set[int]:
        ids = [item_id for item_id, _ in engines.lexical(filters, ["deploy"], 40)]
        return set(SearchItem.objects.filter(pk__in=ids).values_list("message_id", flat=True))

    assert found(Filters(team_id=team)) == {early.pk, late.pk}
    assert found(Filters(team_id=team, since=START + timedelta(hours=24))) == {late.pk}
    assert found(Filters(team_id=team, until=START + timedelta(hours=24))) == {early.pk}
    assert found(Filters(team_id=team, kinds=(SearchKind.MESSAGE,))) == {early.pk, late.pk}
    assert found(Filters(team_id=team, kinds=(SearchKind.FACT,))) == set()
    # An invalidated item is found only by a search that asks for them (the full-text index's path).
    item_of(early).__class__.objects.filter(message_id=early.pk).update(invalidated_at=timezone.now())
    assert found(Filters(team_id=team)) == {late.pk}
    assert found(Filters(team_id=team, include_invalidated=True)) == {early.pk, late.pk}


def test_the_upgrade_posts_the_live_items_already_there(tenant: Tenant) -> None:
    """The migration that adds the postings posts every live item the table holds, as the
    triggers would have: an invalidated item is left out."""
    upgrade = importlib.import_module("memory_app.migrations.0032_search_postings")
    kept = said(tenant, "the deploy logs go to the bucket zephyrine", hours=0)
    dropped = said(tenant, "the old bucket was quillfeather", hours=1)
    run_index(tenant.team.pk)
    SearchItem.objects.filter(message_id=dropped.pk).update(invalidated_at=timezone.now())
    posted_by_triggers = postings(item_of(kept).pk)
    with connection.schema_editor() as editor:
        upgrade.uninstall(django_apps, editor)  # as before the upgrade: no postings, no triggers
    said(tenant, "written before the upgrade too: zephyrine again", hours=2)
    run_index(tenant.team.pk)

    with connection.schema_editor() as editor:
        upgrade.install(django_apps, editor)

    assert postings(item_of(kept).pk) == posted_by_triggers
    assert postings(item_of(dropped).pk) == {}
    ranked = engines.lexical(Filters(team_id=tenant.team.pk), ["zephyrine"], 40)
    assert len(ranked) == 2
