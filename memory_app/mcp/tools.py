"""The MCP tools: what each is for (told to the model), its arguments, and the REST call it is.

Every tool runs the REST endpoint that does the same thing (memory_app.mcp.gateway), so its
validation, team scoping, roles, throttles, usage ledger and errors are the endpoint's. A tool
adds only what MCP needs: arguments named for a model (`session_id` everywhere), a session
found by external id, and error field paths that name the argument the field came from.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from django.db import transaction
from django.http import HttpRequest

from memory_app.agent_records import services as records
from memory_app.conversations.models import Message
from memory_app.mcp.arguments import Schema, argument_problems
from memory_app.mcp.gateway import ApiAnswer, call_api
from memory_app.memory_files import tools as memory_file_tools
from memory_app.search.models import SearchKind
from memory_app.tenancy.models import ApiKey
from memory_client.vocabulary.wire import ErrorBody
from memsite.api_errors import error_body, validation_error_body

API = "/api/v1"
RECORD_KINDS = {"discovery": "discoveries", "attempt": "attempts", "decision": "decisions"}
JOB_KINDS = ("compaction", "fact_extraction")


class ToolFailed(Exception):
    """The tool's answer is an error: `body` is the API's error shape, `status` its HTTP status."""

    def __init__(self, body: ErrorBody, status: int) -> None:
        super().__init__(body.get("detail", ""))
        self.body = body
        self.status = status


@dataclass(frozen=True)
class ToolResult:
    data: dict[str, Any]  # the structured result
    text: str  # what a model reads: the JSON, or the prompt text a tool exists to produce
    endpoint: str  # the REST pattern that answered (metrics, logs)


@dataclass
class Call:
    """One tool call: the MCP request, the key that made it, and the arguments."""

    request: HttpRequest
    api_key: ApiKey
    arguments: dict[str, Any]
    endpoint: str = ""

    def arg(self, name: str, default: Any = None) -> Any:
        value = self.arguments.get(name)
        return default if value is None else value

    def api(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        renames: dict[str, str] | None = None,
        body_argument: str = "",
    ) -> Any:
        """The REST answer's body, or ToolFailed with field paths in the tool's argument names."""
        answer = call_api(
            self.request, api_key=self.api_key, method=method, path=path, query=query, body=body, headers=headers
        )
        self.endpoint = self.endpoint or answer.endpoint
        if answer.ok:
            return answer.body
        raise ToolFailed(_in_argument_terms(answer, renames or {}, body_argument), answer.status)


def _in_argument_terms(answer: ApiAnswer, renames: dict[str, str], body_argument: str) -> ErrorBody:
    # Every error the API answers has the one error shape (memsite.api_errors).
    body = cast("ErrorBody", answer.body) if isinstance(answer.body, dict) else error_body("error", str(answer.body))
    fields: dict[str, list[str]] = body.get("fields") or {}
    if not fields:
        return body
    renamed: dict[str, list[str]] = {}
    for path, messages in fields.items():
        head, dot, rest = path.partition(".")
        head_name, bracket, index = head.partition("[")
        if head_name in renames:
            path = renames[head_name] + bracket + index + dot + rest
        elif body_argument:
            path = body_argument if path == "non_field_errors" else f"{body_argument}.{path}"
        renamed.setdefault(path, []).extend(messages)
    return {**body, "fields": renamed, "detail": _renamed_detail(body.get("detail", ""), fields, renamed)}


def _renamed_detail(detail: str, before: dict[str, list[str]], after: dict[str, list[str]]) -> str:
    first_before, first_after = next(iter(before)), next(iter(after))
    if detail.startswith(f"{first_before}:"):
        return first_after + detail[len(first_before) :]
    return detail


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    properties: dict[str, Schema]
    run: Callable[[Call], ToolResult]
    required: tuple[str, ...] = ()
    one_of_required: tuple[tuple[str, ...], ...] = ()
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False

    @property
    def input_schema(self) -> Schema:
        return {
            "type": "object",
            "properties": {name: _published(spec) for name, spec in self.properties.items()},
            "required": list(self.required),
            "additionalProperties": False,
        }

    def describe(self) -> dict[str, Any]:
        """The tool as `tools/list` lists it."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.read_only,
                "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent,
                "openWorldHint": False,
            },
        }

    def problems(self, arguments: dict[str, Any]) -> dict[str, list[str]]:
        schema = {**self.input_schema, "properties": self.properties, "x-one-of-required": self.one_of_required}
        return argument_problems(arguments, schema)

    def call(self, call: Call) -> ToolResult:
        """Run the tool; ToolFailed carries an error answer in the API's shape."""
        problems = self.problems(call.arguments)
        if problems:
            raise ToolFailed(validation_error_body(problems), 400)
        return self.run(call)


