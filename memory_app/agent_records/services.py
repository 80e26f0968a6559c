"""Agent work records: validate documents, replace, append, update attempts and the context, archive.

Every write locks the AgentMemory row first, so ids (`discovery-001`, ...) are assigned
without gaps or duplicates and the archive job never moves an entry a request is changing.
Entries keep the agent's text as written; the validation below only refuses what the
agent-memory schema rules out, naming the path of each problem (`attempts[2].result`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Min, Sum
from django.utils import timezone

from memory_app.agent_records import selectors as agent_memory_selectors
from memory_app.agent_records.locks import agent_memory_lock, agent_memory_lock_by_id
from memory_app.agent_records.models import SCHEMA, SECTIONS, VERSION, AgentMemory, AgentMemoryEntry, format_timestamp
from memory_app.conversations.models import Session
from memory_app.search import services as search
from memsite.errors import Conflict, InvalidInput, NotFound
from memsite.path_segments import DOT_SEGMENT

Kind = AgentMemoryEntry.Kind

DISCOVERY_TYPES = (
    "codebase_structure",
    "dependency_check",
    "code_pattern",
    "api_surface",
    "data_model",
    "complexity_assessment",
    "failure_cause",
    "solution_verified",
)
IMPORTANCE = ("low", "medium", "high", "critical")
RESULTS = ("success", "failure", "partial", "in_progress")
FINAL_RESULTS = ("success", "failure", "partial")
DECISION_TYPES = ("architectural", "implementation", "skip", "workaround", "compromise")
ID_PREFIX: dict[str, str] = {Kind.DISCOVERY: "discovery", Kind.ATTEMPT: "attempt", Kind.DECISION: "decision"}
AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,99}")
# an entry id is a URL segment (PATCH .../attempts/{id}/), so not "." or ".." either
ENTRY_ID = re.compile(rf"(?!{DOT_SEGMENT}\Z)[^\s/]{{1,200}}")  # memsite.path_segments


# --- validation ---------------------------------------------------------------------------

Problems = dict[str, list[str]]
Check = Callable[[Any, str, Problems], None]


def _add(problems: Problems, path: str, message: str) -> None:
    problems.setdefault(path, []).append(message)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "text", list: "a list", dict: "a mapping"}.get(
        type(value), type(value).__name__
    )


def parse_timestamp(value: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.get_fixed_timezone(0))


def text(value: Any, path: str, problems: Problems) -> None:
    if not isinstance(value, str):
        _add(problems, path, f"must be text, not {_type_name(value)}")


def nullable(check: Check) -> Check:
    def run(value: Any, path: str, problems: Problems) -> None:
        if value is not None:
            check(value, path, problems)

    return run


def timestamp(value: Any, path: str, problems: Problems) -> None:
    if not isinstance(value, str) or parse_timestamp(value) is None:
        _add(problems, path, 'must be an ISO 8601 date-time such as "2026-01-23T10:31:10.000Z"')


# A plan step is stored in a 32-bit integer column on every database.
INTEGER_MIN, INTEGER_MAX = -(2**31), 2**31 - 1


def integer(value: Any, path: str, problems: Problems) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        _add(problems, path, f"must be a whole number, not {_type_name(value)}")
    elif not INTEGER_MIN <= value <= INTEGER_MAX:
        _add(problems, path, f"must be between {INTEGER_MIN} and {INTEGER_MAX}")


def count(value: Any, path: str, problems: Problems) -> None:
    integer(value, path, problems)
    if path not in problems and value < 0:
        _add(problems, path, "must not be negative")


def boolean(value: Any, path: str, problems: Problems) -> None:
    if not isinstance(value, bool):
        _add(problems, path, f"must be true or false, not {_type_name(value)}")


def text_or_number(value: Any, path: str, problems: Problems) -> None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        _add(problems, path, f"must be text or a number, not {_type_name(value)}")


def mapping(value: Any, path: str, problems: Problems) -> None:
    if not isinstance(value, dict):
        _add(problems, path, f"must be a mapping, not {_type_name(value)}")


def one_of(choices: tuple[str, ...]) -> Check:
    def run(value: Any, path: str, problems: Problems) -> None:
        if value not in choices:
            _add(problems, path, f"must be one of {', '.join(choices)}, not {json.dumps(value)}")

    return run


def list_of(item: Check) -> Check:
    def run(value: Any, path: str, problems: Problems) -> None:
        if not isinstance(value, list):
            _add(problems, path, f"must be a list, not {_type_name(value)}")
            return
        for index, element in enumerate(value):
            item(element, f"{path}[{index}]", problems)

    return run


def either(*checks: Check) -> Check:
    """The first check that finds nothing wins; otherwise the last one's problems are reported."""

    def run(value: Any, path: str, problems: Problems) -> None:
        for check in checks:
            found: Problems = {}
            check(value, path, found)
            if not found:
                return
        for sub_path, messages in found.items():
            problems.setdefault(sub_path, []).extend(messages)

    return run


