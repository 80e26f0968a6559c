"""The LLM interface every backend implements, and the two kinds of failure.

Transient failures (rate limits, 5xx, timeouts, unusable output) are retried by the
caller with backoff; permanent ones (bad request, auth, payload too large) end the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from memory_client.vocabulary.messages import LLMMessage


@dataclass(frozen=True)
class LLMResult:
    text: str
    backend: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: int = 0


@dataclass(frozen=True)
class ChatRequest:
    messages: list[LLMMessage]
    purpose: str  # "summarize", "extract_facts", "select_experiences"
    max_tokens: int | None = None
    json_object: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


class LLMError(Exception):
    """Base of backend failures; `detail` is safe to store and show (no secrets)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class LLMTransientError(LLMError):
    """Worth retrying later; `retry_after` is the server's hint in seconds, if any."""

    def __init__(self, detail: str, *, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class LLMPermanentError(LLMError):
    """Retrying the same request cannot succeed."""


class LLMPayloadTooLarge(LLMPermanentError):
    """The request exceeded the provider's size limit (HTTP 413)."""


class LLMBudgetExceeded(LLMPermanentError):
    """The team's daily LLM token budget is spent: the call was not made. Retrying before
    `retry_after` seconds (the next budget day) cannot succeed."""

    def __init__(self, detail: str, *, retry_after: float) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class LLMBackend(Protocol):
    name: str
    model: str
    supports_json_object: bool
    billable: bool  # False when a call costs nothing (the offline backend): budgets ignore it

    def complete(self, request: ChatRequest) -> LLMResult: ...
