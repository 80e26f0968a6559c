"""Reads of agent work records: documents, archive, prompts, attempts, rawko export."""

from __future__ import annotations

import io
import zipfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from memory_app.agent_records import documents as agent_memory_yaml
from memory_app.agent_records import prompts as agent_memory_prompts
from memory_app.agent_records.models import (
    ARCHIVE_SCHEMA,
    SCHEMA,
    SECTION_OF,
    SECTIONS,
    VERSION,
    AgentMemory,
    AgentMemoryEntry,
    format_timestamp,
)
from memory_app.conversations import context, selectors
from memory_app.conversations.models import Message, Session
from memory_app.tenancy.models import Team
from memsite.errors import NotFound

_CANONICAL_KEYS = ("version", "schema", "sessionId", "agent", "createdAt", *SECTIONS, "context", "history")


def agent_memory_get(*, session: Session, agent: str) -> AgentMemory:
    memory = AgentMemory.objects.filter(session=session, agent=agent).first()
    if memory is None:
        raise NotFound("Agent memory not found.")
    return memory


def agent_memory_attempt_get(*, memory: AgentMemory, attempt_id: str) -> AgentMemoryEntry:
    """One attempt of the document (archived attempts are the archive's)."""
    row = AgentMemoryEntry.objects.filter(
        memory=memory, kind=AgentMemoryEntry.Kind.ATTEMPT, entry_id=attempt_id, archived_at__isnull=True
    ).first()
    if row is None:
        raise NotFound("Attempt not found.")
    return row


def agent_memory_context(*, memory: AgentMemory) -> Any:
    """The document's `context` section: a mapping, or None when the agent has not written one."""
    return memory.header.get("context")


def _session_ref(session: Session) -> str:
    return session.external_id or str(session.pk)


def _document(memory: AgentMemory, session: Session, entries: Iterable[AgentMemoryEntry]) -> dict[str, Any]:
    """The agent-memory document: the PUT document's keys in its order, then any the schema adds."""
    sections: dict[str, list[Any]] = {section: [] for section in SECTIONS}
    for entry in entries:
        sections[SECTION_OF[entry.kind]].append(entry.data)
    defaults: dict[str, Any] = {
        "version": VERSION,
        "schema": SCHEMA,
        "sessionId": _session_ref(session),
        "agent": memory.agent,
        "createdAt": format_timestamp(memory.created_at),
        "context": None,
    }

    def value(key: str) -> Any:
        if key in sections:
            return sections[key]
        return memory.header[key] if key in memory.header else defaults.get(key)

    document = {key: value(key) for key in memory.key_order}
    for key in _CANONICAL_KEYS:
        if key not in document and (key != "history" or "history" in memory.header):
            document[key] = value(key)
    for key in memory.header:  # added by the server after the PUT (the archive's history)
        document.setdefault(key, memory.header[key])
    return document


def _live_entries(memories: Iterable[AgentMemory]) -> dict[int, list[AgentMemoryEntry]]:
    grouped: dict[int, list[AgentMemoryEntry]] = defaultdict(list)
    rows = AgentMemoryEntry.objects.filter(memory__in=list(memories), archived_at__isnull=True).order_by(
        "memory_id", "kind", "position"
    )
    for row in rows:
        grouped[row.memory_id].append(row)
    return grouped


def agent_memory_document(*, memory: AgentMemory, session: Session) -> dict[str, Any]:
    return _document(memory, session, _live_entries([memory])[memory.pk])


def agent_memory_documents(*, session: Session) -> list[tuple[str, dict[str, Any]]]:
    """(agent, document) for every agent of the session, in the order they started (two queries)."""
    memories = list(AgentMemory.objects.filter(session=session).order_by("created_at", "id"))
    entries = _live_entries(memories)
    return [(memory.agent, _document(memory, session, entries[memory.pk])) for memory in memories]


def agent_memory_archive_document(*, memory: AgentMemory, session: Session) -> dict[str, Any]:
    """agent-memory-archive.yaml: the entries moved out of the document, in their original order."""
    document: dict[str, Any] = {
        "version": VERSION,
        "schema": ARCHIVE_SCHEMA,
        "sessionId": memory.header.get("sessionId", _session_ref(session)),
        "agent": memory.agent,
    }
    document.update({section: [] for section in SECTIONS})
    rows = AgentMemoryEntry.objects.filter(memory=memory, archived_at__isnull=False).order_by("kind", "position")
    for row in rows:
        document[SECTION_OF[row.kind]].append(row.data)
    return document


def memory_prompt(*, memory: AgentMemory, session: Session) -> str:
    return agent_memory_prompts.format_memory_context(agent_memory_document(memory=memory, session=session))


def arbiter_summary(*, session: Session) -> str:
    return agent_memory_prompts.build_arbiter_select_prompt(agent_memory_documents(session=session))


@dataclass(frozen=True)
class AttemptHit:
    session_id: Any
    agent: str
    archived: bool
    attempt: dict[str, Any]