def _published(spec: Schema) -> Schema:
    """A property's schema without the checks only this server reads (x-...)."""
    return {key: value for key, value in spec.items() if not key.startswith("x-")}


def _result(data: Any, endpoint: str, text: str | None = None) -> ToolResult:
    structured = data if isinstance(data, dict) else {"results": data}
    return ToolResult(structured, text if text is not None else json.dumps(structured, ensure_ascii=False), endpoint)


# --- argument schemas shared by several tools ----------------------------------------------

SESSION_ID: Schema = {
    "type": "string",
    "format": "uuid",
    "description": "The session's id (a UUID, as memory_append returns it).",
}
AGENT: Schema = {
    "type": "string",
    "minLength": 1,
    "maxLength": 200,
    "x-path-segment": True,
    "description": "The agent's name, e.g. 'coder' (no '/').",
}
TIME: Schema = {"type": "string", "format": "date-time", "description": "ISO 8601 time"}


SESSION_RENAME = {"session": "session_id"}  # the API's filter field, and the argument naming it


def _with_session(arguments: dict[str, Any]) -> dict[str, Any]:
    """The arguments as the API's filters name them (`session`)."""
    return {("session" if k == "session_id" else k): v for k, v in arguments.items()}


def _session_path(call: Call, *rest: str) -> str:
    return "/".join([API, "sessions", str(call.arguments["session_id"]), *rest]) + "/"


# --- memory_append -----------------------------------------------------------------------


def _find_session(call: Call, external_id: str) -> str | None:
    page = call.api(
        "GET", f"{API}/sessions/", query={"external_id": external_id}, renames={"external_id": "external_id"}
    )
    results = page.get("results") or []
    return str(results[0]["id"]) if results else None


def _create_session(call: Call, external_id: str) -> str | None:
    """The new session's id, or None when another caller created it first (409)."""
    body: dict[str, Any] = {"external_id": external_id}
    if call.arguments.get("system_prompt") is not None:
        body["system_prompt"] = call.arguments["system_prompt"]
    try:
        created = call.api("POST", f"{API}/sessions/", body=body)
    except ToolFailed as failed:
        if failed.status == 409:
            return None
        raise
    return str(created["id"])


def _append(call: Call, session_id: str) -> Any:
    headers = {"Idempotency-Key": call.arguments["idempotency_key"]} if call.arguments.get("idempotency_key") else None
    return call.api(
        "POST",
        f"{API}/sessions/{session_id}/messages/",
        body={"messages": call.arguments["messages"]},
        headers=headers,
    )


def run_memory_append(call: Call) -> ToolResult:
    if call.arguments.get("session_id") is not None:
        return _appended(call, str(call.arguments["session_id"]), created=False)
    external_id = call.arguments["external_id"]
    found = _find_session(call, external_id)
    if found is not None:
        return _appended(call, found, created=False)
    if not call.arg("create", False):
        message = "No session has this external id; pass create: true to start one."
        raise ToolFailed(error_body("not_found", f"external_id: {message}", {"external_id": [message]}), 404)
    # The new session and its first messages are kept together or not at all: a bad message
    # must not leave an empty session behind (ToolFailed leaving the block rolls both back).
    with transaction.atomic():
        created = _create_session(call, external_id)
        if created is not None:
            return _appended(call, created, created=True)
    found = _find_session(call, external_id)  # another caller created it a moment ago
    if found is None:
        raise ToolFailed(error_body("conflict", "The session was created and deleted meanwhile; retry."), 409)
    return _appended(call, found, created=False)


