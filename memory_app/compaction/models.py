"""A compaction: the durable job and its ledger row."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from memory_app.conversations.models import Session
from memory_app.jobs.models import JobRecord
from memory_app.tenancy.models import Team
from memsite.fields import JSONField


class CompactionRun(JobRecord):
    """A durable compaction job and its ledger entry. Raw messages are never touched:
    the summary stands in for messages (covered_from_seq..covered_to_seq] at read time."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        REVERTED = "reverted", "reverted"
        # The team's daily LLM token budget was spent: ended without calling the LLM.
        BUDGET_EXCEEDED = "budget_exceeded", "budget exceeded"
        # The processors had nothing worth an LLM call to do (summarization disabled, below
        # min_reduction_ratio, or every message in the protected tail): ended without one.
        SKIPPED = "skipped", "skipped"

    class Trigger(models.TextChoices):
        THRESHOLD = "threshold", "threshold"
        MANUAL = "manual", "manual"
        PAYLOAD_ERROR = "payload_error", "payload error"

    ACTIVE = (Status.PENDING, Status.RUNNING)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="compaction_runs")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="compaction_runs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    attempts = models.PositiveSmallIntegerField(default=0)
    # Seqs this run's summary replaces: (covered_from_seq, covered_to_seq]; set when it runs.
    covered_from_seq = models.PositiveBigIntegerField(default=0)
    covered_to_seq = models.PositiveBigIntegerField(null=True, blank=True)
    summary = JSONField(null=True, blank=True)  # the messages that stand in for the range
    pre_tokens = models.PositiveIntegerField(default=0)
    post_tokens = models.PositiveIntegerField(default=0)
    pre_bytes = models.PositiveBigIntegerField(default=0)
    post_bytes = models.PositiveBigIntegerField(default=0)
    pre_messages = models.PositiveIntegerField(default=0)
    post_messages = models.PositiveIntegerField(default=0)
    stages_run = JSONField(default=list, blank=True)
    # Every processor of the session's chain: whether it ran, and why not ({processor, ran, reason}).
    stages = JSONField(default=list, blank=True)
    # What the session was when this run was queued or planned: a run that could not make
    # progress is not queued again until the session has new messages or another config.
    seen_seq = models.PositiveBigIntegerField(default=0)
    config_digest = models.CharField(max_length=64, blank=True)
    # A reverted run holds automatic compaction until the raw history reaches this many
    # tokens (new messages worth a compaction); "Compact now" lifts the hold.
    hold_until_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    backend = models.CharField(max_length=50, blank=True)
    model = models.CharField(max_length=200, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the job last became runnable (queued or re-queued): the sweeper's clock.
    queued_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    reverted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One compaction per session at a time, even under concurrent requests.
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status__in=["pending", "running"]),
                name="one_active_compaction_per_session",
            )
        ]
        indexes = [models.Index(fields=["session", "-created_at"], name="compaction_session_created")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.trigger} compaction {self.status} ({self.session_id})"
