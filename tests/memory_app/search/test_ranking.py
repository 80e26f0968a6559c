"""What recall ranks first, on conversations between people: a reply is found through the turn it
answers yet points at itself, a strong word match is never pushed out by short small talk, the
speaker a question names is preferred, a time the question names narrows the search, an image's
caption is searchable, and a turn's speaker label is not what it is embedded by."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from memory_app.conversations import services
from memory_app.conversations.models import Message, Session
from memory_app.search import fusion
from memory_app.search.embeddings import get_embedder
from memory_app.search.engines import Filters
from memory_app.search.models import SearchItem
from memory_app.search.selectors import SearchResult
from memory_app.search.selectors import search as search_memory
from tests.conftest import Tenant
from tests.memory_app.search.test_indexing import run_index

pytestmark = pytest.mark.usefixtures("job_outbox")


def conversation(tenant: Tenant, *turns: tuple[str, str], occurred_at: datetime | None = None) -> list[Message]:
    """A session of (speaker, text) turns, each written "<speaker>: <text>" as chat exports do."""
    session: Session = services.session_create(team=tenant.team)
    when = {"occurred_at": occurred_at} if occurred_at else {}
    messages = [{"role": "user", "name": who, "content": f"{who}: {text}", **when} for who, text in turns]
    return list(services.message_append(session=session, messages=messages).messages)


def ask(tenant: Tenant, query: str, limit: int = 10) -> SearchResult:
    run_index(tenant.team.pk)
    return search_memory(filters=Filters(team_id=tenant.team.pk, kinds=("message",)), query=query, limit=limit)


def test_a_reply_is_found_through_the_turn_it_answers_and_the_hit_is_the_reply(tenant: Tenant) -> None:
    question, answer, _ = conversation(
        tenant,
        ("Ana", "How did the dermatologist appointment go?"),
        ("Ben", "She thinks it is eczema and prescribed a steroid cream twice daily."),
        ("Ana", "Good to hear, take care!"),
    )

    hits = ask(tenant, "dermatologist appointment").hits

    found = {hit.item.message_id: hit for hit in hits}
    assert answer.pk in found, "the reply holds none of the words, yet is found through the question"
    reply = found[answer.pk]
    assert (reply.item.seq, reply.source()["message_id"]) == (answer.seq, str(answer.pk))
    assert "dermatologist" not in reply.snippet  # the hit shows the reply's own words, not its context
    assert hits[0].item.message_id == question.pk  # the turn holding the words themselves comes first


def test_deleting_a_turn_takes_its_words_out_of_the_reply_found_through_it(tenant: Tenant) -> None:
    question, answer = conversation(
        tenant, ("Ana", "What is the wifi password at the cabin?"), ("Ben", "It is written under the router.")
    )
    assert answer.pk in {hit.item.message_id for hit in ask(tenant, "cabin wifi password").hits}

    services.message_delete(message=question)

    assert ask(tenant, "cabin wifi password").hits == []
    assert not SearchItem.objects.filter(context__icontains="cabin").exists()


def test_short_small_talk_found_by_meaning_does_not_push_out_a_strong_word_match(tenant: Tenant) -> None:
    filler = [("Ana", "Cool! What did it look like?"), ("Ben", "Haha nice."), ("Ana", "Wow, really?")] * 5
    turns = conversation(tenant, *filler, ("Ben", "We adopted a grey kitten from the shelter and named it Pepper."))

    hits = ask(tenant, "What did the kitten from the shelter look like?", limit=3).hits

    assert hits[0].item.message_id == turns[-1].pk
    assert all(hit.explain()["substance"] < hits[0].explain()["substance"] for hit in hits[1:])


def test_an_identifier_finds_the_turn_that_holds_it_first_however_alike_the_others_look(tenant: Tenant) -> None:
    """Error codes, tickets, commits: letters and digits the embedding model reads as noise (every
    "ERR4xxx" looks alike to it), so only the exact word can tell which turn holds one."""
    others = [
        ("Ana", f"Sorry I went quiet, we were moving house and the kids were sick. ERR{4000 + n}") for n in range(12)
    ]
    turns = conversation(tenant, *others, ("Ben", "Cool! What did you do there? ERR4059"))

    for query in ("ERR4059", "what was ERR4059 about?"):
        hits = ask(tenant, query, limit=3).hits

        assert hits[0].item.message_id == turns[-1].pk, query
        assert hits[0].explain()["holds_identifiers"] is True
        assert not any(hit.explain()["holds_identifiers"] for hit in hits[1:])


def test_identifiers_are_words_of_letters_and_digits_and_their_holder_is_ordered_first() -> None:
    assert fusion.identifiers(["err4059", "v2", "2023", "kitten", "8e37d1d", "mp3"]) == ["err4059", "8e37d1d", "mp3"]
    assert fusion.holds_all("Deploy failed: ERR4059 on staging", ["err4059"])
    assert not fusion.holds_all("Deploy failed: ERR40591 on staging", ["err4059"])  # whole words only

    def candidate(item_id: int, relevance: float, holds: bool) -> fusion.Scored:
        features = fusion.Features(
            lexical_share=1.0 if holds else 0.0,
            coverage=1.0 if holds else 0.0,
            best_coverage=1.0,
            similarity=0.3 if holds else 0.8,
            similarity_gap=-0.5 if holds else 0.0,
            substance=0.25 if holds else 1.0,
            speaker_named=False,
            in_time=False,
            holds_identifiers=holds,
        )
        ranked = fusion.Ranked(item_id, 1 if holds else None, 4.5 if holds else None, None if holds else 1, None)
        return fusion.Scored(ranked, features, relevance, 1.0, 1.0, relevance, live=True)

    # Found by meaning, a turn that looks like the identifier scores higher than the one holding it.
    ordered = fusion.order([candidate(1, 0.0038, holds=False), candidate(2, 0.0018, holds=True)])
    assert [scored.ranked.item_id for scored in ordered] == [2, 1]


def test_a_question_naming_a_speaker_prefers_that_speakers_turn(tenant: Tenant) -> None:
    ana, ben = conversation(
        tenant,
        ("Ana", "I started learning the cello last month, lessons on Tuesdays."),
        ("Ben", "I started learning the cello last month, lessons on Tuesdays."),
    )

    hits = ask(tenant, "When does Ben have cello lessons?").hits

    assert [hit.item.message_id for hit in hits[:2]] == [ben.pk, ana.pk]
    assert (hits[0].explain()["speaker_named"], hits[1].explain()["speaker_named"]) == (True, False)


def test_a_time_the_question_names_finds_what_was_said_then(tenant: Tenant) -> None:
    march = conversation(
        tenant, ("Ana", "Signed up for surf lessons today!"), occurred_at=datetime(2023, 3, 25, tzinfo=UTC)
    )
    for month in (5, 6, 7, 8):  # later turns of Ana's that match the question's words as well
        conversation(
            tenant, ("Ana", "What a week, so much happened at work."), occurred_at=datetime(2023, month, 2, tzinfo=UTC)
        )

    result = ask(tenant, "What did Ana do in March 2023?", limit=3)

    assert result.time_window is not None
    assert (result.time_window.start, result.time_window.end) == (
        datetime(2023, 3, 1, tzinfo=UTC),
        datetime(2023, 4, 1, tzinfo=UTC),
    )
    assert result.hits[0].item.message_id == march[0].pk
    assert result.hits[0].explain()["in_time"] is True
    assert result.terms == ["ana"]  # the time is not matched as words


def test_last_month_is_read_against_the_conversations_own_dates(tenant: Tenant) -> None:
    """An imported history from 2023: "last July" is July 2023, the latest July before its last
    message, not the July before today."""
    july = conversation(tenant, ("Ana", "We went hiking in the Alps."), occurred_at=datetime(2023, 7, 14, tzinfo=UTC))
    conversation(tenant, ("Ana", "We went hiking in the Dolomites."), occurred_at=datetime(2023, 9, 3, tzinfo=UTC))

    result = ask(tenant, "Where did Ana go hiking last July?", limit=2)

    assert result.time_window is not None and result.time_window.start == datetime(2023, 7, 1, tzinfo=UTC)
    assert result.hits[0].item.message_id == july[0].pk


def test_an_images_caption_is_searchable(tenant: Tenant) -> None:
    session = services.session_create(team=tenant.team)
    photo = {"url": "https://example.test/p.jpg", "caption": "a red canoe on a misty lake"}
    services.message_append(
        session=session,
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "Look!"}, {"type": "image_url", "image_url": photo}]}
        ],
    )

    hits = ask(tenant, "canoe").hits

    assert len(hits) == 1 and "[image: a red canoe on a misty lake]" in hits[0].item.text


def test_a_turn_is_embedded_without_its_speaker_label_and_found_by_the_name_in_words(tenant: Tenant) -> None:
    (turn,) = conversation(tenant, ("Ana", "the harbour ferry leaves at noon"))
    run_index(tenant.team.pk)

    item = SearchItem.objects.get(message=turn)
    stored = np.frombuffer(bytes(item.embedding), dtype="<f4")
    (unlabelled,) = get_embedder().embed(["the harbour ferry leaves at noon"], purpose="document")
    assert np.allclose(stored, np.asarray(unlabelled, dtype="<f4"))
    assert ask(tenant, "Ana").hits[0].item.message_id == turn.pk


def test_a_speaker_given_only_as_name_is_matched_by_words(tenant: Tenant) -> None:
    session = services.session_create(team=tenant.team)
    (turn,) = services.message_append(
        session=session, messages=[{"role": "user", "name": "Ingrid", "content": "the ferry leaves at noon"}]
    ).messages

    hits = ask(tenant, "Ingrid").hits

    assert [hit.item.message_id for hit in hits] == [turn.pk]
    assert hits[0].item.context == "Ingrid"
