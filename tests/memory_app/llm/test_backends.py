"""The LLM layer: the OpenAI backend over real HTTP to a scripted server, and the offline one."""

from __future__ import annotations

import json

import pytest

from memory_app.conversations.tokens import count_text
from memory_app.llm import ChatRequest, LLMPayloadTooLarge, LLMPermanentError, LLMTransientError, get_backend
from memory_app.llm.extractive import ExtractiveBackend, summarize_transcript
from memory_app.llm.openai_backend import OpenAIBackend
from tests.llm_server import Fail, Garbage, Reply

REQUEST = ChatRequest(messages=[{"role": "user", "content": "summarize"}], purpose="summarize", max_tokens=100)


def test_the_backend_is_chosen_by_settings(settings, llm_server):
    assert isinstance(get_backend(), OpenAIBackend)
    settings.LLM_BASE_URL = ""
    assert get_backend().name == "extractive"


def test_it_returns_text_model_and_usage(llm_server):
    llm_server.script(Reply("a summary", prompt_tokens=120, completion_tokens=30))
    result = OpenAIBackend().complete(REQUEST)
    assert (result.text, result.backend, result.model) == ("a summary", "openai", "scripted-model")
    assert (result.prompt_tokens, result.completion_tokens) == (120, 30)
    sent = llm_server.requests[-1]
    assert sent["model"] == "scripted-model"
    assert sent["messages"] == REQUEST.messages
    assert sent["max_tokens"] == 100


def test_it_asks_for_json_objects_when_told(llm_server):
    OpenAIBackend().complete(ChatRequest(messages=[{"role": "user", "content": "x"}], purpose="p", json_object=True))
    assert llm_server.requests[-1]["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(
    ("step", "error", "retry_after"),
    [
        (Fail(429, {"Retry-After": "7"}), LLMTransientError, 7.0),
        (Fail(500), LLMTransientError, None),
        (Fail(503), LLMTransientError, None),
        (Garbage(), LLMTransientError, None),
        (Fail(413), LLMPayloadTooLarge, None),
        (Fail(400), LLMPermanentError, None),
        (Fail(401), LLMPermanentError, None),
    ],
)
def test_failures_are_classified_transient_or_permanent(llm_server, step, error, retry_after):
    llm_server.script(step)
    with pytest.raises(error) as caught:
        OpenAIBackend().complete(REQUEST)
    assert type(caught.value) is error or issubclass(type(caught.value), error)
    if retry_after is not None:
        assert caught.value.retry_after == retry_after
    assert len(llm_server.requests) == 1  # SDK retries are off: the job system retries
    assert "sk-test-secret" not in caught.value.detail


def test_a_slow_server_is_a_transient_timeout(llm_server, settings):
    settings.LLM_TIMEOUT = 0.3
    llm_server.script(Reply("late", delay=1.5))
    with pytest.raises(LLMTransientError, match="timed out"):
        OpenAIBackend().complete(REQUEST)


def test_the_extractive_summary_keeps_requests_identifiers_errors_and_open_results():
    transcript = [
        {"role": "user", "content": "Deploy the billing_service to staging. Use config/deploy.yaml please."},
        {
            "role": "assistant",
            "content": "Running the deploy now.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "run", "arguments": '{"cmd": "make deploy"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Error: permission denied for /var/run/docker.sock"},
        {"role": "user", "content": "Try again with sudo."},
    ]
    summary = summarize_transcript(transcript, max_tokens=500)
    assert "Try again with sudo." in summary
    assert "billing_service" in summary and "config/deploy.yaml" in summary
    assert "permission denied" in summary
    assert "run: Error: permission denied" in summary


def test_the_extractive_summary_fits_its_budget():
    transcript = [{"role": "user", "content": f"step {i}: do thing_{i} in src/mod_{i}.py now."} for i in range(300)]
    summary = summarize_transcript(transcript, max_tokens=200)
    assert count_text(summary) <= 200
    assert "step 0" in summary  # the goal is never dropped


def test_the_extractive_backend_answers_within_a_third_of_its_source_first_and_newest_requests_first():
    transcript = [{"role": "user", "content": f"step {i}: do thing_{i} in src/mod_{i}.py now."} for i in range(300)]
    request = ChatRequest(
        messages=[], purpose="summarize", max_tokens=6000, metadata={"transcript": transcript, "image_ids": []}
    )
    answer = json.loads(ExtractiveBackend().complete(request).text)
    source = sum(count_text(m["content"]) for m in transcript)
    parts = [answer["user_request_summary"], answer["summary"], *answer["salient_facts"], *answer["open_threads"]]
    assert count_text("\n".join(parts)) <= source // 3
    requests = answer["user_request_summary"].splitlines()
    # The first request (the goal) and the newest ones, in order, as many as fit.
    assert requests[0] == "- step 0: do thing_0 in src/mod_0.py now."
    assert requests[-1] == "- step 299: do thing_299 in src/mod_299.py now."
