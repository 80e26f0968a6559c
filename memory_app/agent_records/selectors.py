"""Reads of agent work records: documents, archive, prompts, attempts, rawko export."""

from __future__ import annotations

import io
import uuid
import zipfile
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, F, Max, Q, QuerySet, Sum
from django.db.models.fields.json import KT
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
from memory_app.conversations.selectors import MESSAGE_AGENT
from memory_app.facts.models import Fact
from memory_app.facts.selectors import fact_list
from memory_app.tenancy.models import ApiKey, Team
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


# --- one agent name across the team's sessions (the agents pages) ------------------------------
#
# No table lists agents: a name is an agent because something of the team carries it. A message
# (its post sender, else its `name`), a session's metadata.agent_name, an agent record, an active
# API key, an experience selection (the caller reads those through experiences_app and passes
# them in: memory_app never imports it). Each source is one GROUP BY per (agent, session), so a
# page costs the same few queries however many agents and sessions the team has.


@dataclass(frozen=True)
class AgentSighting:
    """One source's figures for one agent in one session (session_id None: not tied to one)."""

    agent: str
    session_id: uuid.UUID | None
    messages: int = 0
    message_tokens: int = 0
    records: int = 0  # entries of its agent record there, archived ones included
    selections: int = 0
    api_keys: int = 0
    session_agent: bool = False  # the session's metadata.agent_name names it
    last_seen: datetime | None = None


@dataclass
class AgentTally:
    """Sightings added up, per agent (the agents list) or per session (one agent's sessions)."""

    key: Any  # the agent name, or the session id
    session_ids: set[uuid.UUID] = field(default_factory=set)
    messages: int = 0
    message_tokens: int = 0
    records: int = 0
    selections: int = 0
    api_keys: int = 0
    session_agent: bool = False
    last_seen: datetime | None = None

    @property
    def sessions(self) -> int:
        return len(self.session_ids)

    def add(self, sighting: AgentSighting) -> None:
        if sighting.session_id is not None:
            self.session_ids.add(sighting.session_id)
        self.messages += sighting.messages
        self.message_tokens += sighting.message_tokens
        self.records += sighting.records
        self.selections += sighting.selections
        self.api_keys += sighting.api_keys
        self.session_agent = self.session_agent or sighting.session_agent
        if sighting.last_seen is not None and (self.last_seen is None or sighting.last_seen > self.last_seen):
            self.last_seen = sighting.last_seen


def _name_filter(field_name: str, agent: str | None, search: str | None) -> Q:
    condition = Q(**{f"{field_name}__isnull": False}) & ~Q(**{field_name: ""})
    if agent is not None:
        condition &= Q(**{field_name: agent})
    if search:
        condition &= Q(**{f"{field_name}__icontains": search})
    return condition


def agent_messages(*, team: Team, agent: str) -> QuerySet[Message]:
    """The messages the agent wrote in the team's sessions, newest first."""
    return (
        Message.objects.filter(session__team=team)
        .alias(agent=MESSAGE_AGENT)
        .filter(agent=agent)
        .select_related("session")
        .order_by("-created_at", "-seq")
    )


def agent_sightings(
    *, team: Team, agent: str | None = None, search: str | None = None, extra: Iterable[AgentSighting] = ()
) -> list[AgentSighting]:
    """Every (agent, session) where an agent name of the team appears, from each source (five
    queries). `agent` keeps one exact name, `search` names containing it (case-insensitive);
    `extra` adds the sightings of sources outside memory_app, already filtered the same way."""
    found: list[AgentSighting] = list(extra)
    messages = (
        Message.objects.filter(session__team=team)
        .annotate(agent=MESSAGE_AGENT)
        .filter(_name_filter("agent", agent, search))
        .values("agent", "session_id")
        .annotate(n=Count("pk"), tokens=Sum("token_count"), last=Max("created_at"))
        .order_by()
    )
    found += [
        AgentSighting(
            row["agent"], row["session_id"], messages=row["n"], message_tokens=row["tokens"] or 0, last_seen=row["last"]
        )
        for row in messages
    ]
    # Filtered by JSON key lookups, not on the KT value: SQLite compares that as JSON.
    named_sessions = (
        Session.objects.filter(team=team)
        .filter(_name_filter("metadata__agent_name", agent, search))
        .annotate(agent=KT("metadata__agent_name"))
        .values_list("agent", "pk", "created_at")
    )
    found += [AgentSighting(str(name), pk, session_agent=True, last_seen=at) for name, pk, at in named_sessions if name]
    records = (
        AgentMemory.objects.filter(team=team)
        .filter(_name_filter("agent", agent, search))
        .values("agent", "session_id", "updated_at")
        .annotate(n=Count("entries"), last_entry=Max("entries__created_at"))
        .order_by()
    )
    found += [
        AgentSighting(
            row["agent"],
            row["session_id"],
            records=row["n"],
            last_seen=max(filter(None, (row["updated_at"], row["last_entry"]))),
        )
        for row in records
    ]
    keys = (
        ApiKey.objects.filter(team=team, revoked_at__isnull=True)
        .filter(_name_filter("agent_name", agent, search))
        .values("agent_name")
        .annotate(n=Count("pk"))
        .order_by()
    )
    found += [AgentSighting(row["agent_name"], None, api_keys=row["n"]) for row in keys]
    return found


