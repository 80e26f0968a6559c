"""Token counts: tiktoken's cl100k_base, offline, with OpenAI's chat message accounting."""

from __future__ import annotations

import socket

import pytest

from memory_app.conversations import tokens


def test_it_counts_with_the_real_cl100k_base_encoding():
    # Known values from OpenAI's cookbook ("How to count tokens with tiktoken").
    assert tokens.count_text("tiktoken is great!") == 6
    assert tokens.get_encoding().encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]


@pytest.mark.parametrize("encoding", tokens.ENCODINGS)
def test_it_loads_each_encoding_without_the_network(monkeypatch, tmp_path, encoding):
    tokens.get_encoding.cache_clear()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # an empty cache: must be primed locally

    def no_network(*args, **kwargs):
        raise AssertionError("tried to open a network connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    try:
        assert tokens.count_text("offline please", encoding) > 0
    finally:
        tokens.get_encoding.cache_clear()


SAMPLES = ["tiktoken is great!", "Ünïcödé ✓ 東京 🚀", "def f(x):\n    return x**2  # comment", "a" * 500, ""]


@pytest.mark.parametrize("encoding", tokens.ENCODINGS)
def test_counts_match_an_independent_bpe_implementation(encoding):
    # bpe-openai is a separate (Rust) implementation of the same encodings.
    import bpe_openai

    reference = bpe_openai.get_encoding(encoding)
    for text in SAMPLES:
        assert tokens.get_encoding(encoding).encode(text) == reference.encode(text)


def test_o200k_base_is_the_real_encoding():
    assert tokens.get_encoding("o200k_base").encode("tiktoken is great!") == [83, 8251, 2488, 382, 2212, 0]


def test_an_unknown_encoding_is_refused():
    with pytest.raises(ValueError, match="unknown encoding"):
        tokens.get_encoding("p50k_base")


def test_truncation_cuts_at_a_token_boundary():
    text = "one two three four five six"
    cut = tokens.truncate_text(text, 3)
    assert cut == "one two three" and tokens.count_text(cut) == 3
    assert tokens.truncate_text("short", 10) == "short"


def test_a_message_costs_overhead_plus_fields():
    text = tokens.count_text
    assert tokens.count_message({"role": "user", "content": "hello world"}) == 3 + text("user") + text("hello world")
    named = tokens.count_message({"role": "user", "content": "hi", "name": "bob"})
    assert named == 3 + text("user") + text("hi") + 1 + text("bob")


def test_images_count_as_the_estimate_not_as_base64():
    data_url = "data:image/png;base64," + "A" * 40_000
    as_part = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url}}]}
    as_field = {"role": "user", "content": None, "images": [data_url, data_url]}
    base = 3 + tokens.count_text("user")
    assert tokens.count_message(as_part, image_tokens=800) == base + 800
    assert tokens.count_message(as_field, image_tokens=100) == base + 200


def test_tool_calls_count_their_name_and_arguments():
    call = {"id": "c", "type": "function", "function": {"name": "search", "arguments": '{"q": "cats"}'}}
    with_call = tokens.count_message({"role": "assistant", "content": None, "tool_calls": [call]})
    without = tokens.count_message({"role": "assistant", "content": None})
    assert with_call - without == 3 + tokens.count_text("search") + tokens.count_text('{"q": "cats"}')


@pytest.mark.parametrize("content", [{"a": 1}, [{"type": "text", "text": "x"}, {"type": "input_audio", "d": 1}]])
def test_structured_content_is_counted_not_ignored(content):
    assert tokens.count_message({"role": "user", "content": content}) > 3 + tokens.count_text("user")


def test_a_request_adds_reply_priming():
    assert tokens.count_request([10, 20]) == 33
