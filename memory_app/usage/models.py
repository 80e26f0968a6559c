"""Token economics: what memory work costs in LLM tokens and what the served contexts save.

Two append-only ledgers. `LLMCall` has one row per call memsite makes to an LLM (summaries,
fact extraction, experience selection), written by `memory_app.usage.llm_calls.llm_complete`, the one
place that calls a backend. `ContextServe` has one row per context served, with the tokens of
the raw history it stands for beside the tokens actually sent. `ContextRecord` keeps, for
MEMSITE_CONTEXT_RECORD_DAYS, what one served context sent, for its replay. Imported by
memory_app.models.
"""

from __future__ import annotations

import json
import os
import time
import uuid
import zlib
from datetime import UTC, datetime
from typing import Any

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
    # Tokens of stored messages the window (the default window, `last`, `max_tokens`) kept out;
    # the rest of the saving is compaction's (usage/selectors.py, `_COMPACTION_SAVED`). Null on rows served
    # before the two were told apart.
    window_kept_out_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    # When the context was served, not when its batch was written (memory_app/context_ledger.py).
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    # The id the /context/ answer carries, chosen when it is served (its batch is written later).
    # Null on rows served before answers had one.
    context_id = models.UUIDField(null=True, blank=True, unique=True, editable=False)

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


def new_context_id() -> uuid.UUID:
    """A UUID version 7: the millisecond it was made, then 74 random bits. Time-ordered ids keep
    the index's inserts at its end, and the replay can tell an id too young to be written yet."""
    millis = time.time_ns() // 1_000_000
    value = (millis & (2**48 - 1)) << 80 | int.from_bytes(os.urandom(10)) & (2**80 - 1)
    value = value & ~(0xF << 76) | 0x7 << 76  # version 7
    value = value & ~(0x3 << 62) | 0x2 << 62  # RFC 4122 variant
    return uuid.UUID(int=value)


def context_id_time(context_id: uuid.UUID) -> datetime | None:
    """When a version-7 id was made; None for any other id."""
    if context_id.version != 7:
        return None
    return datetime.fromtimestamp((context_id.int >> 80) / 1000, tz=UTC)


class CompressedJSONField(models.BinaryField):
    """JSON stored zlib-compressed; reads back as the same Python values.

    Compressed when the row is saved: for a batched row that is in the ledger's flusher thread,
    after the answer went out. Strings go through UTF-8 with surrogates passed, so a value reads
    back exactly as it was written, lone surrogates included.
    """

    # What the model attribute holds for the type checker: the JSON value, not bytes.
    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    # bench/context_record_bench.py: 5-15 % smaller than level 1, for under 0.2 ms more on a
    # 100-message context (and paid in the flusher thread, not in the request).
    LEVEL = 6

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if value is not None and not isinstance(value, bytes | memoryview):
            value = compress_json(value, level=self.LEVEL)
        return super().get_db_prep_value(value, connection, prepared)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return None if value is None else decompress_json(bytes(value))

    def deconstruct(self) -> Any:
        # Named where memory_app.models re-exports it, as VerbatimJSONField is.
        name, _path, args, kwargs = super().deconstruct()
        return name, "memory_app.models.CompressedJSONField", args, kwargs


def compress_json(value: Any, *, level: int = CompressedJSONField.LEVEL) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return zlib.compress(text.encode("utf-8", "surrogatepass"), level)


def decompress_json(data: bytes) -> Any:
    return json.loads(zlib.decompress(data).decode("utf-8", "surrogatepass"))


class ContextRecord(models.Model):
    """What one served context sent, kept to replay it: its messages as served, the read's
    parameters, the recalled memories with their text, the summary it started from.

    The payload is stored, not a reference to the messages: a message can be edited or deleted,
    a compaction reverted, after the context was served, and the replay must still show what
    the model saw. Its tokens by part and its totals are on its ledger row (`serve`). Written
    in the same batch as that row; kept MEMSITE_CONTEXT_RECORD_DAYS (a beat job deletes older).
    """

    serve = models.OneToOneField(
        ContextServe,
        to_field="context_id",
        db_column="context_id",
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="record",
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now, editable=False)  # when it was served
    body = CompressedJSONField()  # a memory_client.vocabulary.wire.ContextRecordBody

    class Meta:
        indexes = [
            models.Index(fields=["session", "created_at"], name="ctxrecord_session_created"),
            models.Index(fields=["created_at"], name="ctxrecord_created"),
        ]

    def __str__(self) -> str:
        return f"context {self.serve_id}"
