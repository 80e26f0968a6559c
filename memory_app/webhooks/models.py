"""Webhooks per team and the log of their deliveries. Imported by memory_app.models.

The secret signs every delivery (HMAC-SHA256), so it must be readable by the worker: it is stored as
given and only its first characters (`secret_hint`) are ever shown again, like an API key's prefix.
"""

from __future__ import annotations

import uuid

from django.db import models

from memory_app.events.models import MemoryEvent
from memory_app.jobs.models import JobRecord
from memory_app.tenancy.models import Team
from memsite.fields import JSONField

# The event kinds a webhook may subscribe to.
WEBHOOK_EVENT_KINDS: tuple[str, ...] = (
    MemoryEvent.Kind.COMPACTION_COMPLETED,
    MemoryEvent.Kind.COMPACTION_FAILED,
    MemoryEvent.Kind.FACTS_EXTRACTED,
    MemoryEvent.Kind.EXPERIENCE_APPROVED,
)


class Webhook(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="webhooks")
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    # Never returned after creation; see the module docstring.
    secret = models.CharField(max_length=128)
    secret_hint = models.CharField(max_length=16)
    event_kinds = JSONField(default=list)
    active = models.BooleanField(default=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        indexes = [models.Index(fields=["team", "active"], name="webhook_team_active")]

    def __str__(self) -> str:
        return f"{self.url} ({self.team_id})"


class WebhookDelivery(JobRecord):
    """One event sent to one webhook: a durable job claimed by a conditional UPDATE."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        SENDING = "sending", "sending"
        DELIVERED = "delivered", "delivered"
        FAILED = "failed", "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="webhook_deliveries")
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.ForeignKey(MemoryEvent, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    kind = models.CharField(max_length=40)
    payload = JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    # The start of the last answer's body and how long its request took: what a reader of the
    # log needs to tell a slow receiver from a broken one (the error keeps only a failure's reason).
    response_body = models.TextField(blank=True)
    response_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    # When the next attempt is due (pending) - the sweeper re-sends the task when it is overdue.
    next_retry_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    redelivery_of = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["webhook", "-created_at"], name="delivery_webhook_created")]

    def __str__(self) -> str:
        return f"{self.kind} -> {self.webhook_id} ({self.status})"
