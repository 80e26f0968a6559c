"""What the client raises: marsys's MessageError for misuse and AgentConfigurationError for a bad setting,
ApiError for what the server refused."""

from __future__ import annotations

from typing import Any


class MemoryClientError(Exception):
    """Base of every error this package raises on purpose."""


class MessageError(MemoryClientError):
    """A message was misused or refused: the cases marsys raises `MessageError` for.

    marsys 0.2.1 passes keyword context (message_id, invalid_data, ...) that its own
    constructor rejects, so there the intended MessageError surfaces as a TypeError. Here the
    context is kept in `context`, and `fields` holds the server's per-field reasons when the
    server refused the message (e.g. {"tool_call_id": ["required for role 'tool'"]}).
    """

    error_code = "MESSAGE_ERROR"

    def __init__(self, message: str, *, fields: dict[str, list[str]] | None = None, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields or {}
        self.context = context


class AgentConfigurationError(MemoryClientError, ValueError):
    """marsys's AgentConfigurationError (marsys.agents.exceptions): a memory built with a setting it
    cannot take, e.g. an unknown `memory_type`. A ValueError too, as the client raised before.

    `config_field` and `config_value` name the setting, as in marsys.
    """

    error_code = "AGENT_CONFIGURATION_ERROR"

    def __init__(self, message: str, *, config_field: str | None = None, config_value: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.config_field = config_field
        self.config_value = config_value


class ApiError(MemoryClientError):
    """The server answered with an error (or could not be reached: status_code is None)."""

    def __init__(
        self,
        detail: str,
        *,
        status_code: int | None,
        error: str = "",
        fields: dict[str, list[str]] | None = None,
    ) -> None:
        super().__init__(f"{status_code or 'no response'} {error}: {detail}".strip())
        self.detail = detail
        self.status_code = status_code
        self.error = error
        self.fields = fields or {}


class AuthenticationError(ApiError):
    """401/403: the key is missing, wrong, revoked, or may only read."""


class NotFoundError(ApiError):
    """404: the session does not exist or belongs to another team (the server tells neither apart)."""


class ConflictError(ApiError):
    """409: e.g. an external_id or a message_id already used by another row."""


class MemoryConfigError(ApiError, ValueError):
    """400 for a `memory_config` the server refused; `fields` names each bad setting's path.

    e.g. {"memory_config.active_context.mode": ["must be one of compaction, sliding_window"]}.
    """


class FactExtractionError(MemoryClientError):
    """A fact extraction run ended without its facts: failed, quarantined or discarded.

    `run` is the run as the API shows it (status, error, raw_output, ...); a quarantined run
    keeps the model's raw output, and staff can retry, edit and accept, or discard it.
    """

    def __init__(self, message: str, *, run: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.run = run or {}
        self.run_id: str | None = self.run.get("id")
        self.status: str | None = self.run.get("status")


class FactExtractionTimeout(FactExtractionError, TimeoutError):
    """The run was still pending or running when the wait ran out; it may complete later."""


class SearchQueryError(ApiError, ValueError):
    """400 for a search or recall the server refused: empty or too long a query, an unknown kind,
    a bad filter. `fields` names each bad argument, e.g. {"kinds[0]": ['"tweets" is not a valid
    choice.']} (`since`/`until` for the API's `from`/`to`)."""