def fields(spec: Mapping[str, Check], required: tuple[str, ...] = ()) -> Check:
    """A mapping whose known keys pass their checks; other keys are kept as written."""

    def run(value: Any, path: str, problems: Problems) -> None:
        if not isinstance(value, dict):
            _add(problems, path or "non_field_errors", f"must be a mapping, not {_type_name(value)}")
            return
        for key in value:
            if not isinstance(key, str):
                _add(problems, path or "non_field_errors", f"keys must be text, not {_type_name(key)} {key!r}")
        for name in required:
            if name not in value:
                _add(problems, f"{path}.{name}" if path else name, "is required")
        for name, check in spec.items():
            if name in value:
                check(value[name], f"{path}.{name}" if path else name, problems)

    return run


text_list = list_of(text)
_ENTRY_COMMON: dict[str, Check] = {"id": text, "timestamp": timestamp}
DISCOVERY = fields(
    {
        **_ENTRY_COMMON,
        "type": one_of(DISCOVERY_TYPES),
        "importance": one_of(IMPORTANCE),
        "content": text,
        "relatedFiles": text_list,
        "actionItems": text_list,
    },
    required=("type", "content"),
)
ATTEMPT_FIELDS: dict[str, Check] = {
    **_ENTRY_COMMON,
    "planStep": nullable(integer),
    "description": text,
    "approach": text,
    "commands": text_list,
    "result": one_of(RESULTS),
    "status": text,
    "output": text,
    "error": text,
    "artifacts": list_of(fields({"path": text, "action": text, "status": text, "content": text}, required=("path",))),
    "duration_ms": count,
    "iterations": count,
    "tokensUsed": fields({"input": count, "output": count}),
    "lessons": either(text, text_list),
    "subTasks": list_of(fields({"description": text, "status": text}, required=("description",))),
    "progress": text_or_number,
    "currentIssue": nullable(text),
    "nextStep": nullable(text),
    "nextAttempt": nullable(text),
}
ATTEMPT = fields(ATTEMPT_FIELDS, required=("description", "result"))
DECISION = fields(
    {
        **_ENTRY_COMMON,
        "type": one_of(DECISION_TYPES),
        "description": text,
        "reasoning": text,
        "alternatives": list_of(either(text, fields({"name": text, "reason": text}, required=("name",)))),
        "impact": one_of(IMPORTANCE),
        "reversible": boolean,
        "relatedDiscoveries": text_list,
    },
    required=("type", "description"),
)
CONTEXT = fields(
    {
        "currentPlanStep": nullable(integer),
        "planStepStatus": text,
        "filesInScope": list_of(fields({"path": text, "status": text, "purpose": text}, required=("path",))),
        "codebaseUnderstanding": mapping,
        "taskContext": mapping,
        "constraints": text_list,
        "openQuestions": text_list,
        "nextSteps": text_list,
        "blockers": text_list,
        "assumptions": text_list,
    }
)
ENTRY_CHECKS: dict[str, Check] = {Kind.DISCOVERY: DISCOVERY, Kind.ATTEMPT: ATTEMPT, Kind.DECISION: DECISION}


def _fail(problems: Problems) -> None:
    if problems:
        first, messages = next(iter(problems.items()))
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InvalidInput(f"{first}: {messages[0]}{more}", fields=problems)


def validate_agent(agent: str) -> None:
    if not AGENT_NAME.fullmatch(agent):
        raise InvalidInput.for_field(
            "agent", "must be 1-100 letters, digits or _ . @ - starting with a letter or digit"
        )


def _check_entry_id(value: Any, path: str, problems: Problems) -> None:
    if isinstance(value, str) and not ENTRY_ID.fullmatch(value):
        _add(problems, path, "must be 1-200 characters without spaces or slashes, and not . or .. (nor %2E)")