def _appended(call: Call, session_id: str, *, created: bool) -> ToolResult:
    appended = _append(call, session_id)
    return _result({"session_id": session_id, "created": created, **appended}, call.endpoint)


MESSAGE: Schema = {
    "type": "object",
    "description": "One message in OpenAI chat format.",
    "properties": {
        "role": {"type": "string", "enum": list(Message.Role.values)},
        "content": {
            "description": "Text, or a list of content parts ({type: text|image_url, ...}); null for an assistant "
            "message that only calls tools.",
            # anyOf, not a list of types: some hosts read `type` as one string and mangle the property.
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}, {"type": "null"}],
        },
        "name": {"type": "string", "description": "The speaking agent's name."},
        "tool_calls": {
            "type": "array",
            "description": "An assistant's tool calls: [{id, type: 'function', function: {name, arguments}}].",
            "items": {"type": "object"},
        },
        "tool_call_id": {"type": "string", "description": "For role 'tool': the id of the call this answers."},
        "message_id": {
            "type": "string",
            "format": "uuid",
            "description": "Your own id for the message: sending it again returns the stored one instead of a copy.",
        },
        "meta": {"type": "object", "description": "Anything else to keep with the message."},
        "occurred_at": {
            **TIME,
            "description": "When the message was said, if not now (e.g. an imported history): ISO 8601 with a "
            "timezone, at most a day ahead. Search's from/to and recency use it.",
        },
    },
    "required": ["role"],
}

MEMORY_APPEND = Tool(
    name="memory_append",
    title="Append messages to a session",
    description="Store messages (OpenAI chat format, tool calls included) in a conversation session, in order. "
    "Address the session by `session_id`, or by your own `external_id` (with `create: true` to start it on "
    "first use). Returns each stored message's id, seq and token count. Appending may start a compaction of "
    "a managed session in the background; stored messages are never lost or rewritten.",
    properties={
        "session_id": SESSION_ID,
        "external_id": {
            "type": "string",
            "minLength": 1,
            "maxLength": 200,
            "description": "Your id for the session (e.g. a ticket or thread id), instead of session_id.",
        },
        "create": {
            "type": "boolean",
            "description": "With external_id: create the session if none has this external id (default false).",
        },
        "system_prompt": {"type": "string", "description": "The system prompt of a session this call creates."},
        "messages": {"type": "array", "minItems": 1, "items": MESSAGE, "description": "The messages, oldest first."},
        "idempotency_key": {
            "type": "string",
            "maxLength": 200,
            "description": "A key unique to this write: retrying with the same key stores the messages once.",
        },
    },
    required=("messages",),
    one_of_required=(("session_id", "external_id"),),
    run=run_memory_append,
)


# --- memory_context ------------------------------------------------------------------------


def run_memory_context(call: Call) -> ToolResult:
    kinds = call.arguments.get("recall_kinds")
    query = {
        "max_tokens": call.arguments.get("max_tokens"),
        "last": call.arguments.get("last"),
        "agent": call.arguments.get("agent"),
        "recall": call.arguments.get("recall"),
        "recall_k": call.arguments.get("recall_k"),
        "recall_kinds": ",".join(kinds) if kinds else None,
    }
    body = call.api("GET", _session_path(call, "context"), query=query)
    return _result(body, call.endpoint)


