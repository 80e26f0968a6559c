"""Experience selection pieces: template, candidate list, answer parser, injected block, offline ranking.

No database; the offline backend is exercised through its real `complete` entry point.
"""

from __future__ import annotations

import json

import pytest

from experiences_app.selection import (
    DEFAULT_SELECTION_TEMPLATE,
    INJECTED_DELIMITER,
    candidate_block,
    format_experience_in_prompt,
    parse_selection,
    render_template,
    validate_template,
)
from memory_app.llm.base import ChatRequest
from memory_app.llm.extractive import ExtractiveBackend
from memory_app.llm.relevance import DEFAULT_RELEVANCE_THRESHOLD, rank_by_relevance, relevance_scores, tokenize

CANDIDATES = [
    ("file-validation", "Use when user requests file operations or FileNotFoundError occurred."),
    ("plot-style", "Use when the user asks for a chart, plot or any visualisation."),
    ("sql-safety", "Use when writing SQL queries against the production database."),
]
IDS = [exp_id for exp_id, _ in CANDIDATES]


# --- the template ---------------------------------------------------------------------------------


def test_the_default_template_renders_its_doubled_braces_as_a_json_example():
    validate_template(DEFAULT_SELECTION_TEMPLATE)
    prompt = render_template(DEFAULT_SELECTION_TEMPLATE, experiences="EXP", user_query="QUERY", context="CTX")
    assert '{"file-validation": true, "plot-style": false}' in prompt
    assert "{{" not in prompt and "}}" not in prompt
    assert prompt.index("EXP") < prompt.index("CTX") < prompt.index("QUERY")
    # The same result str.format gives for this template (which has no user text in it).
    assert prompt == DEFAULT_SELECTION_TEMPLATE.format(experiences="EXP", user_query="QUERY", context="CTX")


def test_a_custom_template_uses_any_subset_and_repeats():
    template = 'Q: {user_query}\nAgain: {user_query}\nPick from {experiences} as {{"id": true}} {{{context}}}'
    validate_template(template)
    rendered = render_template(template, experiences="E", user_query="q", context="c")
    assert rendered == 'Q: q\nAgain: q\nPick from E as {"id": true} {c}'


def test_stored_and_user_text_with_braces_is_never_formatted():
    hostile = "{0} {user_query} {context} {{x}} {__class__} {experiences!r}"
    block = candidate_block([("a", hostile)])
    prompt = render_template(DEFAULT_SELECTION_TEMPLATE, experiences=block, user_query=hostile, context=hostile)
    assert prompt.count(hostile) == 3  # each value exactly as given, nothing re-expanded


@pytest.mark.parametrize(
    ("template", "fragments"),
    [
        ("{experiences} {query} {0} {}", ["unknown placeholder(s) {query}, {0}, {}"]),
        ("{experiences} {context!r} {user_query:>9}", ["{context!r}", "{user_query:>9}"]),
        ('{experiences} answer {"id": true}', ['{"id": true}']),
        ("{experiences} a { b", ["unbalanced single brace at character(s) 16"]),
        ("{experiences} a } b", ["unbalanced single brace at character(s) 16"]),
        ("{experiences} {{{user_query}}", ["unbalanced"]),
        ("{user_query} only", ["must contain the {experiences} placeholder"]),
    ],
)
def test_validate_template_names_what_is_wrong(template: str, fragments: list[str]):
    with pytest.raises(ValueError) as caught:
        validate_template(template)
    for fragment in fragments:
        assert fragment in str(caught.value)


def test_render_refuses_what_validate_refuses_except_a_missing_placeholder():
    with pytest.raises(ValueError, match="unknown placeholder"):
        render_template("{experiences} {nope}", experiences="", user_query="", context="")
    assert render_template("just {context}", experiences="E", user_query="Q", context="C") == "just C"


def test_candidate_block_lists_ids_with_their_when_only():
    block = candidate_block([("a", "first line\nsecond line\n"), ("b", "other")])
    assert block == "- id: a\n  when: first line\n    second line\n- id: b\n  when: other"
    assert candidate_block([]) == "(no candidate experiences)"


# --- the answer ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "chosen"),
    [
        # The object form `{"id": true/false}`, in candidate order whatever the answer's order.
        ('{"sql-safety": true, "file-validation": true, "plot-style": false}', ["file-validation", "sql-safety"]),
        ('{"file-validation": false, "plot-style": false, "sql-safety": false}', []),
        ('Sure!\n```json\n{"plot-style": true, "sql-safety": false}\n```\nHope this helps.', ["plot-style"]),
        ('I think {"plot-style": true} fits.', ["plot-style"]),
        ('{"plot-style": "yes", "sql-safety": "no", "file-validation": 1}', ["file-validation", "plot-style"]),
        ('{"plot-style": {"selected": true, "reason": "a chart"}}', ["plot-style"]),
        ('{"selected": ["sql-safety", "plot-style"]}', ["plot-style", "sql-safety"]),  # JSON-mode wrapper
        ('["sql-safety"]', ["sql-safety"]),
        ('```\n["plot-style", "file-validation"]\n```', ["file-validation", "plot-style"]),
        ('[{"exp_id": "plot-style"}, {"id": "sql-safety"}]', ["plot-style", "sql-safety"]),
        ("[]", []),
        # Ids that were not candidates are never returned.
        ('{"rm-rf": true, "plot-style": true}', ["plot-style"]),
        ('{"rm-rf": true}', []),
        ('["rm-rf", "PLOT-STYLE"]', []),
        # Plain text: whole ids only.
        ("The relevant ones are sql-safety and file-validation.", ["file-validation", "sql-safety"]),
        ("See [1]: plot-style applies.", ["plot-style"]),
        ("plot-styles, xplot-style, plot-style-2, plot-style_x", []),
        ("", []),
        ("I cannot decide.", []),
        ("{not json at all", []),
        ("\x00\ufffd garbage ]]}{", []),
    ],
)
def test_parse_selection_accepts_every_answer_form(answer: str, chosen: list[str]):
    assert parse_selection(answer, IDS) == chosen