def validate_document(document: Any, *, agent: str) -> None:
    """Raise InvalidInput naming every problem of a whole memory document."""
    problems: Problems = {}
    if not isinstance(document, dict):
        _add(problems, "non_field_errors", f"the document must be a mapping, not {_type_name(document)}")
        _fail(problems)
    header = fields(
        {
            "version": one_of((VERSION,)),
            "schema": one_of((SCHEMA,)),
            "sessionId": text,
            "agent": one_of((agent,)),
            "createdAt": timestamp,
            "context": nullable(CONTEXT),
            "history": list_of(mapping),
        },
        required=("version", "schema"),
    )
    header(document, "", problems)
    seen: dict[str, str] = {}
    for section, kind in SECTIONS.items():
        if section not in document:
            continue
        entries = document[section]
        if not isinstance(entries, list):
            _add(problems, section, f"must be a list, not {_type_name(entries)}")
            continue
        for index, entry in enumerate(entries):
            path = f"{section}[{index}]"
            ENTRY_CHECKS[kind](entry, path, problems)
            entry_id = entry.get("id") if isinstance(entry, dict) else None
            if entry_id is None:
                continue
            _check_entry_id(entry_id, f"{path}.id", problems)
            if isinstance(entry_id, str):
                if entry_id in seen:
                    _add(problems, f"{path}.id", f"{entry_id!r} is already the id of {seen[entry_id]}")
                seen.setdefault(entry_id, path)
    _fail(problems)


def validate_entry(entry: Any, *, kind: str) -> None:
    problems: Problems = {}
    ENTRY_CHECKS[kind](entry, "", problems)
    if isinstance(entry, dict) and "id" in entry:
        _check_entry_id(entry["id"], "id", problems)
    _fail(problems)


# --- writes -------------------------------------------------------------------------------


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def _entry_row(*, memory: AgentMemory, kind: str, data: dict[str, Any], position: int) -> AgentMemoryEntry:
    moment = parse_timestamp(data["timestamp"]) if isinstance(data.get("timestamp"), str) else None
    row = AgentMemoryEntry(
        team_id=memory.team_id, memory=memory, kind=kind, entry_id=data["id"], position=position, data=data
    )
    _fill_columns(row, moment)
    return row


def _fill_columns(row: AgentMemoryEntry, moment: datetime | None = None) -> None:
    data = row.data
    if moment is None and isinstance(data.get("timestamp"), str):
        moment = parse_timestamp(data["timestamp"])
    row.timestamp = moment
    row.result = data.get("result", "") if row.kind == Kind.ATTEMPT else ""
    row.plan_step = data.get("planStep") if row.kind == Kind.ATTEMPT else None
    row.size = _json_size(data)


def _locked_memory(*, session: Session, agent: str, create: bool) -> AgentMemory:
    """The agent's memory row, locked for this transaction (created if asked): agent_memory_lock."""
    memory = agent_memory_lock(session_id=session.pk, agent=agent)
    if memory is not None:
        return memory
    if not create:
        raise NotFound("Agent memory not found.")
    try:
        with transaction.atomic():
            return AgentMemory.objects.create(team_id=session.team_id, session=session, agent=agent)
    except IntegrityError:  # created by a concurrent request between our read and insert
        created = agent_memory_lock(session_id=session.pk, agent=agent)
        if created is None:  # and deleted again since: the insert's error stands
            raise
        return created


def _next_id(memory: AgentMemory, kind: str, taken: set[str]) -> str:
    prefix = ID_PREFIX[kind]
    pattern = re.compile(rf"{prefix}-(\d+)")
    numbers = [int(m.group(1)) for entry_id in taken if (m := pattern.fullmatch(entry_id))]
    return f"{prefix}-{max(numbers, default=0) + 1:03d}"


def _taken_ids(memory: AgentMemory) -> set[str]:
    return set(AgentMemoryEntry.objects.filter(memory=memory).values_list("entry_id", flat=True))


