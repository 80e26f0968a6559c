"""Any OpenAI-compatible server through the openai SDK: with the embeddings backend
(memory_app.search.embeddings.openai_backend), the only modules importing `openai`.

SDK retries are off: retrying is the job system's decision (Celery, with backoff and the
server's Retry-After), so one attempt here is exactly one HTTP request.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import openai
from django.conf import settings

from memory_app.llm.base import (
    ChatRequest,
    LLMPayloadTooLarge,
    LLMPermanentError,
    LLMResult,
    LLMTransientError,
)


def _retry_after(exc: openai.APIStatusError) -> float | None:
    raw = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return float(raw) if raw is not None else None
    except ValueError:
        return None


@functools.lru_cache(maxsize=8)
def _client(base_url: str, api_key: str, timeout: float) -> openai.OpenAI:
    """One client per process and configuration: building one loads the CA bundle for its
    SSL context (~18 ms CPU), more than the rest of a compaction job's own work, and a
    shared client reuses its HTTP connections. The client is thread-safe."""
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)


class OpenAIBackend:
    name = "openai"
    supports_json_object = True
    billable = True

    def __init__(self) -> None:
        self.model = settings.LLM_MODEL
        self._client = _client(settings.LLM_BASE_URL, settings.LLM_API_KEY or "unused", settings.LLM_TIMEOUT)

    def complete(self, request: ChatRequest) -> LLMResult:
        started = time.monotonic()
        kwargs: dict[str, Any] = {"model": self.model, "messages": request.messages}
        if request.max_tokens:
            kwargs["max_tokens"] = request.max_tokens
        if request.json_object:
            kwargs["response_format"] = {"type": "json_object"}
        try:
            response = self._client.chat.completions.create(**kwargs)
        except openai.APITimeoutError as exc:
            raise LLMTransientError(f"timed out after {settings.LLM_TIMEOUT}s") from exc
        except openai.APIConnectionError as exc:
            raise LLMTransientError("could not connect to the LLM server") from exc
        except openai.RateLimitError as exc:
            raise LLMTransientError("rate limited (429)", retry_after=_retry_after(exc)) from exc
        except openai.APIStatusError as exc:
            if exc.status_code == 413:
                raise LLMPayloadTooLarge("payload too large (413)") from exc
            if exc.status_code >= 500 or exc.status_code in (408, 409):
                raise LLMTransientError(f"server error ({exc.status_code})", retry_after=_retry_after(exc)) from exc
            raise LLMPermanentError(f"request refused ({exc.status_code})") from exc
        except openai.APIResponseValidationError as exc:
            raise LLMTransientError("malformed response from the LLM server") from exc
        except ValueError as exc:  # the SDK could not decode the body as JSON
            raise LLMTransientError("malformed response from the LLM server") from exc

        choices = getattr(response, "choices", None)
        if not choices or choices[0].message is None or choices[0].message.content is None:
            raise LLMTransientError("the LLM returned no message content")
        usage = getattr(response, "usage", None)
        return LLMResult(
            text=choices[0].message.content,
            backend=self.name,
            model=getattr(response, "model", None) or self.model,
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            latency_ms=int((time.monotonic() - started) * 1000),
        )
