"""Fact extraction requests: the prompt a real LLM gets, and the offline backend's rule-based answer."""

from __future__ import annotations

import json

import pytest

from memory_app.facts.output import MAX_TRIPLES, Triple, parse_fact_output
from memory_app.facts.prompt import fact_request
from memory_app.llm import LLMPermanentError
from memory_app.llm.base import ChatRequest
from memory_app.llm.extractive import ExtractiveBackend


def extract(*lines: tuple[str, str]) -> list[Triple]:
    """What the offline backend answers for these (role, text) lines, through the real parser."""
    request = fact_request(lines=[{"role": role, "content": text} for role, text in lines], max_tokens=500)
    result = ExtractiveBackend().complete(request)
    assert (result.backend, result.model) == ("extractive", "extractive-v1")
    assert list(json.loads(result.text)) == ["facts"]
    return parse_fact_output(result.text)


def spo(triples: list[Triple]) -> list[tuple[str, str, str, bool]]:
    return [(t.subject, t.predicate, t.object, t.replaces) for t in triples]


# --- the prompt ---------------------------------------------------------------------------------


def test_the_prompt_asks_for_json_and_carries_the_lines():
    lines = [
        {"role": "user", "content": "My name is Ann and I live in /srv/oslo-01."},
        {"role": "assistant", "content": "Noted, Ann."},
    ]
    request = fact_request(lines=lines, max_tokens=321)
    assert (request.purpose, request.max_tokens, request.json_object) == ("extract_facts", 321, True)
    assert request.metadata == {"lines": lines}
    system, user = request.messages
    assert system["role"] == "system" and user["role"] == "user"
    for asked in ("JSON", '"subject"', '"predicate"', '"object"', '"confidence"', '"replaces"', "VERBATIM"):
        assert asked in system["content"]
    assert '{"facts": []}' in system["content"]  # what "nothing to extract" looks like
    assert "[user] My name is Ann and I live in /srv/oslo-01." in user["content"]
    assert "[assistant] Noted, Ann." in user["content"]
    assert "321 tokens" in user["content"]


def test_the_prompts_example_is_an_answer_the_parser_accepts():
    system = fact_request(lines=[], max_tokens=100).messages[0]["content"]
    example = system.split("Example: ", 1)[1].split("\n", 1)[0]
    assert parse_fact_output(example) == [Triple("Paris", "is capital of", "France", 0.95, False)]


# --- the rule patterns --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "text", "expected"),
    [
        ("user", "My name is Ann.", [("user", "name", "Ann", True)]),
        ("user", "Hi, my name's Ann!", [("user", "name", "Ann", True)]),
        ("assistant", "My name is Atlas.", [("assistant", "name", "Atlas", True)]),
        ("user", "I live in Oslo.", [("user", "lives in", "Oslo", True)]),
        ("user", "I work at Acme Corp.", [("user", "works at", "Acme Corp", True)]),
        ("user", "I work for the city council", [("user", "works for", "the city council", True)]),
        ("user", "I was born in Bergen.", [("user", "was born in", "Bergen", True)]),
        ("user", "I like green tea.", [("user", "likes", "green tea", False)]),
        ("user", "I\u2019m a nurse.", [("user", "is a", "nurse", False)]),
        ("user", "My favourite colour is blue.", [("user", "favourite colour", "blue", False)]),
        ("user", "Paris is the capital of France.", [("Paris", "is", "the capital of France", False)]),
        ("user", "Oslo is a city.", [("Oslo", "is a", "city", False)]),
        ("user", "Bob lives in Paris.", [("Bob", "lives in", "Paris", True)]),
        ("user", "Bob works at Initech.", [("Bob", "works at", "Initech", True)]),
        ("user", "Bob works for Initech.", [("Bob", "works for", "Initech", True)]),
        ("user", "Bob likes jazz.", [("Bob", "likes", "jazz", False)]),
        ("user", "Carl was born in 1990.", [("Carl", "was born in", "1990", True)]),
        ("user", "Carl is born in Rome.", [("Carl", "was born in", "Rome", True)]),
        ("user", "Ann's email is ann@example.com.", [("Ann", "email", "ann@example.com", False)]),
        (
            "user",
            "Ann lives in Oslo and works at Acme.",
            [("Ann", "lives in", "Oslo", True), ("Ann", "works at", "Acme", True)],
        ),
        (
            "user",
            "I live in Oslo and work at Acme.",
            [("user", "lives in", "Oslo", True), ("user", "works at", "Acme", True)],
        ),
        (
            "user",
            "Paris is the capital of France and Oslo is the capital of Norway.",
            [("Paris", "is", "the capital of France", False), ("Oslo", "is", "the capital of Norway", False)],
        ),
        ("user", "Ann likes tea and coffee.", [("Ann", "likes", "tea and coffee", False)]),
        # Identifiers stay verbatim: dots inside a path or URL do not end the sentence.
        (
            "user",
            "The config lives in /etc/app/config.yaml. The repo is https://git.example.com/a/b.git.",
            [
                ("The config", "lives in", "/etc/app/config.yaml", True),
                ("The repo", "is", "https://git.example.com/a/b.git", False),
            ],
        ),
    ],
)
def test_the_rule_patterns_produce_the_expected_triples(role, text, expected):
    assert spo(extract((role, text))) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Hello there!",
        "It is raining.",
        "This is great.",
        "What is the plan?",
        "Where does Ann live? Is Bob a nurse?",
        "Ann is not a doctor.",
        "There is a problem with the build.",
        "x = 5 if y is None else 3",
        "ok",
    ],
)
def test_text_without_facts_gives_an_empty_list(text):
    assert extract(("user", text)) == []


def test_no_lines_give_an_empty_list():
    assert extract() == []


def test_facts_come_in_order_each_once_across_lines():
    triples = extract(
        ("user", "My name is Ann. I live in Oslo."),
        ("assistant", "Bob lives in Paris."),
        ("user", "I live in Oslo."),  # said again: the same fact
        ("user", "MY NAME IS  ann."),  # the same fact, written differently
    )
    assert spo(triples) == [
        ("user", "name", "Ann", True),
        ("user", "lives in", "Oslo", True),
        ("Bob", "lives in", "Paris", True),
    ]
    assert all(t.confidence is None for t in triples)  # patterns claim no confidence


def test_content_parts_are_read_as_text():
    request = ChatRequest(
        messages=[],
        purpose="extract_facts",
        metadata={"lines": [{"role": "user", "content": [{"type": "text", "text": "I like chess."}]}]},
    )
    assert spo(parse_fact_output(ExtractiveBackend().complete(request).text)) == [("user", "likes", "chess", False)]


def test_a_long_conversation_stays_within_the_parser_limits():
    lines = [("user", f"Person{i} lives in City{i}. Person{i} likes thing{i}.") for i in range(400)]
    assert len(extract(*lines)) == MAX_TRIPLES  # capped, and still accepted


def test_summaries_are_unchanged_and_other_purposes_refused():
    backend = ExtractiveBackend()
    summary = backend.complete(
        ChatRequest(
            messages=[], purpose="summarize", metadata={"transcript": [{"role": "user", "content": "Plan a trip."}]}
        )
    )
    assert json.loads(summary.text)["user_request_summary"] == "Plan a trip."
    with pytest.raises(LLMPermanentError):
        backend.complete(ChatRequest(messages=[], purpose="translate"))
