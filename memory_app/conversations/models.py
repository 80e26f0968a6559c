"""Sessions (conversations) and their messages."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import models
from django.db.models import Q

from memory_app.tenancy.models import Team
from memsite.fields import JSONField, VerbatimJSONField


class MemoryType(models.TextChoices):
    CONVERSATION_HISTORY = "conversation_history", "conversation history"
    MANAGED_CONVERSATION = "managed_conversation", "managed conversation"
    KG = "kg", "knowledge graph"


class Session(models.Model):
    """A conversation thread. `last_seq` is the counter message seqs are taken from."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="sessions")
    external_id = models.CharField(max_length=200, null=True, blank=True)
    system_prompt = models.TextField(blank=True, default="")
    system_prompt_tokens = models.PositiveIntegerField(default=0)
    metadata = JSONField(default=dict, blank=True)
    # Caller state saved beside the messages (MemoryManager.save_to_file's additional_state).
    additional_state = JSONField(null=True, blank=True)
    memory_type = models.CharField(max_length=32, choices=MemoryType.choices, default=MemoryType.CONVERSATION_HISTORY)
    # The effective ManagedMemoryConfig (defaults filled in); see memory_app/memory_config.py.
    memory_config = JSONField(default=dict, blank=True)
    # Denormalised from memory_config so the append path decides without parsing JSON:
    # the token count above which a compaction is queued, or null for never.
    compaction_threshold = models.PositiveIntegerField(null=True, blank=True)
    # Tokens of the active context (system prompt + summary + messages after it), kept
    # current by every write so the threshold check costs nothing.
    active_tokens = models.PositiveBigIntegerField(default=0)
    # Tokens of every stored message (the raw history, system prompt excluded), kept by the same
    # writes: what a context stands for, for the token economics (usage) pages and API.
    history_tokens = models.PositiveBigIntegerField(default=0)
    last_seq = models.PositiveBigIntegerField(default=0)
    # Scratch memory entries waiting for the turn's final answer: read by the append's
    # own session-row UPDATE, so an append with nothing pending pays nothing for the feature.
    pending_scratch = models.PositiveIntegerField(default=0)
    # Messages up to this seq are in the search index. Read by the append's own UPDATE: the
    # append that makes a caught-up session fall behind is the one that wakes the indexer.
    search_indexed_seq = models.PositiveBigIntegerField(default=0)
    # Automatic recall into this session's context: {"auto": bool, "k": int, "kinds": [...]}; off by default.
    recall = JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "external_id"],
                condition=Q(external_id__isnull=False),
                name="uniq_session_external_id_per_team",
            )
        ]
        indexes = [models.Index(fields=["team", "-created_at"], name="session_team_created")]

    def __str__(self) -> str:
        return self.external_id or str(self.id)

    @property
    def agent_name(self) -> str:
        """The agent named in the session's metadata, for the memory events (MemoryResetEvent, CompactionEvent)."""
        return (self.metadata or {}).get("agent_name", "memsite")


class Message(models.Model):
    """One message in OpenAI chat shape plus the multi-agent extras (agent calls, structured data, images, posts)."""

    class Role(models.TextChoices):
        SYSTEM = "system", "system"
        USER = "user", "user"
        ASSISTANT = "assistant", "assistant"
        TOOL = "tool", "tool"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveBigIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices)
    content = VerbatimJSONField(null=True, blank=True)
    name = models.CharField(max_length=200, null=True, blank=True)
    tool_calls = VerbatimJSONField(null=True, blank=True)
    tool_call_id = models.CharField(max_length=200, null=True, blank=True)
    agent_calls = VerbatimJSONField(null=True, blank=True)
    structured_data = VerbatimJSONField(null=True, blank=True)
    reasoning_details = VerbatimJSONField(null=True, blank=True)
    images = VerbatimJSONField(null=True, blank=True)
    send_from = models.CharField(max_length=200, null=True, blank=True)
    send_to = models.CharField(max_length=200, null=True, blank=True)
    meta = VerbatimJSONField(null=True, blank=True)
    # A post (TaskWeaver-style) is a message in a round; `post_id` is the post's own id ("post-...").
    round = models.ForeignKey(
        "memory_app.Round", on_delete=models.SET_NULL, related_name="posts", null=True, blank=True
    )
    post_id = models.CharField(max_length=64, null=True, blank=True)
    token_count = models.PositiveIntegerField(default=0)
    # When the message was said, as the writer knows it (an imported history's dates); null when
    # not given. `created_at` stays the storage time: search and recall read this one first.
    occurred_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="uniq_message_seq")]
        indexes = [
            # Tool results are checked against recent tool-calling assistant messages.
            models.Index(
                fields=["session", "seq"],
                condition=Q(role="assistant", tool_calls__isnull=False),
                name="msg_tool_calling",
            ),
        ]
        ordering = ["seq"]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.role}"

    @property
    def said_at(self) -> datetime:
        """The time the message belongs to: when it was said if the writer gave it, else when it was stored."""
        return self.occurred_at or self.created_at
