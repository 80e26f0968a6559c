"""The offline backend's compaction summary: salient lines quoted verbatim, ranked, within the
budget it is given, carried forward from one compaction to the next."""

from __future__ import annotations

import json
import random

import pytest

from memory_app.compaction.prompt import build_prompt, parse_summary, summary_messages
from memory_app.conversations.tokens import count_text
from memory_app.llm import ChatRequest
from memory_app.llm.extractive import ExtractiveBackend, identifiers, render, summarize


def call(call_id: str, name: str, **arguments: object) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def step(number: int, name: str, output: str, text: str = "Checking.", **arguments: object) -> list[dict]:
    """One assistant turn: a tool call and its output."""
    call_id = f"c{number}"
    return [
        {"role": "assistant", "content": text, "tool_calls": [call(call_id, name, **arguments)]},
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": output},
    ]


def noisy_log(rng: random.Random, lines: int) -> str:
    """Routine log lines, each with identifiers of its own: what a summary should not fill up with."""
    return "\n".join(
        f"2025-03-{rng.randrange(10, 28)}T10:{rng.randrange(60):02d}:00Z "
        f"{rng.choice(['INFO', 'INFO', 'DEBUG', 'ERROR'])} worker_{rng.randrange(1000)} processed batch "
        f"{rng.randrange(16**8):08x} in {rng.randrange(100, 999)} ms"
        for _ in range(lines)
    )


def noisy_steps(first: int, count: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    out: list[dict] = []
    for n in range(first, first + count):
        out += step(n, "tail_log", noisy_log(rng, 25), service="api")
    return out


def as_previous(answer: dict) -> str:
    """The previous summary as the compaction passes it on: the text of its summary messages."""
    data = parse_summary(json.dumps(answer))
    return "\n".join(str(m["content"]) for m in summary_messages(data, [], model="extractive-v1"))


def text_of(answer: dict) -> str:
    return render(answer)


# --- what a line names --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fix src/billing/ledger.py and config/app.yaml first.", {"src/billing/ledger.py", "config/app.yaml"}),
        ("Tracked in PAY-1234, see also #482.", {"PAY-1234", "#482"}),
        ("The limit is 48213 requests, the timeout 2.5 s and the cap $1,200.", {"48213 requests", "2.5 s", "$1,200"}),
        ("Upgrade to 3.11.7 after commit 9f1c2ab lands.", {"3.11.7", "9f1c2ab"}),
        ("Ingrid Okafor reviews it; ask Tomasz first.", {"Ingrid Okafor", "Tomasz"}),
        ("As planned, Hana Sato will review.", {"Hana Sato"}),
        ("Call reconcile_ledger() from BillingService.", {"reconcile_ledger", "BillingService"}),
        ("Docs at https://example.com/docs/api.", {"https://example.com/docs/api"}),
    ],
)
def test_identifiers_are_read_verbatim(text, expected):
    assert expected <= set(identifiers(text))


def test_plain_words_short_numbers_and_sentence_starts_are_not_identifiers():
    assert identifiers("Then we retry 3 times and/or give up. Next the queue drains.") == ["3 times"]


# --- the budget ---------------------------------------------------------------------------------


def test_the_summary_uses_the_budget_it_is_given_and_stays_within_it():
    transcript = [{"role": "user", "content": "Find why the export job is slow."}, *noisy_steps(0, 120)]
    sizes = []
    for budget in (300, 1200, 4000):
        answer = summarize(transcript, max_tokens=budget)
        sizes.append(count_text(text_of(answer)))
        assert sizes[-1] <= budget
    assert sizes[0] < sizes[1] < sizes[2]
    assert sizes[2] > 4000 * 0.8  # enough material: the budget is used, not a fixed size


def test_the_backend_takes_the_budget_the_prompt_states_without_max_tokens():
    transcript = [{"role": "user", "content": "Find why the export job is slow."}, *noisy_steps(0, 120)]
    prompt = build_prompt(previous_summary=None, transcript="...", output_max_tokens=700)
    request = ChatRequest(messages=prompt, purpose="summarize", metadata={"transcript": transcript})
    answer = json.loads(ExtractiveBackend().complete(request).text)
    assert 500 < count_text(text_of(answer)) <= 700


