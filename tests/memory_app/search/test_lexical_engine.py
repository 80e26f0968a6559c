"""The lexical engine's bound on what it ranks: past LEXICAL_RANKED_MATCHES matching items it ranks
only the newest, yet a rare word's older matches all stay in, and another team's items neither
show nor use up the bound. The bound is lowered here so a few messages exceed it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

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


def found(tenant: Tenant, *terms: str, role: str | None = None) -> list[int]:
    """The message ids the lexical engine returns for the terms, best first."""
    run_index(tenant.team.pk)
    ranked = engines.lexical(Filters(team_id=tenant.team.pk, role=role), list(terms), 40)
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


# --- PostgreSQL's windows ---------------------------------------------------------------------------
# A search the postings cannot serve (here: one filtered by role, a column of the item) uses the
# full-text index: a word's newest matches are looked for among the team's newest items (its window,
# sized by the share of items the word matched before); a window that held too few is widened.
# Whatever the windows, the items ranked must be those of a search over the whole team. The
# timeline's step is lowered here so a few dozen messages make many windows.

# PostgreSQL's own engine code: deselected where the tests' database is SQLite (tests/conftest.py).
postgres_only = pytest.mark.postgresql


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[list[int | None]]:
    """The windows of each statement the PostgreSQL engine runs (a step of the timeline is one item;
    None: the whole team). The table's statistics are left out, and the shares other tests' searches
    remembered: a word's first search spans the team."""
    monkeypatch.setattr(engines, "TIMELINE_STEP", 1)
    monkeypatch.setattr(engines, "_table_share", lambda lexeme: None)
    monkeypatch.setattr(engines, "_word_shares", {})
    windows: list[list[int | None]] = []
    ranked = engines._postgres_ranked

    def spy(filters: Filters, lexemes: Sequence[str], steps: Sequence[int | None], *args: Any) -> Any:
        windows.append(list(steps))
        return ranked(filters, lexemes, steps, *args)

    monkeypatch.setattr(engines, "_postgres_ranked", spy)
    return windows


def lexeme(word: str) -> str:
    (stemmed,) = engines._postgres_lexemes([word])
    return stemmed


@postgres_only
def test_a_windowed_search_finds_the_same_items_as_one_over_the_whole_team(
    tenant: Tenant, searches: list[list[int | None]]
) -> None:
    # Every third message of 60 says "deploy", a few say "rollback" too: each word's matches are
    # spread over the whole timeline, far more of them than the RANKED newest ones.
    for hour in range(60):
        if hour % 3 == 0:
            said(tenant, f"deploy {hour} went out" + (" after a rollback" if hour % 9 == 0 else ""), hours=hour)
        else:
            said(tenant, f"lunch order {hour}", hours=hour)

    whole_team = found(tenant, "deploy", role="user")  # not searched before: the whole team, and its share remembered
    windowed = found(tenant, "deploy", role="user")
    engines._word_shares.clear()
    both_whole = found(tenant, "deploy", "rollback", role="user")
    both_windowed = found(tenant, "deploy", "rollback", role="user")

    assert searches[0] == [None]
    assert searches[1] != [None]  # a window of the newest items, one statement: it held enough
    assert windowed == whole_team  # one word: the same items, in the same order
    assert len(whole_team) == RANKED
    assert searches[2] == [None, None]
    assert searches[3][0] is not None  # "deploy" in a window, "rollback" (rarer) over the whole team
    assert len(searches) == 4
    assert set(both_windowed) == set(both_whole)


@postgres_only
def test_a_window_that_held_too_few_matches_is_widened_until_it_holds_enough(
    tenant: Tenant, searches: list[list[int | None]]
) -> None:
    # "deploy" in every third message: a third of the team, not the nine in ten remembered below.
    for hour in range(60):
        said(tenant, f"deploy {hour} went out" if hour % 3 == 0 else f"lunch order {hour}", hours=hour)
    whole_team = found(tenant, "deploy", role="user")
    filters = Filters(team_id=tenant.team.pk, role="user")
    engines._remember_share(filters, lexeme("deploy"), 0.9)

    widened = found(tenant, "deploy", role="user")

    first, second = searches[1:]
    assert first[0] is not None and second[0] is not None  # widened, yet short of the whole team
    assert second[0] >= 2 * first[0]
    assert widened == whole_team
    # The widened window's share is remembered: the next search needs one statement.
    found(tenant, "deploy", role="user")
    assert len(searches) == 4


@postgres_only
def test_a_word_whose_matches_are_all_old_is_searched_over_the_whole_team_at_last(
    tenant: Tenant, searches: list[list[int | None]]
) -> None:
    # A burst of "zephyrine" long ago, none since: no window of the newest items holds any.
    old = [said(tenant, f"zephyrine build {hour}", hours=hour) for hour in range(RANKED + 2)]
    for hour in range(RANKED + 2, 60):
        said(tenant, f"lunch order {hour}", hours=hour)
    engines._remember_share(Filters(team_id=tenant.team.pk, role="user"), lexeme("zephyrine"), 0.5)

    ids = found(tenant, "zephyrine", role="user")

    assert searches[0][0] is not None
    assert searches[-1] == [None]
    assert set(ids) == {message.pk for message in old[-RANKED:]}
