"""Every LLM call memsite makes goes through `llm_complete`: it enforces the team's daily token
budget, calls the backend, and writes the call to the `LLMCall` ledger whatever the outcome.

The budget is checked before the call against what the team's ledger says it spent since UTC
midnight. Two workers may both pass the check and together overshoot by one call each: a
budget is a cost ceiling, not an exact quota, and a lock here would serialise every LLM call
of a team. The offline extractive backend costs nothing, so it is never refused.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Protocol

from django.conf import settings
from django.utils import timezone

from memory_app.conversations.models import Session
from memory_app.llm import complete
from memory_app.llm.base import (
    ChatRequest,
    LLMBackend,
    LLMBudgetExceeded,
    LLMError,
    LLMPermanentError,
    LLMResult,
    LLMTransientError,
)
from memory_app.tenancy.models import Team
from memory_app.usage import context_ledger
from memory_app.usage import selectors as usage_selectors
from memory_app.usage.models import ContextRecord, ContextServe, LLMCall, new_context_id
from memory_client.vocabulary.wire import ContextRecordBody, RecalledMemory


class ServedParts(Protocol):
    """A served context's tokens by part (memory_app.conversations.context.ContextBreakdown,
    which imports this module's callers: named by shape, not imported)."""

    @property
    def system(self) -> int: ...

    @property
    def summary(self) -> int: ...

    @property
    def recall(self) -> int: ...

    @property
    def window(self) -> int: ...

    @property
    def priming(self) -> int: ...


ERROR_MAX_CHARS = 500


def _is_billable(backend: LLMBackend) -> bool:
    return getattr(backend, "billable", True)


def _check_budget(team: Team, backend: LLMBackend) -> None:
    budget = usage_selectors.daily_budget(team)
    if not budget or not _is_billable(backend):
        return
    spent = usage_selectors.tokens_spent_today(team_id=team.pk)
    if spent >= budget:
        raise LLMBudgetExceeded(
            f"the team's daily LLM token budget is spent ({spent} of {budget} tokens since 00:00 UTC)",
            retry_after=usage_selectors.seconds_until_budget_resets(),
        )


def _outcome(exc: LLMError) -> str:
    if isinstance(exc, LLMBudgetExceeded):
        return LLMCall.Outcome.BUDGET_EXCEEDED
    if isinstance(exc, LLMTransientError):
        return LLMCall.Outcome.TRANSIENT_ERROR
    return LLMCall.Outcome.PERMANENT_ERROR


def llm_complete(
    *,
    backend: LLMBackend,
    request: ChatRequest,
    team: Team,
    session: Session | None = None,
    agent: str = "",
) -> LLMResult:
    """Call `backend` for `team` and record the call. Raises the backend's LLMError, or
    LLMBudgetExceeded (without calling the backend) when the team's daily budget is spent."""
    record: dict[str, Any] = {
        "team": team,
        "session": session,
        "agent": agent[:200],
        "purpose": request.purpose,
        "backend": backend.name,
        "model": backend.model,
        "billable": _is_billable(backend),
    }
    started = time.monotonic()
    try:
        _check_budget(team, backend)
        result = complete(backend, request)  # the metrics' boundary
    except LLMError as exc:
        LLMCall.objects.create(
            **record,
            latency_ms=int((time.monotonic() - started) * 1000),
            outcome=_outcome(exc),
            error=exc.detail[:ERROR_MAX_CHARS],
        )
        raise
    LLMCall.objects.create(
        **{**record, "backend": result.backend, "model": result.model},
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        latency_ms=result.latency_ms or int((time.monotonic() - started) * 1000),
        outcome=LLMCall.Outcome.OK,
    )
    return result


def context_served_record(
    *,
    session: Session,
    agent: str,
    served_tokens: int,
    recall_query: str = "",
    recalled: list[RecalledMemory] | None = None,
    parts: ServedParts | None = None,
    replay: ContextRecordBody | None = None,
    window_kept_out: int | None = None,
) -> uuid.UUID:
    """Ledger row for one context served: what the raw history would have cost beside what was
    sent, and what the sent tokens were made of (`parts`: the served context's breakdown);
    `window_kept_out`: the stored messages' tokens the window left out.
    With `replay`, the record that replays it, kept MEMSITE_CONTEXT_RECORD_DAYS (0: none).
    Written in batches (memory_app/context_ledger.py): a context read is every agent turn.
    Returns the context's id, which the answer names before its batch is written."""
    served_at = timezone.now()
    context_id = new_context_id()
    record = None
    if replay is not None and settings.CONTEXT_RECORD_DAYS > 0:
        # By key, not by the unsaved row: the row gets its pk only when its batch is written.
        record = ContextRecord(
            serve_id=context_id, team_id=session.team_id, session_id=session.pk, created_at=served_at, body=replay
        )
    context_ledger.record(
        ContextServe(
            team_id=session.team_id,
            session_id=session.pk,
            agent=agent[:200],
            raw_tokens=session.system_prompt_tokens + session.history_tokens,
            served_tokens=served_tokens,
            recall_query=recall_query[:1000],
            recalled=recalled or [],
            created_at=served_at,
            context_id=context_id,
            system_tokens=parts.system if parts else None,
            summary_tokens=parts.summary if parts else None,
            recall_tokens=parts.recall if parts else None,
            window_tokens=parts.window if parts else None,
            priming_tokens=parts.priming if parts else None,
            window_kept_out_tokens=window_kept_out,
        ),
        record,
    )
    return context_id


__all__ = [
    "LLMBudgetExceeded",
    "LLMPermanentError",
    "context_served_record",
    "llm_complete",
]
