"""The append-only feed of what happened to a team's memory."""

from __future__ import annotations

from django.db import models

from memory_app.conversations.models import Session
from memory_app.tenancy.models import ApiKey, Team
from memsite.fields import JSONField


class MemoryEvent(models.Model):
    """Append-only feed of what happened to a session's memory."""

    class Kind(models.TextChoices):
        RESET = "reset", "reset"
        IMPORTED = "imported", "imported"
        COMPACTION_STARTED = "compaction_started", "compaction started"
        COMPACTION_COMPLETED = "compaction_completed", "compaction completed"
        COMPACTION_FAILED = "compaction_failed", "compaction failed"
        COMPACTION_REVERTED = "compaction_reverted", "compaction reverted"
        FACTS_EXTRACTED = "facts_extracted", "facts extracted"
        FACT_EXTRACTION_FAILED = "fact_extraction_failed", "fact extraction failed"
        FACT_EXTRACTION_QUARANTINED = "fact_extraction_quarantined", "fact extraction quarantined"
        FACT_INVALIDATED = "fact_invalidated", "fact invalidated"
        EXPERIENCE_APPROVED = "experience_approved", "experience approved"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memory_events")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="events", null=True, blank=True)
    kind = models.CharField(max_length=40, choices=Kind.choices)
    data = JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.kind} {self.session_id or self.team_id}"


class EventStreamLease(models.Model):
    """One open event stream, counted against the per-key and per-deployment caps.

    A row per stream (not a counter in one process) because the caps hold across every web
    process and node; a stream renews its row while it runs, so the row of a process that died
    stops counting once it is older than the lease (events.services.STREAM_LEASE_SECONDS).
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    opened_at = models.DateTimeField(auto_now_add=True)
    renewed_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"stream of key {self.api_key_id} since {self.opened_at:%H:%M:%S}"
