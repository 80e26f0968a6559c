"""The embedding interface every backend implements, and the two kinds of failure.

A vector is only comparable with vectors of the same model, so every backend names its
`model` and `dimension`; callers store both with each vector and never mix them in one search.
Transient failures (rate limits, 5xx, timeouts) are retried by the index job with backoff;
permanent ones (bad request, auth, refused input) mark the item failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import numpy as np

Purpose = Literal["document", "query"]


class EmbeddingError(Exception):
    """Base of backend failures; `detail` is safe to store and show (no secrets)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class EmbeddingTransientError(EmbeddingError):
    """Worth retrying later; `retry_after` is the server's hint in seconds, if any."""

    def __init__(self, detail: str, *, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class EmbeddingPermanentError(EmbeddingError):
    """Retrying the same request cannot succeed."""


class EmbeddingBackend(Protocol):
    name: str  # "offline" | "openai" | "fake"
    model: str  # recorded with every vector, e.g. "all-MiniLM-L6-v2-q8"
    dimension: int

    def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        """float32 array of shape (len(texts), dimension), each row L2-normalised.

        `purpose` matters to models trained with asymmetric prompts (a question is not
        phrased like the passage that answers it); the others ignore it."""
        ...


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length as float32, so a dot product is the cosine. An all-zero row
    (nothing to embed) stays zero rather than becoming NaN."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