def test_the_answer_is_the_object_the_compaction_prompt_asks_for():
    transcript = [{"role": "user", "content": "Deploy to staging."}, *step(1, "deploy", "ok", env="staging")]
    request = ChatRequest(
        messages=[], purpose="summarize", max_tokens=500, metadata={"transcript": transcript, "image_ids": ["img_0"]}
    )
    raw = ExtractiveBackend().complete(request).text
    data = parse_summary(raw)
    assert set(json.loads(raw)) == {"user_request_summary", "summary", "salient_facts", "open_threads", "keep_images"}
    assert data["user_request_summary"] == "Deploy to staging."
    assert data["open_threads"] == ["tool deploy: ok"]
    assert data["keep_images"] == [{"image_id": "img_0", "context": "image from the conversation"}]


# --- what is kept, and in what order of salience ----------------------------------------------


def test_what_the_user_and_assistant_name_outranks_tool_output_noise():
    transcript = [
        {"role": "user", "content": "The export for Acme is slow. Ticket OPS-7781 has the details."},
        *noisy_steps(0, 40),
        {"role": "assistant", "content": "The slow query is in services/export/query_builder.py, owned by Mei Tanaka."},
        *noisy_steps(40, 40, seed=8),
        *step(99, "git_show", noisy_log(random.Random(3), 10), rev="4be91c0"),
    ]
    text = text_of(summarize(transcript, max_tokens=400))
    for item in ("OPS-7781", "services/export/query_builder.py", "Mei Tanaka", "4be91c0"):
        assert item in text
    assert count_text(text) <= 400


def test_an_informative_tool_line_outranks_boilerplate_that_repeats():
    rng = random.Random(1)
    outputs = [noisy_log(rng, 30) for _ in range(20)]
    lines = outputs[7].split("\n")
    lines.insert(15, "NOTE: the replica lag alarm fires above 45000 ms; escalate to the database team")
    outputs[7] = "\n".join(lines)
    transcript = [{"role": "user", "content": "Why are the dashboards stale?"}]
    for n, output in enumerate(outputs):
        transcript += step(n, "tail_log", output, service="dash")
    text = text_of(summarize(transcript, max_tokens=250))
    assert "45000 ms" in text


def test_when_the_budget_is_short_older_lines_get_terse_before_anything_named_is_lost():
    reasons = "because the replica lags behind the primary during the nightly batch window, as measured last week"
    transcript = [{"role": "user", "content": "Review every consumer."}]
    for n in range(40):
        transcript.append(
            {"role": "assistant", "content": f"Decision: consumer_{n:02d} stays on the old queue, {reasons}."}
        )
    answer = summarize(transcript, max_tokens=900)
    text = text_of(answer)
    assert count_text(text) <= 900
    assert all(f"consumer_{n:02d}" in text for n in range(40))
    facts = answer["salient_facts"]
    assert facts[-1].endswith(f"{reasons}.")  # the newest whole
    assert facts[0] == "assistant: Decision: … consumer_00 stays on the old queue,"  # the oldest terse


def test_real_errors_are_kept_once_each_and_log_levels_are_not_errors():
    rng = random.Random(2)
    transcript = [{"role": "user", "content": "Make the test suite pass."}]
    for n in range(6):
        output = noisy_log(rng, 10) + f"\nE   AssertionError: {n} != {n + 1}\nFAILED tests/test_totals.py::test_sum"
        transcript += step(n, "run_tests", output)
    transcript += step(9, "run", "fatal: not a git repository (or any of the parent directories): .git", cmd="git")
    summary = summarize(transcript, max_tokens=2000)["summary"]
    errors = summary.split("Errors seen:\n", 1)[1].splitlines()
    assert "- run_tests: E AssertionError: 5 != 6 (x6)" in errors  # the latest of its kind, counted
    assert "- run_tests: FAILED tests/test_totals.py::test_sum (x6)" in errors
    assert any("fatal: not a git repository" in e for e in errors)
    assert not any(" ERROR worker_" in e for e in errors)


