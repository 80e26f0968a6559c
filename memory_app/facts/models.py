"""Facts and the extraction runs that write them."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from memory_app.conversations.models import Message, Session
from memory_app.jobs.models import JobRecord
from memory_app.tenancy.models import Team


class FactExtractionRun(JobRecord):
    """A durable fact-extraction job. Its input (a message range or a text) and the LLM's
    raw answer are kept, so an unusable answer is quarantined for staff, never lost."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        QUARANTINED = "quarantined", "quarantined"
        DISCARDED = "discarded", "discarded"
        BUDGET_EXCEEDED = "budget_exceeded", "budget exceeded"

    class Trigger(models.TextChoices):
        AUTO = "auto", "auto"  # appends to a "kg" session, debounced
        MANUAL = "manual", "manual"  # a message range asked for through the API
        TEXT = "text", "text"  # a text given with the request (extract_and_update_from_text)

    ACTIVE = (Status.PENDING, Status.RUNNING)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="fact_extraction_runs")
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="fact_extraction_runs", null=True, blank=True
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    # Messages from_seq..to_seq (inclusive). An automatic run takes its range when it is
    # claimed (everything after the previous automatic run), so one run covers every
    # append made while it waited.
    from_seq = models.PositiveBigIntegerField(null=True, blank=True)
    to_seq = models.PositiveBigIntegerField(null=True, blank=True)
    input_text = models.TextField(blank=True)
    input_role = models.CharField(max_length=200, blank=True)
    raw_output = models.TextField(blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    backend = models.CharField(max_length=50, blank=True)
    model = models.CharField(max_length=200, blank=True)
    facts_added = models.PositiveIntegerField(default=0)
    facts_seen = models.PositiveIntegerField(default=0)
    facts_invalidated = models.PositiveIntegerField(default=0)
    # When the job last became runnable (queued, re-queued or due after a backoff): the sweeper's clock.
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # The debounce: at most one automatic run per session waiting to take its range.
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status="pending", trigger="auto", to_seq__isnull=True),
                name="one_queued_auto_fact_run_per_session",
            )
        ]
        indexes = [
            models.Index(fields=["team", "-created_at"], name="factrun_team_created"),
            models.Index(fields=["session", "trigger", "to_seq"], name="factrun_session_cursor"),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.trigger} fact extraction {self.status} ({self.session_id or self.team_id})"


class Fact(models.Model):
    """A (subject, predicate, object) triple, as written and normalised for matching.

    Facts are never deleted by the services: a contradicted or removed fact gets
    `invalidated_at` (and `invalidated_by`, the fact that replaced it), so `as_of`
    queries can still say what was true then.
    """

    TEAM_SCOPE = ""  # scope_key of a team-wide fact (session is null)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="facts")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="facts", null=True, blank=True)
    # The session id as text, or "" for a team-wide fact: unique indexes treat NULLs as
    # distinct, so the live-fact constraint needs a scope that is never null.
    scope_key = models.CharField(max_length=36, default=TEAM_SCOPE, blank=True)
    role = models.CharField(max_length=200)
    subject = models.TextField()
    predicate = models.TextField()
    object = models.TextField()
    subject_norm = models.TextField()
    predicate_norm = models.TextField()
    object_norm = models.TextField()
    # sha256 of the normalised triple: the identity the constraint compares. It and the
    # term keys below are short, so they index on every database whatever the length of
    # the terms (a long non-ASCII term would overflow a PostgreSQL btree entry).
    fact_key = models.CharField(max_length=64)
    subject_key = models.CharField(max_length=32)
    object_key = models.CharField(max_length=32)
    source_message = models.ForeignKey(Message, on_delete=models.SET_NULL, related_name="facts", null=True, blank=True)
    extraction_run = models.ForeignKey(
        FactExtractionRun, on_delete=models.SET_NULL, related_name="facts", null=True, blank=True
    )
    extractor = models.CharField(max_length=260)  # "manual" or "<backend>:<model>"
    # Added, edited or restored by an admin (key or dashboard): only an admin supersedes it.
    curated = models.BooleanField(default=False)
    confidence = models.FloatField(null=True, blank=True)
    times_seen = models.PositiveIntegerField(default=1)
    # When the fact was last stated or extracted again: a re-stated fact is recent again, while
    # created_at (and the source message and run) keep its first sighting.
    last_seen_at = models.DateTimeField(default=timezone.now)
    valid_from = models.DateTimeField(default=timezone.now)
    invalidated_at = models.DateTimeField(null=True, blank=True)
    invalidated_by = models.ForeignKey(
        "self", on_delete=models.SET_NULL, related_name="replaced", null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # A LangGraph store item's namespace exactly as given (labels joined with "."; null for any other
    # fact) and its value as JSON (null for a deletion marker): the store filters both in the database,
    # where the normalised subject would merge namespaces that differ only in letter case.
    store_namespace = models.TextField(null=True, blank=True)
    store_value = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "scope_key", "fact_key"],
                condition=Q(invalidated_at__isnull=True),
                name="uniq_live_fact_per_scope",
            )
        ]
        indexes = [
            models.Index(fields=["team", "-created_at"], name="fact_team_created"),
            # Newest first within an entity: a hub's page is read in order instead of sorted.
            models.Index(fields=["team", "subject_key", "-created_at"], name="fact_team_subject_new"),
            models.Index(fields=["team", "object_key", "-created_at"], name="fact_team_object_new"),
            # A session's facts by their latest sighting: the KG memory's recent reads.
            models.Index(fields=["session", "-last_seen_at"], name="fact_session_seen"),
            # A store's live items by namespace (exact lookups and prefix ranges), newest first.
            models.Index(
                fields=["team", "scope_key", "store_namespace", "-created_at"],
                condition=Q(invalidated_at__isnull=True, store_namespace__isnull=False),
                name="fact_store_live",
            ),
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"({self.subject}, {self.predicate}, {self.object})"
