"""The memory-file MCP tools: what each is for, its arguments, and the REST call it makes.

memory_app.mcp.tools turns each ToolSpec into a tool of its registry (this module cannot import
that one: the registry imports it), so these run the memory-file endpoints as the calling key,
with the endpoints' validation, roles and team scoping.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from memory_app.mcp.arguments import Schema
from memory_app.memory_files import documents, services

API = "/api/v1/memory-files"


class ToolCall(Protocol):
    """What a tool needs of the MCP call (memory_app.mcp.tools.Call)."""

    arguments: dict[str, Any]

    def api(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = ...,
        body: Any = ...,
        headers: dict[str, str] | None = ...,
        renames: dict[str, str] | None = ...,
        body_argument: str = ...,
    ) -> Any: ...


@dataclass(frozen=True)
class ToolAnswer:
    data: dict[str, Any]
    text: str  # what the model reads


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    properties: dict[str, Schema]
    run: Callable[[ToolCall], ToolAnswer]
    required: tuple[str, ...] = ()
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False


PATH: Schema = {
    "type": "string",
    "minLength": 1,
    "maxLength": 2 * documents.MAX_PATH_CHARS,
    "description": "A path under /memories, e.g. /memories/notes/todo.md (no '..', no hidden names).",
}
OWNER: Schema = {
    "type": "string",
    "minLength": 1,
    "maxLength": 100,
    "description": "The owning agent's name; omit it for the team's shared files.",
}
TEXT: Schema = {"type": "string"}


def _owner(call: ToolCall) -> dict[str, Any]:
    agent = call.arguments.get("agent")
    return {} if agent is None else {"agent": agent}


def run_memory_file(call: ToolCall) -> ToolAnswer:
    body = {name: value for name, value in call.arguments.items() if value is not None}
    answer = call.api("POST", f"{API}/command/", body=body)
    return ToolAnswer(answer, answer.get("output", ""))


def run_memory_file_history(call: ToolCall) -> ToolAnswer:
    query = {"path": call.arguments["path"], "agent": call.arguments.get("agent") or ""}
    history = call.api("GET", f"{API}/versions/", query=query)
    lines = [
        f"version {row['version']} ({row['action']}) by {row['author'] or 'unknown'} at {row['created_at']}"
        for row in history.get("results", [])
    ]
    return ToolAnswer(history, "\n".join([f"History of {history.get('path')}:", *lines]))


def run_memory_file_revert(call: ToolCall) -> ToolAnswer:
    body = {"path": call.arguments["path"], "version": call.arguments["version"], **_owner(call)}
    file = call.api("POST", f"{API}/revert/", body=body)
    return ToolAnswer(
        file,
        f"Reverted {file.get('path')} to the text of version {call.arguments['version']}; "
        f"it is now version {file.get('version')}.",
    )


MEMORY_FILE = ToolSpec(
    name="memory_file",
    title="Memory files (the memory tool's commands)",
    description="Read and change the team's memory files under /memories, with the memory tool's commands: "
    "view (a directory listing, or a file with line numbers; view_range [first, last]), create (path, "
    "file_text), str_replace (path, old_str that appears once, new_str), insert (path, insert_line: 0 = before "
    "the first line, insert_text), delete (path: a file or directory), rename (old_path, new_path). `agent` "
    "picks an agent's own files; omitted: the team's shared files. Every change is versioned (see "
    "memory_file_history). /memories/agent-records/<session>/<agent>/agent-memory.yaml shows the agent records "
    "(view only).",
    properties={
        "command": {"type": "string", "enum": list(services.COMMANDS)},
        "path": PATH,
        "file_text": TEXT,
        "old_str": TEXT,
        "new_str": TEXT,
        "insert_line": {"type": "integer", "minimum": 0},
        "insert_text": TEXT,
        "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
        "old_path": PATH,
        "new_path": PATH,
        "agent": OWNER,
    },
    required=("command",),
    run=run_memory_file,
)

MEMORY_FILE_HISTORY = ToolSpec(
    name="memory_file_history",
    title="A memory file's versions",
    description="Who changed a memory file, when and how (each version's unified diff), newest first; a deleted "
    "file's history is kept under its last path.",
    properties={"path": PATH, "agent": OWNER},
    required=("path",),
    read_only=True,
    run=run_memory_file_history,
)

MEMORY_FILE_REVERT = ToolSpec(
    name="memory_file_revert",
    title="Revert a memory file",
    description="Make a new version of a memory file with the text of an earlier `version` (see "
    "memory_file_history); a deleted file comes back.",
    properties={"path": PATH, "version": {"type": "integer", "minimum": 1}, "agent": OWNER},
    required=("path", "version"),
    run=run_memory_file_revert,
)

SPECS = (MEMORY_FILE, MEMORY_FILE_HISTORY, MEMORY_FILE_REVERT)
