"""Any OpenAI-compatible embeddings server through the openai SDK (`EMBEDDINGS_BASE_URL`).

SDK retries are off, as for the LLM: retrying is the index job's decision (backoff and the
server's Retry-After), so one call here is one HTTP request per batch of texts.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from email.utils import parsedate_to_datetime

import numpy as np
import openai
from django.conf import settings

from memory_app.search.embeddings.base import (
    EmbeddingPermanentError,
    EmbeddingTransientError,
    Purpose,
    normalise_rows,
)

BATCH_SIZE = 128  # texts per request: far below OpenAI's 2048 inputs, small enough for local servers


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """The Retry-After header in seconds: a number, or an HTTP date."""
    raw = exc.response.headers.get("retry-after") if exc.response is not None else None
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


@functools.lru_cache(maxsize=8)
def _client(base_url: str, api_key: str, timeout: float) -> openai.OpenAI:
    """One client per process and configuration (building one loads the CA bundle; a shared
    client reuses its connections). The client is thread-safe."""
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)


class OpenAIEmbeddings:
    name = "openai"

    def __init__(self) -> None:
        self.model = settings.EMBEDDINGS_MODEL
        self.timeout = settings.EMBEDDINGS_TIMEOUT
        self._dimension: int | None = settings.EMBEDDINGS_DIMENSION or None
        self._client = _client(settings.EMBEDDINGS_BASE_URL, settings.EMBEDDINGS_API_KEY or "unused", self.timeout)

    @property
    def dimension(self) -> int:
        """EMBEDDINGS_DIMENSION when set, else what the server answers (one probe request when
        nothing was embedded yet, so it can raise the embed errors)."""
        if self._dimension is None:
            self.embed(["dimension probe"], purpose="query")
        assert self._dimension is not None
        return self._dimension

    def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        """`purpose` is not sent: the OpenAI API has no such field, and servers that need a
        query/passage distinction are configured with a model name for it."""
        batches = [self._embed_batch(list(texts[i : i + BATCH_SIZE])) for i in range(0, len(texts), BATCH_SIZE)]
        if not batches:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        return np.vstack(batches)

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        try:
            response = self._client.embeddings.create(model=self.model, input=texts, encoding_format="float")
        except openai.APITimeoutError as exc:
            raise EmbeddingTransientError(f"timed out after {self.timeout}s") from exc
        except openai.APIConnectionError as exc:
            raise EmbeddingTransientError("could not connect to the embeddings server") from exc
        except openai.RateLimitError as exc:
            raise EmbeddingTransientError("rate limited (429)", retry_after=_retry_after(exc)) from exc
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code in (408, 409):
                raise EmbeddingTransientError(
                    f"server error ({exc.status_code})", retry_after=_retry_after(exc)
                ) from exc
            raise EmbeddingPermanentError(f"request refused ({exc.status_code})") from exc
        except openai.APIResponseValidationError as exc:
            raise EmbeddingTransientError("malformed response from the embeddings server") from exc
        except ValueError as exc:  # the SDK could not decode the body as JSON
            raise EmbeddingTransientError("malformed response from the embeddings server") from exc

        data = sorted(getattr(response, "data", None) or [], key=lambda item: item.index)
        if len(data) != len(texts):
            raise EmbeddingTransientError(f"the embeddings server returned {len(data)} vectors for {len(texts)} texts")
        try:
            vectors = np.array([item.embedding for item in data], dtype=np.float32)
        except (TypeError, ValueError) as exc:  # ragged rows or non-numbers
            raise EmbeddingTransientError("malformed vectors from the embeddings server") from exc
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise EmbeddingTransientError("malformed vectors from the embeddings server")
        if self._dimension is None:
            self._dimension = int(vectors.shape[1])
        elif vectors.shape[1] != self._dimension:
            # Retrying cannot help: the server's model is not the configured one.
            raise EmbeddingPermanentError(
                f"the embeddings server returned {vectors.shape[1]} dimensions, expected {self._dimension}"
            )
        return normalise_rows(vectors)
