"""The only place that talks to an LLM. Pick a backend with `get_backend()`.

Like Django's mail backends, the backend is a dotted path (`LLM_BACKEND`); by default the
OpenAI-compatible backend when `LLM_BASE_URL` is set, else the offline extractive one.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.utils.module_loading import import_string

from memory_app.llm.base import (
    ChatRequest,
    LLMBackend,
    LLMBudgetExceeded,
    LLMError,
    LLMPayloadTooLarge,
    LLMPermanentError,
    LLMResult,
    LLMTransientError,
)

OPENAI_BACKEND = "memory_app.llm.openai_backend.OpenAIBackend"
EXTRACTIVE_BACKEND = "memory_app.llm.extractive.ExtractiveBackend"


def backend_path() -> str:
    if settings.LLM_BACKEND:
        return settings.LLM_BACKEND
    return OPENAI_BACKEND if settings.LLM_BASE_URL else EXTRACTIVE_BACKEND


def get_backend(path: str | None = None) -> LLMBackend:
    return import_string(path or backend_path())()


def complete(backend: LLMBackend, request: ChatRequest) -> LLMResult:
    """`backend.complete(request)`, recorded in the metrics (tokens, latency, errors by
    purpose). Called only by memory_app.usage.llm_calls.llm_complete, which every call site uses
    (budget check and the LLMCall ledger), so no LLM call goes uncounted."""
    from memory_app.ops.metrics import observe_llm_call

    started = time.monotonic()
    try:
        result = backend.complete(request)
    except Exception as exc:
        observe_llm_call(purpose=request.purpose, backend=backend.name, seconds=time.monotonic() - started, error=exc)
        raise
    observe_llm_call(purpose=request.purpose, backend=backend.name, seconds=time.monotonic() - started, result=result)
    return result


__all__ = [
    "ChatRequest",
    "LLMBackend",
    "LLMBudgetExceeded",
    "LLMError",
    "LLMPayloadTooLarge",
    "LLMPermanentError",
    "LLMResult",
    "LLMTransientError",
    "complete",
    "get_backend",
]
