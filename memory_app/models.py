"""Conversation memory data: teams and their keys, sessions, messages, events."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from memsite.fields import JSONField, ReadableJSONMixin, without_lone_surrogates


class Team(models.Model):
    """A tenant. Every other row belongs to exactly one team."""

    name = models.CharField(max_length=100, unique=True)
    # A partial managed memory config (ManagedMemoryConfig) that new sessions of the team start from.
    memory_config_defaults = JSONField(default=dict, blank=True)
    # LLM tokens (prompt + completion) the team's memory work may spend per UTC day; null uses
    # MEMSITE_DAILY_LLM_TOKEN_BUDGET, 0 means unlimited. Set by admins only (Django admin).
    daily_llm_token_budget = models.PositiveBigIntegerField(null=True, blank=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="TeamMembership", related_name="teams", blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class TeamMembership(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    is_admin = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="uniq_team_member")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team}"


class ApiKey(models.Model):
    """A bearer key. Only an HMAC digest is stored; the key itself is shown once."""

    class Role(models.TextChoices):
        READ = "read", "read"
        WRITE = "write", "write"
        ADMIN = "admin", "admin"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.WRITE)
    agent_name = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.team.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    # DRF treats request.auth as opaque; these let IsAuthenticated-style checks work.
    @property
    def is_authenticated(self) -> bool:
        return True


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
    # Scratch memory entries waiting for the next assistant message: read by the append's
    # own session-row UPDATE, so an append with nothing pending pays nothing for the feature.
    pending_scratch = models.PositiveIntegerField(default=0)
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


class VerbatimJSONField(ReadableJSONMixin, models.JSONField):
    """JSON kept as written: PostgreSQL's `json`, not `jsonb`, which reorders object keys.

    Message payloads are replayed to LLMs as text; `{"zeta": 1, "alpha": 2}` must come back
    in that order, exactly as SQLite and the reference library return it.
    """

    def db_type(self, connection: Any) -> str | None:
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if connection.vendor != "postgresql":
            return super().get_db_prep_value(value, connection, prepared)
        # Django adapts JSON as psycopg's Jsonb, and the jsonb cast reorders the keys.
        from psycopg.types.json import Json

        return Json(value if prepared else self.get_prep_value(value))

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        # psycopg decodes `json` columns itself (Django only registers a text loader for
        # jsonb): the value is already parsed, in its original key order. Decoding it again
        # would turn the string "42" into the number 42.
        if connection.vendor == "postgresql":
            return without_lone_surrogates(value)
        return super().from_db_value(value, expression, connection)


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
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Not columns: a post's attachments and round id, set by round_selectors.attach_posts and the post API.
    attachments_read: list[Attachment]
    round_ref: str

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


class CompactionRun(models.Model):
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


class FactExtractionRun(models.Model):
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
    valid_from = models.DateTimeField(default=timezone.now)
    invalidated_at = models.DateTimeField(null=True, blank=True)
    invalidated_by = models.ForeignKey(
        "self", on_delete=models.SET_NULL, related_name="replaced", null=True, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

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
        ]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"({self.subject}, {self.predicate}, {self.object})"


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


from memory_app.agent_memory_models import AgentMemory, AgentMemoryEntry  # noqa: E402, F401  (agent work records)
from memory_app.round_models import Attachment, Round, ScratchEntry, SharedMemoryEntry  # noqa: E402, F401  (rounds, scratch)
from memory_app.usage_models import ContextServe, LLMCall  # noqa: E402, F401  (token economics)
from memory_app.webhook_models import Webhook, WebhookDelivery  # noqa: E402, F401  (webhooks)
