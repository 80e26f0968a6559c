"""What recall searches: one row per indexed piece of text, and the durable job that embeds them.

A SearchItem copies the text of its source (a message chunk, a summary, a fact sentence, an agent
record entry, an experience, a shared-memory entry, a text attachment) with the facts a search
filters on, so one table serves both engines. Every source it can point at is a CASCADE foreign
key: deleting the source, its session or its team deletes the item, and with it the full-text
row (triggers on SQLite, a generated column on PostgreSQL) and the vector. Experiences live in
another app that this one may not depend on, so theirs are found by `source_key` and removed by
that app's services.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q
from django.utils import timezone

from memory_app.agent_records.models import AgentMemoryEntry
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Message, Session
from memory_app.facts.models import Fact
from memory_app.jobs.models import JobRecord
from memory_app.rounds.models import Attachment, SharedMemoryEntry
from memory_app.tenancy.models import Team


class SearchKind(models.TextChoices):
    MESSAGE = "message", "message"
    SUMMARY = "summary", "summary"
    FACT = "fact", "fact"
    RECORD = "record", "agent record entry"
    EXPERIENCE = "experience", "experience"
    SHARED_MEMORY = "shared_memory", "shared memory entry"
    ATTACHMENT = "attachment", "attachment"
    MEMORY_FILE = "memory_file", "memory file"


class SearchItem(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "pending"  # text stored, vector not computed yet
        INDEXED = "indexed", "indexed"
        FAILED = "failed", "failed"  # the embedding backend refused this text; `error` says why

    id = models.BigAutoField(primary_key=True)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="search_items")
    kind = models.CharField(max_length=16, choices=SearchKind.choices)
    source_key = models.CharField(max_length=64)  # the source's own id, as a string
    chunk = models.PositiveIntegerField(default=0)  # position of this piece within its source
    session = models.ForeignKey(Session, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    compaction_run = models.ForeignKey(CompactionRun, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    fact = models.ForeignKey(Fact, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    record_entry = models.ForeignKey(
        AgentMemoryEntry, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    shared_memory = models.ForeignKey(
        SharedMemoryEntry, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    attachment = models.ForeignKey(Attachment, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    agent = models.CharField(max_length=200, blank=True)  # the agent (or role) that wrote or owns it
    role = models.CharField(max_length=200, blank=True)  # message role, fact role, record kind ...
    seq = models.PositiveBigIntegerField(null=True, blank=True)  # the message's place in its session
    text = models.TextField()
    # Words that help find the item but are not its own, matched with less weight than `text` and
    # never embedded or shown: who said a message, and the turn it answers (a reply's answer is
    # often found by the question's words).
    context = models.TextField(blank=True, default="", db_default="")
    text_hash = models.CharField(max_length=32)  # of `text`: an unchanged source is not embedded again
    occurred_at = models.DateTimeField(default=timezone.now)  # when the source was written
    # Facts that were invalidated and record entries that were archived: kept out of results
    # unless a search asks for them, and then never above live ones.
    invalidated_at = models.DateTimeField(null=True, blank=True)
    valid_from = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=8, choices=State.choices, default=State.PENDING)
    error = models.CharField(max_length=500, blank=True)
    embedding = models.BinaryField(null=True, blank=True)  # float32 little-endian, L2-normalised
    embedding_model = models.CharField(max_length=200, blank=True)
    embedding_dim = models.PositiveSmallIntegerField(null=True, blank=True)
    indexed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "kind", "source_key", "chunk"], name="uniq_search_item_source")
        ]
        indexes = [
            models.Index(fields=["team", "kind", "occurred_at"], name="search_item_team_kind_time"),
            models.Index(fields=["team", "state"], condition=~Q(state="indexed"), name="search_item_backlog"),
            models.Index(fields=["session", "seq"], name="search_item_session_seq"),
            # The vectors indexed since a team's in-process vector index was last brought up to
            # date (its tail, scored exactly by every search: search/ann.py).
            models.Index(fields=["team", "indexed_at"], name="search_item_team_indexed"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.source_key}#{self.chunk}"


def pending_items(team_id: int) -> models.QuerySet[SearchItem]:
    """The team's items waiting for a vector. The exclude repeats the backlog index's condition
    word for word: SQLite then reads that partial index (~1 ms) instead of every item of the team
    (~700 ms at 200k items)."""
    return SearchItem.objects.filter(team_id=team_id, state=SearchItem.State.PENDING).exclude(
        state=SearchItem.State.INDEXED
    )


class IndexRun(JobRecord):
    """The durable job that brings one team's index up to date: it turns new messages into
    items and embeds every pending item, in batches. One pending run per team at a time."""

    class Status(models.TextChoices):
        PENDING = "pending", "pending"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    class Trigger(models.TextChoices):
        WRITE = "write", "write"
        SWEEP = "sweep", "sweep"
        REINDEX = "reindex", "reindex"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="index_runs")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.WRITE)
    attempts = models.PositiveSmallIntegerField(default=0)
    items_indexed = models.PositiveIntegerField(default=0)
    items_failed = models.PositiveIntegerField(default=0)
    messages_read = models.PositiveIntegerField(default=0)
    embedding_model = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team"], condition=Q(status="pending"), name="one_pending_index_run")
        ]
        indexes = [models.Index(fields=["team", "-created_at"], name="index_run_team_created")]

    def __str__(self) -> str:
        return f"index {self.team_id} {self.status}"
