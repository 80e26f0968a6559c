"""Agent work records: one AgentMemory per session and agent, and its entries.

Each discovery, attempt and decision is one row whose `data` keeps the entry exactly as the
agent wrote it (key order and fields the schema does not name included), so a document goes
out as it came in. The few columns beside it are what queries and ordering need.
"""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.db.models import Q
from django.utils import timezone

from memory_app.conversations.models import Session
from memory_app.tenancy.models import Team
from memsite.fields import JSONField, VerbatimJSONField


class AgentMemory(models.Model):
    """The header, context and history sections of one agent's memory document."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="agent_memories")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="agent_memories")
    agent = models.CharField(max_length=100)
    # Every top-level key other than the three entry lists, in the document's order
    # (version, schema, sessionId, agent, createdAt, context, history, anything else).
    header = VerbatimJSONField(default=dict, blank=True)
    # The document's top-level key order, so a PUT document is returned as written.
    key_order = JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "agent"], name="uniq_agent_memory_per_session")]
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.agent} in {self.session_id}"


class AgentMemoryEntry(models.Model):
    """One discovery, attempt or decision; archived entries stay here with `archived_at` set."""

    class Kind(models.TextChoices):
        DISCOVERY = "discovery", "discovery"
        ATTEMPT = "attempt", "attempt"
        DECISION = "decision", "decision"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="agent_memory_entries")
    memory = models.ForeignKey(AgentMemory, on_delete=models.CASCADE, related_name="entries")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    entry_id = models.CharField(max_length=200)  # the entry's own `id`, unique per agent memory
    position = models.PositiveIntegerField()  # order within its list, as written or appended
    data = VerbatimJSONField()
    timestamp = models.DateTimeField(null=True, blank=True)  # parsed `timestamp`, for ordering and archiving
    result = models.CharField(max_length=16, blank=True)  # attempts only
    plan_step = models.IntegerField(null=True, blank=True)  # attempts only
    size = models.PositiveIntegerField(default=0)  # bytes of `data` as JSON, for the size guideline
    archived_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["memory", "entry_id"], name="uniq_agent_memory_entry_id")]
        indexes = [
            models.Index(fields=["memory", "kind", "position"], name="agentmem_entry_order"),
            models.Index(
                fields=["team", "result", "plan_step"],
                condition=Q(kind="attempt"),
                name="agentmem_attempt_lookup",
            ),
        ]
        ordering = ["memory", "kind", "position"]

    def __str__(self) -> str:
        return f"{self.entry_id} ({self.kind})"


# The agent-memory document format: its version and schema names, its sections by entry kind,
# and its timestamp form.
VERSION = "1"
SCHEMA = "agent-memory"
ARCHIVE_SCHEMA = "agent-memory-archive"
SECTIONS: dict[str, str] = {
    "discoveries": AgentMemoryEntry.Kind.DISCOVERY,
    "attempts": AgentMemoryEntry.Kind.ATTEMPT,
    "decisions": AgentMemoryEntry.Kind.DECISION,
}
SECTION_OF: dict[str, str] = {kind: section for section, kind in SECTIONS.items()}


def format_timestamp(moment: datetime) -> str:
    """The agent-memory timestamp form: 2026-01-23T10:31:10.000Z."""
    utc = moment.astimezone(timezone.get_fixed_timezone(0))
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