@transaction.atomic
def agent_memory_replace(*, session: Session, agent: str, document: Any) -> AgentMemory:
    """PUT: the agent's memory becomes `document`. Archived entries are kept (their ids stay taken).

    Takes the memory's row lock (agent_records.locks).
    """
    validate_agent(agent)
    validate_document(document, agent=agent)
    memory = _locked_memory(session=session, agent=agent, create=True)
    archived = set(
        AgentMemoryEntry.objects.filter(memory=memory, archived_at__isnull=False).values_list("entry_id", flat=True)
    )
    problems: Problems = {}
    for section in SECTIONS:
        for index, entry in enumerate(document.get(section) or []):
            if entry.get("id") in archived:
                _add(problems, f"{section}[{index}].id", f"{entry['id']!r} is the id of an archived entry")
    _fail(problems)

    AgentMemoryEntry.objects.filter(memory=memory, archived_at__isnull=True).delete()
    taken = set(archived) | {e["id"] for s in SECTIONS for e in document.get(s) or [] if "id" in e}
    rows = []
    for section, kind in SECTIONS.items():
        for position, entry in enumerate(document.get(section) or []):
            data = _with_defaults(entry, memory=memory, kind=kind, taken=taken, now=None)
            rows.append(_entry_row(memory=memory, kind=kind, data=data, position=position))
    AgentMemoryEntry.objects.bulk_create(rows)
    _index(memory, rows)
    memory.header = {key: value for key, value in document.items() if key not in SECTIONS}
    memory.key_order = list(document)
    memory.save(update_fields=["header", "key_order", "updated_at"])
    return memory


def _index(memory: AgentMemory, rows: list[AgentMemoryEntry]) -> None:
    """Recall finds record entries by what they say; archived ones count as superseded."""
    search.index_record_entries(team_id=memory.team_id, entries=rows, session_id=memory.session_id, agent=memory.agent)


def _with_defaults(
    entry: dict[str, Any], *, memory: AgentMemory, kind: str, taken: set[str], now: str | None
) -> dict[str, Any]:
    """The entry with an id (and, given `now`, a timestamp) in front, as agent-memory.yaml writes them.

    A replaced document keeps entries without a timestamp as written; appends are stamped.
    """
    missing: dict[str, Any] = {}
    if "id" not in entry:
        missing["id"] = _next_id(memory, kind, taken)
        taken.add(missing["id"])
    if now is not None and "timestamp" not in entry:
        missing["timestamp"] = now
    return {**missing, **entry} if missing else entry


@transaction.atomic
def agent_memory_entry_append(*, session: Session, agent: str, kind: str, entry: Any) -> AgentMemoryEntry:
    """POST one discovery/attempt/decision; the server assigns the next `<kind>-NNN` id.

    An attempt recorded at its start needs no result yet: it is `in_progress` until completed.
    Takes the memory's row lock (agent_records.locks).
    """
    validate_agent(agent)
    if kind == Kind.ATTEMPT and isinstance(entry, dict) and "result" not in entry:
        entry = {**entry, "result": "in_progress"}
    validate_entry(entry, kind=kind)
    memory = _locked_memory(session=session, agent=agent, create=True)
    taken = _taken_ids(memory)
    if entry.get("id") in taken:
        raise Conflict(f"id: {entry['id']!r} is already used in this memory", fields={"id": ["already used"]})
    data = _with_defaults(entry, memory=memory, kind=kind, taken=taken, now=format_timestamp(timezone.now()))
    last = AgentMemoryEntry.objects.filter(memory=memory, kind=kind).aggregate(top=Max("position"))["top"]
    row = _entry_row(memory=memory, kind=kind, data=data, position=0 if last is None else last + 1)
    row.save()
    memory.save(update_fields=["updated_at"])
    _index(memory, [row])
    return row


# Fields the format records when an attempt concludes ("lessons: what was learned (added on
# completion)", how long it took, what it cost); while it runs, an update changes how it is going.
OUTCOME_FIELDS = ("output", "error", "lessons", "nextAttempt", "duration_ms", "iterations", "tokensUsed")
FIXED_FIELDS = ("id", "timestamp")
OUTCOME_PROBLEM = "is recorded when the attempt concludes: send it with result success, failure or partial"