def test_parse_selection_tells_overlapping_ids_apart():
    assert parse_selection("use exp-1 please", ["exp", "exp-1", "exp-10"]) == ["exp-1"]
    assert parse_selection("exp and exp-10", ["exp", "exp-1", "exp-10"]) == ["exp", "exp-10"]


def test_parse_selection_with_no_candidates_or_no_text_selects_nothing():
    assert parse_selection('{"a": true}', []) == []
    assert parse_selection(None, ["a"]) == []  # type: ignore[arg-type]


# --- the injected block ------------------------------------------------------------------------------


def test_only_the_what_texts_are_injected_delimited_and_named():
    block = format_experience_in_prompt([("file-validation", "Check paths first.\n"), ("b", "Line 1\nLine 2")])
    assert block.splitlines()[1:] == [
        "Apply these instructions from your team's handcrafted experiences where they are relevant:",
        INJECTED_DELIMITER,
        "Experience file-validation:",
        "Check paths first.",
        INJECTED_DELIMITER,
        "Experience b:",
        "Line 1",
        "Line 2",
        INJECTED_DELIMITER,
    ]
    assert format_experience_in_prompt([]) == ""


# --- offline ranking ---------------------------------------------------------------------------------


def test_tokenize_splits_identifiers_drops_stopwords_and_stems():
    assert tokenize("Use when FileNotFoundError in read_csv; plotting the files") == [
        "file",
        "found",
        "error",
        "read",
        "csv",
        "plot",
        "file",
    ]


@pytest.mark.parametrize(
    ("query", "context", "expected"),
    [
        ("Plot monthly revenue as a chart", "", ["plot-style"]),
        ("Run a SQL query on the production database", "", ["sql-safety"]),
        ("continue", "Traceback: FileNotFoundError: data.csv", ["file-validation"]),
        ("Hello, how are you today?", "", []),
    ],
)
def test_bm25_ranking_picks_the_relevant_experience(query: str, context: str, expected: list[str]):
    assert rank_by_relevance(query, context, CANDIDATES, threshold=DEFAULT_RELEVANCE_THRESHOLD) == expected


def test_ranking_orders_by_score_and_respects_the_threshold():
    query = "plot a chart of the sql query results from the production database"
    scores = relevance_scores(query, "", CANDIDATES)
    assert 0 < scores["plot-style"] < scores["sql-safety"] <= 1
    assert scores["file-validation"] == 0
    assert rank_by_relevance(query, "", CANDIDATES, threshold=0.0) == ["sql-safety", "plot-style"]
    between = (scores["plot-style"] + scores["sql-safety"]) / 2
    assert rank_by_relevance(query, "", CANDIDATES, threshold=between) == ["sql-safety"]
    assert rank_by_relevance(query, "", CANDIDATES, threshold=1.01) == []


def test_context_counts_less_than_the_query():
    in_query = relevance_scores("production database", "", CANDIDATES)["sql-safety"]
    in_context = relevance_scores("", "production database", CANDIDATES)["sql-safety"]
    assert in_context == pytest.approx(in_query / 2)


def test_rare_terms_weigh_more_than_terms_every_candidate_shares():
    candidates = [("a", "database migration"), ("b", "database backup"), ("c", "database schema")]
    scores = relevance_scores("migration", "", candidates)
    assert scores["a"] > 0.5  # "migration" is rare, "database" is everywhere
    assert relevance_scores("database", "", candidates)["a"] < 0.5


# --- the offline backend ------------------------------------------------------------------------------


def test_the_extractive_backend_answers_the_id_object_for_every_candidate():
    request = ChatRequest(
        messages=[{"role": "user", "content": "the prompt is ignored"}],
        purpose="select_experiences",
        json_object=True,
        metadata={
            "candidates": [{"exp_id": exp_id, "when": when} for exp_id, when in CANDIDATES],
            "query": "draw a plot of the signups",
            "context": "",
        },
    )
    result = ExtractiveBackend().complete(request)
    assert (result.backend, result.model) == ("extractive", "extractive-v1")
    answer = json.loads(result.text)
    assert answer == {"file-validation": False, "plot-style": True, "sql-safety": False}
    assert list(answer) == IDS
    assert parse_selection(result.text, IDS) == ["plot-style"]


def test_the_extractive_backend_with_no_candidates_answers_an_empty_object():
    request = ChatRequest(messages=[], purpose="select_experiences", metadata={"query": "anything"})
    assert ExtractiveBackend().complete(request).text == "{}"
