"""Writes of the usage domain that are not the ledgers' own appends (memory_app.usage.llm_calls)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from memory_app.usage.models import ContextRecord

PURGE_CHUNK = 5_000  # records deleted per statement: a big backlog never holds one long lock


def context_records_purge() -> int:
    """Delete the served contexts' replay records older than MEMSITE_CONTEXT_RECORD_DAYS (every
    one when it is 0); the ledger rows stay. A beat job, hourly; returns how many went."""
    cutoff = timezone.now() - timedelta(days=settings.CONTEXT_RECORD_DAYS)
    deleted = 0
    while True:
        with transaction.atomic():
            chunk = list(
                ContextRecord.objects.filter(created_at__lt=cutoff)
                .order_by("created_at")
                .values_list("serve_id", flat=True)[:PURGE_CHUNK]
            )
            if chunk:
                ContextRecord.objects.filter(serve_id__in=chunk).delete()
        deleted += len(chunk)
        if len(chunk) < PURGE_CHUNK:
            return deleted
