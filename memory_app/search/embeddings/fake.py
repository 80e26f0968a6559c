"""A deterministic stand-in for tests: no model, microseconds a text, same text -> same vector.

Feature hashing: each lowercased word stem and each character trigram adds +-1 to one of 64
buckets (the bucket and sign from a stable digest, never Python's per-process `hash`). Texts
sharing words share buckets, so they come out closer than unrelated ones - enough for tests
of ranking and fusion, not a model of meaning.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from memory_app.search.embeddings.base import Purpose, normalise_rows

DIMENSION = 64
WORD_WEIGHT = 2.0  # a shared word says more than a shared trigram
_SUFFIXES = ("ing", "ed", "es", "s", "ly")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _bucket(feature: str) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % DIMENSION, 1.0 if (value >> 32) & 1 else -1.0


def _vector(text: str) -> np.ndarray:
    vector = np.zeros(DIMENSION, dtype=np.float32)
    words = re.findall(r"\w+", text.lower())
    for word in words:
        index, sign = _bucket("w:" + _stem(word))
        vector[index] += sign * WORD_WEIGHT
        padded = f" {word} "
        for i in range(len(padded) - 2):
            index, sign = _bucket("t:" + padded[i : i + 3])
            vector[index] += sign
    if not vector.any():  # no words (or features that cancelled out): still a unit vector
        vector[_bucket("empty")[0]] = 1.0
    return vector


class FakeEmbeddings:
    name = "fake"
    model = "fake-hashing-64"
    dimension = DIMENSION

    def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        return normalise_rows(np.stack([_vector(text) for text in texts]))
