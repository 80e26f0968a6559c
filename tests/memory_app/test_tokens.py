"""Token counts: tiktoken's cl100k_base, offline, with OpenAI's chat message accounting."""

from __future__ import annotations

import socket

import pytest

from memory_app import tokens


def test_it_counts_with_the_real_cl100k_base_encoding():
    # Known values from OpenAI's cookbook ("How to count tokens with tiktoken").
    assert tokens.count_text("tiktoken is great!") == 6
    assert tokens.get_encoding().encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]


def test_it_loads_the_encoding_without_the_network(monkeypatch):
    tokens.get_encoding.cache_clear()

    def no_network(*args, **kwargs):
        raise AssertionError("tried to open a network connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    assert tokens.count_text("offline please") > 0


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