MEMORY_CONTEXT = Tool(
    name="memory_context",
    title="Get the context for the next LLM call",
    description="The messages to send to the model next, in OpenAI chat format and within a token budget: the "
    "system prompt, the latest summary of compacted history (managed sessions), and the most recent messages, "
    "tool calls kept with their results. With `recall`, one 'Relevant memory' system message after the system "
    "prompt brings in the team's most relevant memories (messages, summaries, facts, agent records...) from "
    "any session, with their sources. `token_count` is the tokens of exactly what is returned; `context_id` names "
    "this answer (GET /api/v1/contexts/{context_id}/ replays it exactly as served).",
    properties={
        "session_id": SESSION_ID,
        "max_tokens": {"type": "integer", "minimum": 1, "description": "The token budget for the whole context."},
        "last": {"type": "integer", "minimum": 1, "description": "At most this many recent messages."},
        "recall": {
            "type": "string",
            "maxLength": 1000,
            "description": "Text to recall memories about (usually the user's latest request).",
        },
        "recall_k": {"type": "integer", "minimum": 1, "maximum": 20, "description": "Memories to recall (5)."},
        "recall_kinds": {
            "type": "array",
            "items": {"type": "string", "enum": list(SearchKind.values)},
            "description": "Recall only these kinds of memory.",
        },
        "agent": {"type": "string", "maxLength": 200, "description": "Who the context is for (usage figures)."},
    },
    required=("session_id",),
    read_only=True,
    run=run_memory_context,
)


# --- memory_search -------------------------------------------------------------------------


def run_memory_search(call: Call) -> ToolResult:
    answer = call.api("POST", f"{API}/search/", body=_with_session(call.arguments), renames=SESSION_RENAME)
    return _result(answer, call.endpoint)


MEMORY_SEARCH = Tool(
    name="memory_search",
    title="Search the team's memory",
    description="Hybrid search (words and meaning) over everything the team's agents stored: messages, "
    "compaction summaries, facts, agent records, experiences, shared memory and attachments. Results are "
    "ranked, each with a snippet, its source (session, seq, message/fact/... id), agent, role and time. "
    "Filter by kinds, session, agent, role and time; `explain` shows how each result was ranked.",
    properties={
        "query": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "What to look for."},
        "kinds": {"type": "array", "items": {"type": "string", "enum": list(SearchKind.values)}},
        "session_id": {**SESSION_ID, "description": "Only this session's memories."},
        "agent": {"type": "string", "maxLength": 200, "description": "Only what this agent wrote."},
        "role": {"type": "string", "maxLength": 200, "description": "Only messages of this role."},
        "from": {**TIME, "description": "Only memories from this time on (ISO 8601)."},
        "to": {**TIME, "description": "Only memories up to this time (ISO 8601)."},
        "as_of": {**TIME, "description": "Facts as they were valid at this time."},
        "include_invalidated": {"type": "boolean", "description": "Include facts no longer valid."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Results to return (10)."},
        "explain": {"type": "boolean", "description": "Add each result's ranking details."},
    },
    required=("query",),
    read_only=True,
    run=run_memory_search,
)


# --- facts ---------------------------------------------------------------------------------


def run_fact_add(call: Call) -> ToolResult:
    fact = call.api("POST", f"{API}/facts/", body=_with_session(call.arguments), renames=SESSION_RENAME)
    return _result(fact, call.endpoint)


def run_facts_query(call: Call) -> ToolResult:
    page = call.api("GET", f"{API}/facts/", query=_with_session(call.arguments), renames=SESSION_RENAME)
    return _result(page, call.endpoint)


TERM: Schema = {"type": "string", "minLength": 1, "maxLength": 500}

FACT_ADD = Tool(
    name="fact_add",
    title="Add a fact",
    description="Record a fact as subject / predicate / object (e.g. 'alice' 'prefers' 'dark mode'), for the "
    "team or one session. The same fact again is counted, not duplicated. With `replaces: true` (or for a "
    "single-valued predicate such as 'lives_in') the new object supersedes the live ones of the same subject "
    "and predicate: they stay in history as no longer valid.",
    properties={
        "subject": {**TERM, "description": "Who or what the fact is about."},
        "predicate": {**TERM, "description": "The relation, e.g. 'works_at', 'prefers'."},
        "object": {**TERM, "description": "The value or the other entity."},
        "role": {"type": "string", "maxLength": 200, "description": "Who states it: 'user', 'assistant' or an agent."},
        "session_id": {**SESSION_ID, "description": "The session it came from (omit for a team-wide fact)."},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "replaces": {"type": "boolean", "description": "This value replaces the current ones (default false)."},
    },
    required=("subject", "predicate", "object", "role"),
    run=run_fact_add,
)

