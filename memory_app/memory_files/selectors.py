"""Reads of memory files: one owner's tree, a file, its history, and the agent records as files.

Every read starts from the team (and the owner: an agent's name, or "" for the team's shared
tree), so a path names nothing in another team's or another owner's tree.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.db.models import Q, QuerySet

from memory_app.agent_records import documents as agent_memory_yaml
from memory_app.agent_records import selectors as agent_memory_selectors
from memory_app.agent_records.models import AgentMemory
from memory_app.memory_files import documents
from memory_app.memory_files.documents import MemoryPath
from memory_app.memory_files.models import MemoryFile, MemoryFileVersion
from memory_app.tenancy.models import Team
from memsite.errors import InvalidInput, NotFound

# The most agent-record documents a listing shows (the most recently updated): a team with
# thousands of sessions would otherwise bury its own notes. Each stays readable by its path.
RECORD_FILES_LISTED = 100


def live_files(*, team: Team, agent: str) -> QuerySet[MemoryFile]:
    return MemoryFile.objects.filter(team=team, agent=agent, deleted_at__isnull=True)


def under(path: MemoryPath) -> Q:
    """The files at `path` or below it."""
    if path.is_root:
        return Q()
    return Q(path=path.text) | Q(path__startswith=path.text + "/")


def memory_file_get(*, team: Team, agent: str, path: str) -> MemoryFile:
    found = live_files(team=team, agent=agent).filter(path=path).first()
    if found is None:
        raise NotFound(f"The path {path} does not exist. Please provide a valid path.")
    return found


def memory_file_find(*, team: Team, agent: str, path: str) -> MemoryFile | None:
    return live_files(team=team, agent=agent).filter(path=path).first()


def memory_file_list(*, team: Team, agent: str | None, prefix: MemoryPath) -> QuerySet[MemoryFile]:
    """Live files under `prefix`: one owner's (`agent`, "" for shared) or every owner's (None)."""
    files = MemoryFile.objects.filter(team=team, deleted_at__isnull=True).filter(under(prefix))
    if agent is not None:
        files = files.filter(agent=agent)
    return files.order_by("agent", "path")


def memory_file_with_history(*, team: Team, agent: str, path: str) -> MemoryFile:
    """The live file at `path`, else the one most recently deleted there (its history is kept)."""
    live = memory_file_find(team=team, agent=agent, path=path)
    if live is not None:
        return live
    deleted = (
        MemoryFile.objects.filter(team=team, agent=agent, path=path, deleted_at__isnull=False)
        .order_by("-deleted_at", "-pk")
        .first()
    )
    if deleted is None:
        raise NotFound(f"The path {path} does not exist. Please provide a valid path.")
    return deleted


def memory_file_versions(*, file: MemoryFile) -> QuerySet[MemoryFileVersion]:
    return MemoryFileVersion.objects.filter(file=file).order_by("-version")


def memory_file_version_get(*, file: MemoryFile, version: int) -> MemoryFileVersion:
    found = MemoryFileVersion.objects.filter(file=file, version=version).first()
    if found is None:
        raise NotFound(f"{file.path} has no version {version}.")
    return found


# --- the agent records as read-only files ------------------------------------------------------


@dataclass(frozen=True)
class RecordFile:
    path: str
    memory: AgentMemory


def record_files(*, team: Team, under_path: MemoryPath | None = None) -> list[RecordFile]:
    """The team's agent-record documents as files (the most recently updated RECORD_FILES_LISTED),
    leaving out agents whose names no path may hold."""
    memories = AgentMemory.objects.filter(team=team).order_by("-updated_at", "-pk")
    if under_path is not None and documents.is_record_path(under_path.text):
        names = under_path.names[1:]  # below agent-records: the session, then the agent
        if names:
            memories = memories.filter(session_id=names[0]) if _is_uuid(names[0]) else memories.none()
        if len(names) > 1:
            memories = memories.filter(agent=names[1])
    found = []
    for memory in memories[:RECORD_FILES_LISTED]:
        path = documents.record_path(session_id=str(memory.session_id), agent=memory.agent)
        if _valid(path):
            found.append(RecordFile(path=path, memory=memory))
    return found


def record_file_text(*, team: Team, path: MemoryPath) -> str | None:
    """The agent-memory.yaml a record path names, or None when it names none."""
    names = path.names
    if len(names) != 4 or names[0] != "agent-records" or names[3] != documents.RECORD_FILE_NAME:
        return None
    if not _is_uuid(names[1]):
        return None
    memory = (
        AgentMemory.objects.filter(team=team, session_id=names[1], agent=names[2]).select_related("session").first()
    )
    if memory is None:
        return None
    document = agent_memory_selectors.agent_memory_document(memory=memory, session=memory.session)
    return agent_memory_yaml.dump(document)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _valid(path: str) -> bool:
    try:
        documents.parse_path(path)
    except InvalidInput:  # an agent name no path may hold: the record is left out
        return False
    return True


def record_sizes(*, team: Team, records: list[RecordFile]) -> list[tuple[str, int]]:
    """(path, size in bytes) of each record document, rendered to know its size."""
    sized = []
    for record in records:
        text = record_file_text(team=team, path=MemoryPath(record.path))
        if text is not None:
            sized.append((record.path, documents.byte_size(text)))
    return sized
