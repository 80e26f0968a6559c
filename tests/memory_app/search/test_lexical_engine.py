"""The lexical engine's bound on what it ranks: past LEXICAL_RANKED_MATCHES matching items it ranks
only the newest, yet a rare word's older matches all stay in, and another team's items neither
show nor use up the bound. The bound is lowered here so a few messages exceed it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_app.conversations import services
from memory_app.conversations.models import Message
from memory_app.search import engines
from memory_app.search.engines import Filters
from memory_app.search.models import SearchItem
from tests.conftest import Tenant
from tests.memory_app.search.test_indexing import run_index

pytestmark = pytest.mark.usefixtures("job_outbox")

RANKED = 8
START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _small_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines, "LEXICAL_RANKED_MATCHES", RANKED)


def said(tenant: Tenant, text: str, hours: int) -> Message:
    """One message in a session of its own (so no turn lends its words to another's context),
    said `hours` after START: later messages are newer on both databases."""
    session = services.session_create(team=tenant.team)
    message = {"role": "user", "content": text, "occurred_at": START + timedelta(hours=hours)}
    return services.message_append(session=session, messages=[message]).messages[0]


def found(tenant: Tenant, *terms: str) -> list[int]:
    """The message ids the lexical engine returns for the terms, best first."""
    run_index(tenant.team.pk)
    ranked = engines.lexical(Filters(team_id=tenant.team.pk), list(terms), 40)
    items = dict(SearchItem.objects.filter(pk__in=[item_id for item_id, _ in ranked]).values_list("pk", "message_id"))
    return [items[item_id] for item_id, _ in ranked]


def test_a_rare_words_old_match_is_found_however_many_newer_items_match_a_common_word(tenant: Tenant) -> None:
    old = said(tenant, "The deploy key for zephyrine lives in the vault", hours=0)
    newer = [said(tenant, f"deploy number {n} went out", hours=1 + n) for n in range(3 * RANKED)]

    ids = found(tenant, "zephyrine", "deploy")

    assert ids[0] == old.pk
    assert newer[-1].pk in ids


def test_only_the_newest_matches_of_a_common_word_are_ranked_past_the_bound(tenant: Tenant) -> None:
    oldest = said(tenant, "deploy of the first release", hours=0)
    newer = [said(tenant, f"deploy number {n} went out", hours=1 + n) for n in range(3 * RANKED)]

    ids = found(tenant, "deploy")

    assert oldest.pk not in ids
    assert newer[-1].pk in ids
    assert len(ids) <= RANKED


def test_below_the_bound_every_match_is_ranked_by_bm25(tenant: Tenant) -> None:
    one_word = said(tenant, "the cello lesson moved", hours=0)
    both_words = said(tenant, "the cello lesson moved to thursday evening", hours=1)
    unrelated = said(tenant, "lunch was great", hours=2)

    ids = found(tenant, "cello", "thursday")

    assert ids == [both_words.pk, one_word.pk]
    assert unrelated.pk not in ids


def test_another_teams_newer_matches_neither_show_nor_use_up_the_bound(tenant: Tenant, other_tenant: Tenant) -> None:
    ours = said(tenant, "deploy of the billing service", hours=0)
    theirs = [said(other_tenant, f"deploy number {n} went out", hours=1 + n) for n in range(3 * RANKED)]
    run_index(other_tenant.team.pk)

    ids = found(tenant, "deploy")

    assert ids == [ours.pk]
    assert not {message.pk for message in theirs} & set(ids)