FACTS_QUERY = Tool(
    name="facts_query",
    title="Look up facts",
    description="Facts matching the given subject, predicate and/or object (exact), or containing `q`; only "
    "facts valid now unless `as_of` (valid at that time) or `include_invalidated` is given. Newest first.",
    properties={
        "subject": TERM,
        "predicate": TERM,
        "object": TERM,
        "q": {**TERM, "description": "Text to find in subject, predicate or object."},
        "role": {"type": "string", "maxLength": 200},
        "session_id": SESSION_ID,
        "as_of": {**TIME, "description": "Facts valid at this time (ISO 8601)."},
        "include_invalidated": {"type": "boolean"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "Facts to return (50)."},
        "offset": {"type": "integer", "minimum": 0},
    },
    read_only=True,
    run=run_facts_query,
)


# --- experiences ---------------------------------------------------------------------------


def run_experiences_select(call: Call) -> ToolResult:
    selected = call.api("POST", f"{API}/experiences/select/", body=call.arguments)
    return _result(selected, call.endpoint)


EXPERIENCES_SELECT = Tool(
    name="experiences_select",
    title="Select the experiences to follow",
    description="Choose, from the team's curated experiences for `role`, the instructions that apply to `query` "
    "(an LLM reads each experience's 'when'). Returns the selected experiences' 'what' to add to your prompt. "
    "Every selection is logged for the team to review.",
    properties={
        "role": {"type": "string", "minLength": 1, "maxLength": 200, "description": "The agent role, e.g. 'coder'."},
        "query": {"type": "string", "minLength": 1, "description": "The task or question at hand."},
        "context": {"type": "string", "description": "Extra context for the choice."},
        "session_id": SESSION_ID,
        "round_id": {"type": "string", "maxLength": 200},
        "post_id": {"type": "string", "maxLength": 200},
    },
    required=("role", "query"),
    run=run_experiences_select,
)


# --- agent records -------------------------------------------------------------------------


def run_agent_record_add(call: Call) -> ToolResult:
    path = _session_path(call, "agents", call.arguments["agent"], "memory", RECORD_KINDS[call.arguments["kind"]])
    entry = call.api("POST", path, body=call.arguments["entry"], body_argument="entry")
    return _result(entry, call.endpoint)


def run_agent_record_prompt(call: Call) -> ToolResult:
    body = call.api("GET", _session_path(call, "agents", call.arguments["agent"], "memory", "prompt"))
    return _result(body, call.endpoint, text=body.get("text", ""))


AGENT_RECORD_ADD = Tool(
    name="agent_record_add",
    title="Record a discovery, attempt or decision",
    description="Add to an agent's work record in a session. kind 'discovery': entry {type: "
    f"{'|'.join(records.DISCOVERY_TYPES)}, content, importance?: {'|'.join(records.IMPORTANCE)}, relatedFiles?, "
    "actionItems?}. kind 'attempt': entry {description, approach?, commands?, result?: "
    f"{'|'.join(records.RESULTS)} (omit while in progress), planStep?, output?, error?, lessons?}}. kind 'decision': "
    f"entry {{type: {'|'.join(records.DECISION_TYPES)}, description, reasoning?, alternatives?, impact?, "
    "reversible?}. The server assigns the id ('discovery-001', ...) and the timestamp. Failed attempts are what "
    "later prompts warn about.",
    properties={
        "session_id": SESSION_ID,
        "agent": AGENT,
        "kind": {"type": "string", "enum": list(RECORD_KINDS)},
        "entry": {"type": "object", "description": "The entry's fields (see the description)."},
    },
    required=("session_id", "agent", "kind", "entry"),
    run=run_agent_record_add,
)