def attempt_search(
    *,
    team: Team,
    result: str | None = None,
    plan_step: int | None = None,
    session: Session | None = None,
    agent: str | None = None,
    limit: int = 100,
) -> list[AttemptHit]:
    """Attempts across the team's sessions and agents, archived ones included, newest first."""
    rows: QuerySet[AgentMemoryEntry] = AgentMemoryEntry.objects.filter(team=team, kind=AgentMemoryEntry.Kind.ATTEMPT)
    if result:
        rows = rows.filter(result=result)
    if plan_step is not None:
        rows = rows.filter(plan_step=plan_step)
    if session is not None:
        rows = rows.filter(memory__session=session)
    if agent:
        rows = rows.filter(memory__agent=agent)
    rows = rows.select_related("memory").order_by("-timestamp", "-id")[:limit]
    return [
        AttemptHit(
            session_id=row.memory.session_id,
            agent=row.memory.agent,
            archived=row.archived_at is not None,
            attempt=row.data,
        )
        for row in rows
    ]


# --- the session directory (.rawko/sessions/{sessionId}/) ----------------------------------


def _plan(documents: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """plan.yaml: each plan step with the attempts made at it, and where each agent stands."""
    steps: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for agent, document in documents:
        for attempt in document["attempts"]:
            steps[attempt.get("planStep")].append(
                {
                    "agent": agent,
                    "attempt": attempt.get("id"),
                    "timestamp": attempt.get("timestamp"),
                    "description": attempt.get("description"),
                    "result": attempt.get("result"),
                }
            )
    ordered = sorted(steps.items(), key=lambda item: (item[0] is None, item[0] if item[0] is not None else 0))
    current = {
        agent: {
            key: (document.get("context") or {}).get(key)
            for key in ("currentPlanStep", "planStepStatus", "nextSteps", "blockers")
        }
        for agent, document in documents
    }
    return {
        "steps": [
            {"planStep": step, "attempts": sorted(items, key=lambda a: str(a["timestamp"] or ""))}
            for step, items in ordered
        ],
        "current": current,
    }


def session_directory_zip(*, session: Session) -> tuple[str, bytes]:
    """(file name, zip bytes) of `.rawko/sessions/{sessionId}/` as rawko lays it out.

    One directory per agent under `agents/` holds its agent-memory.yaml (and its
    agent-memory-archive.yaml once entries were archived): rawko's single agent-memory.yaml is per agent.
    """
    ref = _session_ref(session)
    safe_ref = "".join(c if c.isalnum() or c in "-_." else "_" for c in ref).strip(".") or str(session.pk)
    root = f".rawko/sessions/{safe_ref}/"
    documents = agent_memory_documents(session=session)
    memories = {m.agent: m for m in AgentMemory.objects.filter(session=session)}
    served = context.served_context(session=session)
    export = selectors.session_export(session=session)
    header = {"version": VERSION, "sessionId": ref}
    files: dict[str, Any] = {
        "context.yaml": {
            **header,
            "schema": "context",
            "memoryType": session.memory_type,
            "systemPrompt": session.system_prompt,
            "memoryConfig": session.memory_config,
            "additionalState": session.additional_state,
            "activeContext": {"tokenCount": served.token_count, "messages": served.messages},
        },
        "conversation.yaml": {**header, "schema": "conversation", "messages": export["messages"]},
        "plan.yaml": {**header, "schema": "plan", **_plan(documents)},
        "metadata.yaml": {
            **header,
            "schema": "metadata",
            "id": str(session.pk),
            "externalId": session.external_id,
            "createdAt": format_timestamp(session.created_at),
            "updatedAt": format_timestamp(session.updated_at),
            "exportedAt": format_timestamp(timezone.now()),
            "memoryType": session.memory_type,
            "messageCount": Message.objects.filter(session=session).count(),
            "metadata": session.metadata,
            "agents": [
                {
                    "name": agent,
                    "discoveries": len(document["discoveries"]),
                    "attempts": len(document["attempts"]),
                    "failures": sum(1 for a in document["attempts"] if a.get("result") == "failure"),
                    "decisions": len(document["decisions"]),
                    "currentPlanStep": (document.get("context") or {}).get("currentPlanStep"),
                }
                for agent, document in documents
            ],
        },
    }
    for agent, document in documents:
        files[f"agents/{agent}/agent-memory.yaml"] = document
        archive = agent_memory_archive_document(memory=memories[agent], session=session)
        if any(archive[section] for section in SECTIONS):
            files[f"agents/{agent}/agent-memory-archive.yaml"] = archive
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive_zip:
        for name, content in files.items():
            archive_zip.writestr(root + name, agent_memory_yaml.dump(content))
    return f"{safe_ref}.rawko.zip", buffer.getvalue()


# --- the dashboard's agent pages ----------------------------------------------------------------


def agent_memory_list(*, session: Session) -> QuerySet[AgentMemory]:
    """The session's agents in the order they started."""
    return AgentMemory.objects.filter(session=session).order_by("created_at", "id")


@dataclass(frozen=True)
class AgentTimeline:
    live: list[AgentMemoryEntry]  # discoveries, attempts and decisions together, oldest first
    archived: list[AgentMemoryEntry]  # moved out by the archive job, oldest first


def _timeline_key(row: AgentMemoryEntry) -> tuple[Any, ...]:
    # Entries without a timestamp (allowed in a PUT document) go last, in their written order.
    return (row.timestamp is None, row.timestamp or timezone.now(), row.kind, row.position)


def agent_memory_timeline(*, memory: AgentMemory) -> AgentTimeline:
    """Every entry of the memory, live and archived, on one timeline each (one query)."""
    rows = sorted(AgentMemoryEntry.objects.filter(memory=memory), key=_timeline_key)
    return AgentTimeline(
        live=[row for row in rows if row.archived_at is None],
        archived=[row for row in rows if row.archived_at is not None],
    )
