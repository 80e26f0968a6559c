"""Every model of memory_app, defined in its domain package and gathered here: Django loads an
app's models from this module, and migrations name the custom field by its path here."""

from memory_app.agent_records.models import AgentMemory, AgentMemoryEntry
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.events.models import EventStreamLease, MemoryEvent
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.idempotency.models import IdempotencyRecord
from memory_app.jobs.models import WorkerHeartbeat
from memory_app.memory_files.models import MemoryFile, MemoryFileVersion
from memory_app.rounds.models import Attachment, Round, ScratchEntry, SharedMemoryEntry
from memory_app.search.models import IndexRun, SearchItem, SearchKind
from memory_app.tenancy.models import ApiKey, Team, TeamMembership
from memory_app.usage.models import CompressedJSONField, ContextRecord, ContextServe, LLMCall
from memory_app.webhooks.models import Webhook, WebhookDelivery
from memsite.fields import VerbatimJSONField

__all__ = [
    "AgentMemory",
    "AgentMemoryEntry",
    "ApiKey",
    "Attachment",
    "CompactionRun",
    "CompressedJSONField",
    "ContextRecord",
    "ContextServe",
    "EventStreamLease",
    "Fact",
    "FactExtractionRun",
    "IdempotencyRecord",
    "IndexRun",
    "LLMCall",
    "MemoryEvent",
    "MemoryFile",
    "MemoryFileVersion",
    "MemoryType",
    "Message",
    "Round",
    "ScratchEntry",
    "SearchItem",
    "SearchKind",
    "Session",
    "SharedMemoryEntry",
    "Team",
    "TeamMembership",
    "VerbatimJSONField",
    "Webhook",
    "WebhookDelivery",
    "WorkerHeartbeat",
]
