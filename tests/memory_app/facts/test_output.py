"""The fact extractor's answer: what parse_fact_output accepts, what it rejects, and matching terms."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_app.facts.output import (
    MAX_FIELD_CHARS,
    MAX_OUTPUT_CHARS,
    MAX_TRIPLES,
    FactOutputError,
    Triple,
    normalize_term,
    parse_fact_output,
)

PARIS = {"subject": "Paris", "predicate": "is capital of", "object": "France"}
ANN = {"subject": "Ann", "predicate": "lives in", "object": "Oslo", "confidence": 0.9, "replaces": True}
EXPECTED = [Triple("Paris", "is capital of", "France"), Triple("Ann", "lives in", "Oslo", 0.9, True)]
LIST = json.dumps([PARIS, ANN])


def rejected(text: str) -> str:
    with pytest.raises(FactOutputError) as caught:
        parse_fact_output(text)
    reason = caught.value.reason
    assert reason and "\n" not in reason and str(caught.value) == reason
    return reason


# --- accepted shapes ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        LIST,
        f"```json\n{LIST}\n```",
        f"```\n{LIST}\n```",
        f"Here are the facts:\n```json\n{LIST}\n```\nLet me know if you need more.",
        json.dumps({"facts": [PARIS, ANN]}),
        json.dumps({"triples": [PARIS, ANN]}),
        json.dumps({"extracted": [PARIS, ANN], "count": 2, "note": "ok"}),
        json.dumps({"facts": [PARIS, ANN], "sources": ["msg 1"]}),  # "facts" wins over another list
        f"Sure! Here is the JSON list: {LIST} I hope this helps.",
        f"The facts (see [1] and {{the notes}}) follow:\n{LIST}",
        f"```json\n{LIST}",  # a fence the model never closed, around complete JSON
    ],
    ids=[
        "bare",
        "json-fence",
        "plain-fence",
        "fence-in-prose",
        "facts-key",
        "triples-key",
        "single-list-key",
        "facts-key-preferred",
        "prose-around",
        "brackets-in-prose",
        "unclosed-fence",
    ],
)
def test_it_accepts_the_shapes_models_answer_in(text):
    assert parse_fact_output(text) == EXPECTED


@pytest.mark.parametrize("text", ["[]", '{"facts": []}', "```json\n[]\n```", "No facts found: []"])
def test_an_empty_list_means_nothing_to_extract(text):
    assert parse_fact_output(text) == []


def test_obj_is_accepted_for_object_and_fields_are_stripped():
    text = json.dumps([{"subject": " Ann ", "predicate": "likes\n", "obj": "\ttea ", "confidence": 1}])
    assert parse_fact_output(text) == [Triple("Ann", "likes", "tea", 1.0, False)]


def test_null_confidence_and_replaces_mean_absent():
    text = json.dumps([{**PARIS, "confidence": None, "replaces": None}])
    assert parse_fact_output(text) == [Triple("Paris", "is capital of", "France", None, False)]


def test_identifiers_and_unicode_are_kept_verbatim():
    fact = {"subject": "Straße", "predicate": "config path", "object": "/etc/app/ﬁle.yaml#L2"}
    assert parse_fact_output(json.dumps([fact], ensure_ascii=True)) == [
        Triple("Straße", "config path", "/etc/app/ﬁle.yaml#L2")
    ]


def test_the_limits_themselves_are_accepted():
    longest = {"subject": "s" * MAX_FIELD_CHARS, "predicate": "p" * MAX_FIELD_CHARS, "object": "o" * MAX_FIELD_CHARS}
    text = json.dumps([longest] + [PARIS] * (MAX_TRIPLES - 1))
    assert len(parse_fact_output(text)) == MAX_TRIPLES


# --- rejected answers: the whole batch, with a reason -----------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        LIST[:-1],
        LIST[: len(LIST) // 2],
        LIST[: LIST.index("0.9") + 2],  # cut inside a number
        LIST[: LIST.index("true") + 3],  # cut inside a literal
        '[{"subject": "Paris", "predicate": "is cap',
        f"```json\n{LIST[:-3]}",
        '{"facts": [{"subject": "Paris", "predicate": "is capital of", "object": "France"}, {"subj',
    ],
)
def test_truncated_json_is_rejected(text):
    assert "truncated" in rejected(text)


@pytest.mark.parametrize(
    "text",
    ["", "   \n", "I could not find any facts in this conversation.", "Paris is the capital of France."],
)
def test_pure_prose_is_rejected(text):
    rejected(text)


@pytest.mark.parametrize(
    "text",
    [
        "42",
        '"facts"',
        "null",
        "true",
        '{"subject": "a"}',
        '{"a": 1}',
        '{"x": [], "y": []}',
        "[1, 2]",
        '["a"]',
        "[null]",
        f"[{json.dumps(PARIS)}, null]",
    ],
)
def test_json_that_is_not_a_list_of_objects_is_rejected(text):
    rejected(text)


def test_a_lone_triple_object_is_not_a_list():
    assert "lone triple" in rejected(json.dumps(PARIS))


def test_ten_thousand_triples_are_rejected():
    rejected(json.dumps([PARIS] * 10_000))


def test_one_triple_over_the_count_limit_is_rejected():
    compact = json.dumps([{"subject": "a", "predicate": "b", "object": "c"}] * (MAX_TRIPLES + 1))
    assert len(compact) < MAX_OUTPUT_CHARS  # the count limit, not the size limit, rejects it
    assert f"limit {MAX_TRIPLES}" in rejected(compact)


def test_a_five_megabyte_answer_is_rejected_without_parsing():
    text = "[" + ", ".join([json.dumps(PARIS)] * 100_000) + "]"
    assert len(text) > 5_000_000
    assert "characters" in rejected(text)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"subject": 5}, "'subject' is a number"),
        ({"predicate": ["is"]}, "'predicate' is a list"),
        ({"object": {"name": "France"}}, "'object' is a object"),
        ({"object": None}, "'object' is a null"),
        ({"confidence": "high"}, "'confidence' is a string"),
        ({"confidence": True}, "'confidence' is a boolean"),
        ({"confidence": 1.5}, "outside 0..1"),
        ({"confidence": -0.1}, "outside 0..1"),
        ({"replaces": "yes"}, "'replaces' is a string"),
        ({"replaces": 1}, "'replaces' is a number"),
    ],
)
def test_wrong_types_are_rejected(change, reason):
    assert reason in rejected(json.dumps([PARIS, {**ANN, **change}]))


def test_a_missing_field_is_rejected():
    assert "'object' is missing" in rejected(json.dumps([{"subject": "a", "predicate": "b"}]))


def test_nan_confidence_is_rejected():
    assert "outside 0..1" in rejected('[{"subject": "a", "predicate": "b", "object": "c", "confidence": NaN}]')


@pytest.mark.parametrize("field", ["subject", "predicate", "object"])
@pytest.mark.parametrize("empty", ["", "   ", "\n\t"])
def test_empty_fields_are_rejected(field, empty):
    assert f"'{field}' is empty" in rejected(json.dumps([PARIS, {**PARIS, field: empty}]))


@pytest.mark.parametrize("field", ["subject", "predicate", "object"])
def test_over_long_fields_are_rejected(field):
    assert "longer than" in rejected(json.dumps([{**PARIS, field: "x" * (MAX_FIELD_CHARS + 1)}]))


def test_a_field_whose_normal_form_is_over_long_is_rejected():
    # U+FDFA is one character that NFKC expands to eighteen.
    text = "\ufdfa" * (MAX_FIELD_CHARS // 10)
    assert len(text) <= MAX_FIELD_CHARS < len(normalize_term(text))
    assert "longer than" in rejected(json.dumps([{**PARIS, "object": text}]))


def test_text_no_database_can_store_is_rejected():
    assert "NUL" in rejected(json.dumps([{**PARIS, "subject": "a\x00b"}]))
    assert "not valid Unicode" in rejected('[{"subject": "\\ud800", "predicate": "p", "object": "o"}]')


def test_object_and_obj_together_are_ambiguous():
    assert "both" in rejected(json.dumps([{**PARIS, "obj": "Germany"}]))


def test_one_bad_triple_rejects_the_whole_batch():
    assert "triple 3" in rejected(json.dumps([PARIS, ANN, {**PARIS, "subject": ""}, PARIS]))


def test_broken_json_is_rejected_rather_than_mined_for_fragments():
    # The first triple parses on its own, but it is part of a list with a missing comma.
    assert "invalid JSON" in rejected(LIST.replace('"object": "France"}', '"object": "France"} {', 1))
    # The lists inside a broken object are not the answer either.
    rejected('{"facts": [], "more": [] oops')


def test_hostile_nesting_and_numbers_are_rejected_not_crashing():
    assert "nested too deeply" in rejected("[" * 100_000)
    rejected('[{"subject": "a", "predicate": "b", "object": "c", "confidence": 1' + "0" * 5000 + "}]")


# --- the property: any valid batch, however presented, parses back to itself -----------------

_FIELD = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).map(str.strip).filter(bool)
_TRIPLE = st.builds(
    Triple,
    subject=_FIELD,
    predicate=_FIELD,
    object=_FIELD,
    confidence=st.none() | st.floats(min_value=0, max_value=1),
    replaces=st.booleans(),
)
# Prose never contains JSON-looking brackets or backticks: those would be a different answer.
_PROSE = st.sampled_from(["", "Here are the facts:", "Sure!\n", "Facts (extracted):", "Done.", "Hope this helps."])


def _render(triple: Triple, object_key: str, explicit_defaults: bool) -> dict:
    item = {"subject": triple.subject, "predicate": triple.predicate, object_key: triple.object}
    if explicit_defaults or triple.confidence is not None:
        item["confidence"] = triple.confidence
    if explicit_defaults or triple.replaces:
        item["replaces"] = triple.replaces
    return item


@settings(max_examples=200, deadline=None)
@given(
    triples=st.lists(_TRIPLE, max_size=20),
    object_key=st.sampled_from(["object", "obj"]),
    explicit_defaults=st.booleans(),
    wrapper=st.sampled_from([None, "facts", "triples", "result"]),
    fence=st.sampled_from(["", "```", "```json"]),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 2]),
    before=_PROSE,
    after=_PROSE,
)
def test_any_valid_batch_parses_back_to_itself(
    triples, object_key, explicit_defaults, wrapper, fence, ascii_only, indent, before, after
):
    items = [_render(t, object_key, explicit_defaults) for t in triples]
    payload = json.dumps({wrapper: items} if wrapper else items, ensure_ascii=ascii_only, indent=indent)
    if fence:
        payload = f"{fence}\n{payload}\n```"
    assert parse_fact_output(f"{before}\n{payload}\n{after}") == triples


# --- normalize_term ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Paris", "paris"),
        ("  New \t York\n", "new york"),
        ("New\u00a0York", "new york"),  # no-break space
        ("\uff30\uff41\uff52\uff49\uff53", "paris"),  # fullwidth "Paris"
        ("ﬁle", "file"),  # ligature
        ("Straße", "strasse"),
        ("ΣΊΣΥΦΟΣ", "σίσυφοσ"),
        ("Cafe\u0301", "café"),  # combining accent composes
        ("", ""),
    ],
)
def test_normalize_term(text, expected):
    assert normalize_term(text) == expected


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_normalize_term_is_idempotent_and_tidy(text):
    normal = normalize_term(text)
    assert normalize_term(normal) == normal
    assert normal == normal.strip() and "  " not in normal


@pytest.mark.parametrize("fence", ["", "```", "```json"])
def test_a_value_holding_three_backticks_is_read_whole_fenced_or_not(fence):
    items = [{"subject": "the ```json marker", "predicate": "starts", "object": "a code block ```"}]
    payload = json.dumps(items)
    if fence:
        payload = f"{fence}\n{payload}\n```"
    assert parse_fact_output(f"Sure!\n{payload}\n") == [
        Triple(subject="the ```json marker", predicate="starts", object="a code block ```")
    ]
