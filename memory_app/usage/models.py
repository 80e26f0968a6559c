"""Token economics: what memory work costs in LLM tokens and what the served contexts save.

Two append-only ledgers. `LLMCall` has one row per call memsite makes to an LLM (summaries,
fact extraction, experience selection), written by `memory_app.usage.llm_calls.llm_complete`, the one
place that calls a backend. `ContextServe` has one row per context served, with the tokens of
the raw history it stands for beside the tokens actually sent. Imported by memory_app.models.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memory_app.conversations.models import Session
from memory_app.tenancy.models import Team
from memsite.fields import JSONField


class LLMCall(models.Model):
    class Purpose(models.TextChoices):
        SUMMARIZE = "summarize", "summarize"
        EXTRACT_FACTS = "extract_facts", "extract facts"
        SELECT_EXPERIENCES = "select_experiences", "select experiences"

    class Outcome(models.TextChoices):
        OK = "ok", "ok"
        TRANSIENT_ERROR = "transient_error", "transient error"
        PERMANENT_ERROR = "permanent_error", "permanent error"
        BUDGET_EXCEEDED = "budget_exceeded", "budget exceeded"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="llm_calls")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="llm_calls", null=True, blank=True)
    agent = models.CharField(max_length=200, blank=True)  # the session's agent, or the selecting role
    purpose = models.CharField(max_length=32, choices=Purpose.choices)
    backend = models.CharField(max_length=50)
    model = models.CharField(max_length=200, blank=True)
    billable = models.BooleanField(default=True)  # False for the offline extractive backend
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    latency_ms = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["team", "created_at"], name="llmcall_team_created"),
            models.Index(fields=["session", "created_at"], name="llmcall_session_created"),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.purpose} {self.outcome} ({self.prompt_tokens}+{self.completion_tokens})"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ContextServe(models.Model):
    """One context served: `raw_tokens` is what sending the whole raw history (system prompt and
    every stored message) would have cost, `served_tokens` what the context actually holds."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="context_serves")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="context_serves")
    agent = models.CharField(max_length=200, blank=True)
    raw_tokens = models.PositiveBigIntegerField()
    served_tokens = models.PositiveIntegerField()
    # The memories recall injected into this context ({kind, id, item_id, score}) and what for.
    recall_query = models.CharField(max_length=1000, blank=True)
    recalled = JSONField(default=list, blank=True)
    # What `served_tokens` is made of (ServedContext.breakdown, filled where the context is
    # built). Null on rows served before the parts were kept: unknown, not zero.
    system_tokens = models.PositiveIntegerField(null=True, blank=True)  # the system prompt
    summary_tokens = models.PositiveIntegerField(null=True, blank=True)  # summary + the instruction it keeps
    recall_tokens = models.PositiveIntegerField(null=True, blank=True)  # the recalled-memories message
    window_tokens = models.PositiveIntegerField(null=True, blank=True)  # raw messages (a borrowed one too)
    priming_tokens = models.PositiveIntegerField(null=True, blank=True)  # the reply priming every request pays
    # When the context was served, not when its batch was written (memory_app/context_ledger.py).
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        indexes = [
            models.Index(fields=["team", "created_at"], name="ctxserve_team_created"),
            models.Index(fields=["session", "created_at"], name="ctxserve_session_created"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}: {self.served_tokens}/{self.raw_tokens}"

    @property
    def saved_tokens(self) -> int:
        return max(self.raw_tokens - self.served_tokens, 0)

    @property
    def has_parts(self) -> bool:
        return self.window_tokens is not None