AGENT_RECORD_PROMPT = Tool(
    name="agent_record_prompt",
    title="An agent's record as prompt text",
    description="The agent's work record in a session as text to put in its prompt: recent discoveries, recent "
    "failed attempts (don't repeat them), the current step and blockers.",
    properties={"session_id": SESSION_ID, "agent": AGENT},
    required=("session_id", "agent"),
    read_only=True,
    run=run_agent_record_prompt,
)


# --- events and jobs ----------------------------------------------------------------------


def run_events_list(call: Call) -> ToolResult:
    page = call.api("GET", f"{API}/events/", query=_with_session(call.arguments), renames=SESSION_RENAME)
    return _result(page, call.endpoint)


class JobStatus(TypedDict, total=False):
    """What job_status answers: the session's runs of each kind asked for, newest first, each as
    the REST API shows it (a compaction run, a fact-extraction run)."""

    compactions: list[dict[str, Any]]
    fact_extractions: list[dict[str, Any]]


def _runs_with_id(runs: list[dict[str, Any]], job_id: str) -> list[dict[str, Any]]:
    return [run for run in runs if str(run.get("id")) == job_id]


def run_job_status(call: Call) -> ToolResult:
    kind, job_id = call.arguments.get("kind"), call.arguments.get("job_id")
    found: JobStatus = {}
    if kind in (None, "compaction"):
        found["compactions"] = call.api("GET", _session_path(call, "compactions"))
    if kind in (None, "fact_extraction"):
        page = call.api("GET", f"{API}/fact-extractions/", query={"session": call.arguments["session_id"]})
        found["fact_extractions"] = page.get("results", [])
    if job_id is not None:
        if "compactions" in found:
            found["compactions"] = _runs_with_id(found["compactions"], job_id)
        if "fact_extractions" in found:
            found["fact_extractions"] = _runs_with_id(found["fact_extractions"], job_id)
        if not any(found.values()):
            message = "No compaction or fact extraction of this session has this id."
            raise ToolFailed(error_body("not_found", f"job_id: {message}", {"job_id": [message]}), 404)
    return _result(found, call.endpoint)


EVENTS_LIST = Tool(
    name="events_list",
    title="List memory events",
    description="The team's memory events, oldest first: compaction started/completed/failed, facts extracted, "
    "resets, ... Pass the last event id you saw as `after` to get only newer ones.",
    properties={
        "session_id": {**SESSION_ID, "description": "Only this session's events."},
        "after": {"type": "integer", "minimum": 0, "description": "Only events with a greater id."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 500, "description": "Events to return (100)."},
    },
    read_only=True,
    run=run_events_list,
)

JOB_STATUS = Tool(
    name="job_status",
    title="Status of background jobs",
    description="The compaction and fact-extraction runs of a session, newest first: status (pending, running, "
    "done, failed, ...), attempts, timings, error. With `job_id`, just that run.",
    properties={
        "session_id": SESSION_ID,
        "job_id": {"type": "string", "format": "uuid", "description": "One run's id."},
        "kind": {"type": "string", "enum": list(JOB_KINDS)},
    },
    required=("session_id",),
    read_only=True,
    run=run_job_status,
)


# --- memory files (their specs live with the domain: memory_app.memory_files.tools) -------------


def _memory_file_tool(spec: memory_file_tools.ToolSpec) -> Tool:
    def run(call: Call) -> ToolResult:
        answer = spec.run(call)
        return _result(answer.data, call.endpoint, text=answer.text)

    return Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        properties=spec.properties,
        required=spec.required,
        read_only=spec.read_only,
        destructive=spec.destructive,
        idempotent=spec.idempotent,
        run=run,
    )


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        MEMORY_APPEND,
        MEMORY_CONTEXT,
        MEMORY_SEARCH,
        FACT_ADD,
        FACTS_QUERY,
        EXPERIENCES_SELECT,
        AGENT_RECORD_ADD,
        AGENT_RECORD_PROMPT,
        EVENTS_LIST,
        JOB_STATUS,
        *(_memory_file_tool(spec) for spec in memory_file_tools.SPECS),
    )
}