@transaction.atomic
def agent_memory_attempt_update(*, session: Session, agent: str, attempt_id: str, changes: Any) -> AgentMemoryEntry:
    """PATCH an attempt: update it while it is in progress, or conclude it with a final result.

    Each field sent replaces the stored one (lists whole, null stays null); the others keep their
    place. While in progress: approach, status, progress, subTasks, currentIssue, nextStep and any
    field but the outcomes. With `result` success/failure/partial the attempt concludes, outcomes
    included. A concluded attempt is what the prompts and the arbiter read as the record of what was
    tried ("Don't Repeat"), so it no longer changes: trying again is a new attempt. Sending the
    concluding update again (a retry) changes nothing and is accepted. Takes the memory's row
    lock (agent_records.locks).
    """
    memory = _locked_memory(session=session, agent=agent, create=False)
    row = agent_memory_selectors.agent_memory_attempt_get(memory=memory, attempt_id=attempt_id)
    problems: Problems = {}
    if not isinstance(changes, dict):
        _add(problems, "non_field_errors", f"the body must be a mapping, not {_type_name(changes)}")
        _fail(problems)
    fields(ATTEMPT_FIELDS)(changes, "", problems)
    for name in FIXED_FIELDS:
        if name in changes and changes[name] != row.data.get(name) and name not in problems:
            _add(problems, name, "cannot be changed")
    _fail(problems)

    data = {**row.data, **changes}
    if row.result != "in_progress":
        if data == row.data:
            return row
        raise Conflict(
            f"{attempt_id} concluded ({row.result}); a concluded attempt no longer changes: record a new attempt"
        )
    if changes.get("result") not in FINAL_RESULTS:
        for name in OUTCOME_FIELDS:
            if name in changes:
                _add(problems, name, OUTCOME_PROBLEM)
        _fail(problems)
    validate_entry(data, kind=Kind.ATTEMPT)
    if data == row.data:
        return row
    row.data = data
    _fill_columns(row)
    row.save(update_fields=["data", "timestamp", "result", "plan_step", "size"])
    memory.save(update_fields=["updated_at"])
    _index(memory, [row])
    return row


# --- the context section on its own ------------------------------------------------------------


def _validate_context(context: Any) -> None:
    problems: Problems = {}
    CONTEXT(context, "", problems)
    _fail(problems)


def _save_context(memory: AgentMemory, context: dict[str, Any] | None) -> None:
    header = dict(memory.header)
    if context is None:
        header.pop("context", None)
    else:
        header["context"] = context
    memory.header = header
    memory.save(update_fields=["header", "updated_at"])


@transaction.atomic
def agent_memory_context_replace(*, session: Session, agent: str, context: Any) -> dict[str, Any]:
    """PUT the context section alone; the entries stay as they are. Starts the memory if needed.

    Takes the memory's row lock (agent_records.locks).
    """
    validate_agent(agent)
    _validate_context(context)
    memory = _locked_memory(session=session, agent=agent, create=True)
    _save_context(memory, context)
    return context


@transaction.atomic
def agent_memory_context_update(*, session: Session, agent: str, changes: Any) -> dict[str, Any]:
    """PATCH the context: each key sent replaces that key (lists and mappings whole), others stay.

    Takes the memory's row lock (agent_records.locks).
    """
    validate_agent(agent)
    _validate_context(changes)
    memory = _locked_memory(session=session, agent=agent, create=True)
    current = memory.header.get("context")
    context = {**(current if isinstance(current, dict) else {}), **changes}
    _save_context(memory, context)
    return context


@transaction.atomic
def agent_memory_context_clear(*, session: Session, agent: str) -> None:
    """DELETE the context: the document's `context` is null again.

    Takes the memory's row lock (agent_records.locks).
    """
    memory = _locked_memory(session=session, agent=agent, create=False)
    _save_context(memory, None)


# --- archiving (the file size guidelines by session length) --------------------------------


@dataclass(frozen=True)
class ArchivePolicy:
    retention: timedelta  # entries newer than (newest entry - retention) always stay
    long_session: timedelta  # a memory spanning more than this is archived
    small_session: timedelta  # below this span, `small_max_bytes` applies, else `medium_max_bytes`
    small_max_bytes: int
    medium_max_bytes: int

    @classmethod
    def from_settings(cls) -> ArchivePolicy:
        return cls(
            retention=timedelta(seconds=settings.AGENT_MEMORY_RETENTION_SECONDS),
            long_session=timedelta(seconds=settings.AGENT_MEMORY_LONG_SESSION_SECONDS),
            small_session=timedelta(seconds=settings.AGENT_MEMORY_SMALL_SESSION_SECONDS),
            small_max_bytes=settings.AGENT_MEMORY_SMALL_MAX_BYTES,
            medium_max_bytes=settings.AGENT_MEMORY_MEDIUM_MAX_BYTES,
        )

    def is_due(self, *, oldest: datetime, newest: datetime, size: int) -> bool:
        """Over the size guideline: > 4 hours long, or over 50 KB (< 2 hours) / 100 KB of live entries."""
        span = newest - oldest
        limit = self.small_max_bytes if span < self.small_session else self.medium_max_bytes
        return span > self.long_session or size > limit


