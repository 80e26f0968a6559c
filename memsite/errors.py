"""Domain errors raised by services and selectors; mapped to HTTP in memsite.api_errors only."""

from __future__ import annotations


class DomainError(Exception):
    """Base of every error a service raises on purpose."""

    code = "domain_error"

    def __init__(self, detail: str, *, fields: dict[str, list[str]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.fields = fields or {}


class InvalidInput(DomainError):
    """The request is well-formed JSON but breaks a rule that needs the stored data to check."""

    code = "validation_error"

    @classmethod
    def for_field(cls, field: str, message: str) -> InvalidInput:
        return cls(f"{field}: {message}", fields={field: [message]})


class NotFound(DomainError):
    code = "not_found"


class Conflict(DomainError):
    code = "conflict"


class PayloadTooLarge(DomainError):
    """The body is larger than this kind of request may be."""

    code = "payload_too_large"


class LLMUnavailable(DomainError):
    """The LLM did not answer now (timeout, rate limit, server error): the same request may work later."""

    code = "llm_unavailable"


class RetryLater(DomainError):
    """Refused for now: the same request may succeed after `retry_after` seconds (Retry-After)."""

    def __init__(self, detail: str, *, retry_after: float) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class NotRecordedYet(RetryLater):
    """Not found, but the id is young enough that the batch holding it may not be written yet:
    asking again after `retry_after` seconds tells (the served-context ledger writes in batches)."""

    code = "not_recorded_yet"


class BudgetExceeded(RetryLater):
    """The team's daily LLM token budget is spent; `retry_after` is the seconds until it renews."""

    code = "budget_exceeded"


class TooManyStreams(RetryLater):
    """This API key already holds as many live streams as one key may."""

    code = "too_many_streams"


class StreamsUnavailable(RetryLater):
    """The deployment holds as many live streams as it serves: a new one must wait for one to end."""

    code = "streams_unavailable"


class LLMFailed(DomainError):
    """The LLM refused the request (bad request, authentication, payload too large): retrying cannot help."""

    code = "llm_error"


class IdempotencyKeyReused(DomainError):
    """An Idempotency-Key sent again with a different request: the key names another write."""

    code = "idempotency_key_reused"


class MessageIdReused(DomainError):
    """A client-chosen message_id sent again with different content: the id names another message."""

    code = "message_id_reused"
