"""Stored answers of writes sent with an Idempotency-Key."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memory_app.conversations.models import Session
from memory_app.tenancy.models import Team
from memsite.fields import JSONField


class IdempotencyRecord(models.Model):
    """The stored answer to a write sent with an `Idempotency-Key` header (per team and key).

    Written in the write's own transaction, so the key exists exactly when the write does:
    a retry after a lost response gets this answer back instead of writing again. Records
    older than IDEMPOTENCY_TTL no longer count and are purged by a beat job.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    # The session written to or created: deleting it removes the stored copy of its data.
    session = models.ForeignKey(Session, on_delete=models.CASCADE, null=True, related_name="+")
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)  # sha256 of method, path and the parsed body
    status_code = models.PositiveSmallIntegerField()
    response_body = JSONField()
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "key"], name="uniq_idempotency_key_per_team")]

    def __str__(self) -> str:
        return f"{self.key} ({self.status_code})"