def test_decisions_and_every_user_request_are_kept_deduplicated():
    transcript = [
        {"role": "user", "content": "Speed up the nightly export."},
        *noisy_steps(0, 10),
        {"role": "assistant", "content": "We decided to batch the writes instead of streaming them."},
        {"role": "user", "content": "Speed up the nightly export. Also keep memory under control."},
        *noisy_steps(10, 10, seed=9),
        {"role": "user", "content": "Add a progress bar."},
    ]
    answer = summarize(transcript, max_tokens=1500)
    assert answer["user_request_summary"].splitlines() == [
        "- Speed up the nightly export.",
        "- Also keep memory under control.",
        "- Add a progress bar.",
    ]
    assert "assistant: We decided to batch the writes instead of streaming them." in answer["salient_facts"]


def test_code_quoted_in_a_message_is_ranked_like_tool_output():
    code = "\n".join(f"def handler_{n}(event):\n    return process_{n}(event)" for n in range(60))
    transcript = [
        {"role": "user", "content": f"Here is the module, the bug is in PAY-881:\n```python\n{code}\n```"},
        {"role": "assistant", "content": "The fix belongs in handler_42, reported by Lucia Rossi."},
    ]
    answer = summarize(transcript, max_tokens=200)
    text = text_of(answer)
    assert "PAY-881" in text and "handler_42" in text and "Lucia Rossi" in text
    assert all(not fact.startswith("user:") for fact in answer["salient_facts"])


# --- chained compactions ------------------------------------------------------------------------


def test_what_one_summary_kept_survives_the_next_compaction():
    first = [
        {"role": "user", "content": "Migrate billing to the new ledger; Ingrid Okafor signs off. Ticket FIN-2291."},
        *step(1, "read_file", "x = 1", path="services/billing/ledger_v2.py"),
        {"role": "assistant", "content": "Decision: the cutover batch size is pinned to 48213 rows."},
        *noisy_steps(2, 30),
    ]
    previous = as_previous(summarize(first, max_tokens=800))
    second = [*noisy_steps(40, 60, seed=11), {"role": "assistant", "content": "Still reading logs."}]
    answer = summarize(second, max_tokens=800, previous_summary=previous)
    text = text_of(answer)
    for item in ("Ingrid Okafor", "FIN-2291", "services/billing/ledger_v2.py", "48213 rows"):
        assert item in text
    # The goal stays although the second range has no user message.
    assert answer["summary"].startswith("Goal: Migrate billing to the new ledger")
    assert "Covered so far: 185 messages (1 user, 93 assistant, 91 tool results)" in answer["summary"]
    # A third compaction, again with nothing new from the user: still there.
    third = summarize(noisy_steps(200, 60, seed=12), max_tokens=800, previous_summary=as_previous(answer))
    assert all(item in text_of(third) for item in ("Ingrid Okafor", "FIN-2291", "48213 rows"))


def test_a_previous_summary_written_by_a_model_is_carried_too():
    previous = (
        "[User Requests Summary]\nPort the CLI to Go.\n[Compacted Context Summary]\nThe user wants the CLI in Go; "
        "cmd/root.go was created.\n\n[Key Facts]\n- Release owner: Sven Lindqvist\n- Target version 2.4.0"
    )
    answer = summarize(noisy_steps(0, 20), max_tokens=600, previous_summary=previous)
    text = text_of(answer)
    assert "Port the CLI to Go." in answer["user_request_summary"]
    assert "Sven Lindqvist" in text and "2.4.0" in text and "cmd/root.go" in text


def test_a_previous_summary_in_markdown_sections_keeps_its_goal_and_errors():
    previous = (
        "[Compacted Context Summary]\n## Goal\n- Fix the login bug in auth/views.py\n## Errors and fixes\n"
        "- Error: CSRF token missing\n## Identifiers\n- login_required, LoginView"
    )
    answer = summarize([{"role": "user", "content": "continue"}], max_tokens=300, previous_summary=previous)
    assert answer["summary"].startswith("Goal: Fix the login bug in auth/views.py\n")
    assert "Errors seen:\n- Error: CSRF token missing" in answer["summary"]
    assert "login_required, LoginView" in answer["salient_facts"]
    assert not any(fact.startswith("#") for fact in answer["salient_facts"])