AGENT_ORDERS: dict[str, tuple[str, bool]] = {  # the list's sort choices: (figure, largest first)
    "recent": ("last_seen", True),
    "name": ("key", False),
    "sessions": ("sessions", True),
    "messages": ("messages", True),
    "tokens": ("message_tokens", True),
    "records": ("records", True),
}


def agent_directory(*, sightings: Iterable[AgentSighting], order: str = "recent") -> list[AgentTally]:
    """One tally per agent name, sorted by `order` (an AGENT_ORDERS key), then by name."""
    tallies: dict[str, AgentTally] = {}
    for sighting in sightings:
        tallies.setdefault(sighting.agent, AgentTally(key=sighting.agent)).add(sighting)
    figure, largest_first = AGENT_ORDERS.get(order, AGENT_ORDERS["recent"])
    by_name = sorted(tallies.values(), key=lambda t: t.key)
    if figure == "key":
        return by_name

    def value(tally: AgentTally) -> Any:
        found = getattr(tally, figure)
        if figure == "last_seen":  # never seen (an API key only) goes last
            return found.timestamp() if found is not None else float("-inf")
        return found

    return sorted(by_name, key=value, reverse=largest_first)


def agent_session_tallies(*, sightings: Iterable[AgentSighting]) -> list[AgentTally]:
    """One agent's sightings per session, the latest activity first."""
    tallies: dict[uuid.UUID, AgentTally] = {}
    for sighting in sightings:
        if sighting.session_id is not None:
            tallies.setdefault(sighting.session_id, AgentTally(key=sighting.session_id)).add(sighting)
    return sorted(
        tallies.values(), key=lambda t: t.last_seen.timestamp() if t.last_seen else float("-inf"), reverse=True
    )


def agent_record_list(*, team: Team, agent: str) -> QuerySet[AgentMemory]:
    """The agent's work records, one per session, with their entries counted by kind (one query)."""
    live = Q(entries__archived_at__isnull=True)
    return (
        AgentMemory.objects.filter(team=team, agent=agent)
        .select_related("session")
        .annotate(
            discoveries=Count("entries", filter=live & Q(entries__kind=AgentMemoryEntry.Kind.DISCOVERY)),
            attempts=Count("entries", filter=live & Q(entries__kind=AgentMemoryEntry.Kind.ATTEMPT)),
            failures=Count(
                "entries",
                filter=live & Q(entries__kind=AgentMemoryEntry.Kind.ATTEMPT, entries__result="failure"),
            ),
            decisions=Count("entries", filter=live & Q(entries__kind=AgentMemoryEntry.Kind.DECISION)),
            archived=Count("entries", filter=Q(entries__archived_at__isnull=False)),
        )
        .order_by("-updated_at", "-id")
    )


def agent_recent_entries(*, team: Team, agent: str, limit: int) -> list[AgentMemoryEntry]:
    """The agent's latest discoveries, attempts and decisions across its sessions (one query)."""
    return list(
        AgentMemoryEntry.objects.filter(team=team, memory__agent=agent)
        .select_related("memory__session")
        .order_by(F("timestamp").desc(nulls_last=True), "-id")[:limit]
    )


def agent_facts(*, team: Team, agent: str, session_ids: Collection[uuid.UUID]) -> QuerySet[Fact]:
    """Live facts of the agent's sessions, or extracted from its own words, newest first."""
    return fact_list(team=team).filter(Q(role=agent) | Q(session_id__in=list(session_ids))).select_related("session")