def _first_line(value: Any) -> str:
    return str(value).split("\n")[0] if value is not None else ""


def history_line(kind: str, data: Mapping[str, Any]) -> str:
    """One line of the history summary for an archived entry."""
    entry_id = data.get("id", "")
    if kind == Kind.DISCOVERY:
        label = "/".join(str(data[k]) for k in ("type", "importance") if k in data)
        return f"{entry_id} [{label}] {_first_line(data.get('content'))}"
    if kind == Kind.ATTEMPT:
        step = f" step {data['planStep']}" if data.get("planStep") is not None else ""
        line = f"{entry_id}{step} ({data.get('result')}) {data.get('description', '')}"
        if data.get("result") == "failure":
            line += f": {_first_line(data.get('output') or data.get('error'))}"
        return line
    return f"{entry_id} [{data.get('type', '')}] {data.get('description', '')}"


@transaction.atomic
def agent_memory_archive(*, memory_id: int, policy: ArchivePolicy | None = None) -> int:
    """Move a due memory's old entries to its archive with a `history` summary; returns how many.

    Age is measured against the memory's newest entry, so a memory read back days later keeps
    its last `retention` of work. Attempts still in progress stay whatever their age. Takes
    the memory's row lock (agent_records.locks).
    """
    policy = policy or ArchivePolicy.from_settings()
    memory = agent_memory_lock_by_id(memory_id=memory_id)
    if memory is None:
        return 0
    live = list(AgentMemoryEntry.objects.filter(memory=memory, archived_at__isnull=True).order_by("kind", "position"))
    stamped = [row.timestamp for row in live if row.timestamp is not None]
    if not stamped:
        return 0
    if not policy.is_due(oldest=min(stamped), newest=max(stamped), size=sum(row.size for row in live)):
        return 0
    cutoff = max(stamped) - policy.retention
    moving = [
        row
        for row in live
        if row.timestamp is not None
        and row.timestamp < cutoff
        and not (row.kind == Kind.ATTEMPT and row.result == "in_progress")
    ]
    if not moving:
        return 0
    now = timezone.now()
    AgentMemoryEntry.objects.filter(pk__in=[row.pk for row in moving]).update(archived_at=now)
    for row in moving:
        row.archived_at = now
    _index(memory, moving)
    moving.sort(key=lambda row: (row.timestamp, row.pk))
    summary = {
        "archivedAt": format_timestamp(now),
        "from": moving[0].data.get("timestamp"),
        "to": moving[-1].data.get("timestamp"),
        "archive": "agent-memory-archive.yaml",
        "entries": {
            section: [row.entry_id for row in moving if row.kind == kind] for section, kind in SECTIONS.items()
        },
        "summary": [history_line(row.kind, row.data) for row in moving],
    }
    header = dict(memory.header)
    history = header.get("history")
    header["history"] = [*(history if isinstance(history, list) else []), summary]
    memory.header = header
    memory.save(update_fields=["header", "updated_at"])
    return len(moving)


def agent_memory_archive_due(*, policy: ArchivePolicy | None = None) -> dict[str, int]:
    """The periodic job: archive every memory the size guidelines say is due (one transaction each)."""
    policy = policy or ArchivePolicy.from_settings()
    stats = (
        AgentMemoryEntry.objects.filter(archived_at__isnull=True)
        .values("memory_id")
        .annotate(oldest=Min("timestamp"), newest=Max("timestamp"), size=Sum("size"), n=Count("id"))
        .order_by()
    )
    counts = {"checked": 0, "archived_memories": 0, "archived_entries": 0}
    for row in stats.iterator():
        counts["checked"] += 1
        if row["oldest"] is None:
            continue
        if not policy.is_due(oldest=row["oldest"], newest=row["newest"], size=row["size"] or 0):
            continue
        moved = agent_memory_archive(memory_id=row["memory_id"], policy=policy)
        if moved:
            counts["archived_memories"] += 1
            counts["archived_entries"] += moved
    return counts
