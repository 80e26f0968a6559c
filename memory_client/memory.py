"""marsys 0.2.1's ConversationMemory, kept on a memsite server instead of a list.

The managed memory is in managed.py, the MemoryManager that builds either in manager.py.

Positions follow marsys: index 0 is the system message when there is one. On the server the
system prompt lives on the session (not as a message row), so index 0 maps to the session's
`system_prompt` and index i to the i-th message row in seq order (i-1 when there is a prompt).
Every read goes to the server, never to a local cache: other agents write the same session.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Self, cast

import httpx

from memory_client.errors import ApiError, MemoryClientError, MemoryConfigError, MessageError, NotFoundError
from memory_client.events import EventSink, MemoryResetEvent, emit
from memory_client.messages import (
    WIRE_FIELDS,
    AgentCallMsg,
    Message,
    ToolCallMsg,
    calls_to_wire,
    check_images,
    convert_calls,
    image_url,
)
from memory_client.replay import NOT_RECORDED_WAIT_SECONDS, ServedMessages, replay_context, served_messages
from memory_client.search import refused, relevant_ids, search_body, search_hits
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT, HttpApi, new_idempotency_key
from memory_client.turns import tail_cut
from memory_client.vocabulary.messages import CHAT_MESSAGE_FIELDS, to_llm_dict
from memory_client.vocabulary.wire import ContextReplay

logger = logging.getLogger(__name__)

ROLES = ("system", "user", "assistant", "tool")
SUPPORTED_MEMORY_TYPES = ("conversation_history", "managed_conversation")
_PAGE = 1000  # the list endpoint's largest page
MAX_LAST = 10000  # the largest `last` of the list and context endpoints
# load_from_file sends big files in several atomic batches, each well under the server's
# per-request limits (MEMSITE_MAX_MESSAGES_PER_REQUEST=500, 20 MiB bodies by default).
_BATCH_MESSAGES = 100
_BATCH_BYTES = 8 * 1024 * 1024
# The fields a replace_memory() sets: every field of marsys's Message. send_from/send_to/meta
# are memsite's own and stay as they were.
_REPLACED_FIELDS = CHAT_MESSAGE_FIELDS


def _as_uuid(value: object) -> str | None:
    """The canonical form of a UUID, or None: the server's ids are UUIDs, so nothing else exists."""
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        return None


def _llm_dict(message: Mapping[str, Any]) -> dict[str, Any]:
    """`to_llm_dict` as the reads return it: a plain dict (marsys's type, which a caller may extend)."""
    return dict(to_llm_dict(message))


def _system(prompt: str) -> dict[str, Any]:
    return {"role": "system", "content": prompt}


def _stored_record(row: dict[str, Any]) -> dict[str, Any]:
    """A stored message as an append body that stores it again under the same id."""
    return {"message_id": row["message_id"], **{f: row[f] for f in WIRE_FIELDS if row.get(f) is not None}}


def _chunks(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    chunks: list[list[dict[str, Any]]] = [[]]
    size = 0
    for record in records:
        record_size = len(json.dumps(record, ensure_ascii=False, default=str))
        if chunks[-1] and (len(chunks[-1]) >= _BATCH_MESSAGES or size + record_size > _BATCH_BYTES):
            chunks.append([])
            size = 0
        chunks[-1].append(record)
        size += record_size
    return [chunk for chunk in chunks if chunk]


class SessionBound:
    """What every remote memory shares: one server session reached through one HttpApi."""

    _api: HttpApi
    session_id: str

    @property
    def _path(self) -> str:
        return f"sessions/{self.session_id}/"

    def close(self) -> None:
        self._api.close()

    def search(
        self,
        query: str,
        *,
        kinds: Sequence[str] | None = None,
        session: str | None = None,
        agent: str | None = None,
        role: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        as_of: datetime | str | None = None,
        include_invalidated: bool = False,
        limit: int = 10,
        explain: bool = False,
    ) -> list[dict[str, Any]]:
        """Hybrid search over the whole team's memory (every session), best first.

        `kinds` narrows it to some of message, summary, fact, record, experience, shared_memory,
        attachment; `session` (a session id: `self.session_id` for this memory's own), `agent`,
        `role`, `since`/`until` (when the memory happened) filter it; `as_of` shows facts and
        records as they were live then, `include_invalidated` adds invalidated ones after every
        live result. `limit` is 1..50. Each hit is the API's: kind, id (the source's), text,
        snippet (matched words marked **so**), source (session, seq, message_id, run_id, fact_id,
        record_entry_id, ...), occurred_at, invalidated_at, score, and with `explain=True` its
        ranks and factors. A refused search (empty query, unknown kind, bad filter) raises
        SearchQueryError naming the argument; a session of another team raises NotFoundError.
        """
        body = search_body(
            query,
            kinds=kinds,
            session=session,
            agent=agent,
            role=role,
            since=since,
            until=until,
            as_of=as_of,
            include_invalidated=include_invalidated,
            limit=limit,
            explain=explain,
        )
        return search_hits(self._api, body)

    def replay_context(self, context_id: str, *, wait: float = NOT_RECORDED_WAIT_SECONDS) -> ContextReplay:
        """A served context exactly as it was served (its messages byte for byte, the read's
        parameters, the recalled memories with their text, the summary, tokens by part), by the
        `context_id` of `context()`'s answer. NotFoundError for an unknown or another team's id,
        or one older than the server keeps (MEMSITE_CONTEXT_RECORD_DAYS). Asked for right after
        the read, it waits up to `wait` seconds for the server to write it."""
        return replay_context(self._api, context_id, wait=wait)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class RemoteConversationMemory(SessionBound):
    """marsys's ConversationMemory over the REST API: same methods, arguments and return shapes.

    Without `session_id` a new session is created (its system prompt is `description`); with
    one, the client attaches to that existing session, and a non-empty `description` that
    differs from the stored prompt replaces it. URL and key come from the arguments or from
    MEMSITE_URL / MEMSITE_API_KEY.
    """

    def __init__(
        self,
        description: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        session_id: str | None = None,
        memory_type: str = "conversation_history",
        external_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if memory_type not in SUPPORTED_MEMORY_TYPES:
            raise ValueError(f"memory_type must be one of {SUPPORTED_MEMORY_TYPES}, got {memory_type!r}")
        canonical = None if session_id is None else _as_uuid(session_id)
        if session_id is not None and canonical is None:
            raise ValueError(f"session_id must be a UUID, got {session_id!r}")
        self._api = HttpApi(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, transport=transport
        )
        self._agent_name: str | None = None
        self._event_bus: EventSink | None = None
        self._event_session_id: str | None = None
        try:
            session = self._open_session(canonical, description, memory_type, external_id, metadata)
            self.session_id: str = session["id"]
            self.memory_type: str = session["memory_type"]
            changes = self._attach_changes(session, description) if canonical is not None else {}
            if changes:
                self.memory_type = self._patch_session(changes)["memory_type"]
        except BaseException:
            self._api.close()  # no connection pool left behind by a constructor that failed
            raise

    def _open_session(
        self,
        session_id: str | None,
        description: str | None,
        memory_type: str,
        external_id: str | None,
        metadata: dict[str, Any] | None,
    ) -> dict[str, Any]:
        if session_id is not None:
            return self._api.get(f"sessions/{session_id}/")
        body: dict[str, Any] = {"system_prompt": description or "", "memory_type": memory_type}
        if external_id is not None:
            body["external_id"] = external_id
        if metadata is not None:
            body["metadata"] = metadata
        body.update(self._session_settings())
        return self._write_session("POST", "sessions/", body)

    def _session_settings(self) -> dict[str, Any]:
        """Extra fields of a session this memory creates (the managed memory's config)."""
        return {}

    def _attach_changes(self, session: dict[str, Any], description: str | None) -> dict[str, Any]:
        """What attaching to an existing session changes on it: a new, non-empty description."""
        if description and description != session["system_prompt"]:
            return {"system_prompt": description}
        return {}

    def _write_session(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create or PATCH a session; a refused memory_config is a MemoryConfigError."""
        try:
            # A create carries an Idempotency-Key, so it is retried safely; a PATCH is not retried.
            key = new_idempotency_key() if method == "POST" else None
            return self._api.request(method, path, json_body=body, idempotency_key=key).json()
        except ApiError as exc:
            if exc.status_code == 400 and any(field.startswith("memory_config") for field in exc.fields):
                raise MemoryConfigError(
                    exc.detail, status_code=exc.status_code, error=exc.error, fields=exc.fields
                ) from exc
            raise

    # --- plumbing ------------------------------------------------------------------------

    def _session(self) -> dict[str, Any]:
        return self._api.get(self._path)

    def _patch_session(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._write_session("PATCH", self._path, body)

    def _session_exists(self) -> bool:
        try:
            self._session()
        except NotFoundError:
            return False
        return True

    def _write_message(self, method: str, path: str, body: Any, *, idempotent: bool) -> httpx.Response:
        """A message write; the server refusing the message itself (400/413) is a MessageError."""
        try:
            key = new_idempotency_key() if method == "POST" else None
            return self._api.request(method, path, json_body=body, idempotent=idempotent, idempotency_key=key)
        except ApiError as exc:
            if exc.status_code in (400, 413):
                raise MessageError(exc.detail, fields=exc.fields) from exc
            raise

    def _append(self, records: list[dict[str, Any]]) -> None:
        """POST messages that carry client-chosen ids, so a retried POST cannot store them twice."""
        for record in records:
            if _as_uuid(record.get("message_id")) is None:
                raise MessageError(
                    f"message_id must be a UUID for the memsite server, got {record.get('message_id')!r}",
                    message_id=record.get("message_id"),
                )
        for chunk in _chunks(records):
            body = chunk[0] if len(chunk) == 1 else {"messages": chunk}
            self._write_message("POST", self._path + "messages/", body, idempotent=True)

    def _rows(self, *, role: str | None = None, last: int | None = None) -> list[dict[str, Any]]:
        """Stored message records in seq order: the `last` N, or all of them page by page."""
        if last is not None:
            return self._api.get(self._path + "messages/", role=role, last=last)["results"]
        rows: list[dict[str, Any]] = []
        after = None
        while True:
            page = self._api.get(self._path + "messages/", role=role, after=after, limit=_PAGE)
            rows.extend(page["results"])
            after = page["next_after"]
            if after is None:
                return rows

    def _entries(self) -> list[dict[str, Any]]:
        """marsys's memory list in one request: the system prompt (no message_id), then every row."""
        return self._api.get(self._path + "export/")["messages"]

    def _message_path(self, message_id: str) -> str:
        return f"{self._path}messages/{message_id}/"

    # --- writes --------------------------------------------------------------------------

    def add(
        self,
        message: Message | None = None,
        *,
        role: str | None = None,
        content: str | dict[str, Any] | None = None,
        name: str | None = None,
        tool_calls: list[dict[str, Any] | ToolCallMsg] | None = None,
        agent_calls: list[dict[str, Any] | AgentCallMsg] | None = None,
        images: list[str] | None = None,
        tool_call_id: str | None = None,
        occurred_at: datetime | str | None = None,
    ) -> str:
        """Append a message (a Message, or one built from the keywords); return its message_id.

        `occurred_at` is when the message was said (an imported history's dates), a timezone-aware
        datetime or ISO 8601 text with an offset; the server refuses a naive one (MessageError).
        """
        if message is None:
            if role is None:
                raise MessageError("Either a Message object or role must be provided to add.")
            message = Message(
                role=role,
                content=content,
                name=name,
                # Dicts too: Message.__post_init__ converts them to ToolCallMsg/AgentCallMsg, as marsys does.
                tool_calls=cast("list[ToolCallMsg] | None", tool_calls),
                agent_calls=cast("list[AgentCallMsg] | None", agent_calls),
                images=images,
                tool_call_id=tool_call_id,
            )
        record = message.to_dict()
        if occurred_at is not None:
            record["occurred_at"] = occurred_at.isoformat() if isinstance(occurred_at, datetime) else occurred_at
        self._append([record])
        return message.message_id

    def update(
        self,
        message_id: str,
        *,
        role: str | None = None,
        content: str | dict[str, Any] | None = None,
        name: str | None = None,
        tool_calls: list[dict[str, Any] | ToolCallMsg] | None = None,
        agent_calls: list[dict[str, Any] | AgentCallMsg] | None = None,
        images: list[str] | None = None,
    ) -> None:
        """Change the given fields (None means "keep", as in marsys); other fields stay as stored.

        Unlike marsys, tool_call_id, structured_data and reasoning_details survive an update.
        """
        canonical = _as_uuid(message_id)
        not_found = MessageError(f"Message with ID '{message_id}' not found in memory.", message_id=message_id)
        if canonical is None:
            raise not_found
        body: dict[str, Any] = {}
        if role is not None:
            body["role"] = role
        if content is not None:
            body["content"] = content
        if name is not None:
            body["name"] = name
        if tool_calls is not None:
            body["tool_calls"] = calls_to_wire(convert_calls(tool_calls, ToolCallMsg, "tool_calls", message_id))
        if agent_calls is not None:
            body["agent_calls"] = calls_to_wire(convert_calls(agent_calls, AgentCallMsg, "agent_calls", message_id))
        if images is not None:
            body["images"] = [image_url(ref) for ref in check_images(images, message_id) or []]
        try:
            self._write_message("PATCH", self._message_path(canonical), body, idempotent=False)
        except NotFoundError:
            if self._session_exists():
                raise not_found from None
            raise

    def replace_memory(
        self,
        idx: int,
        message: Message | None = None,
        *,
        role: str | None = None,
        content: str | None = None,
        message_id: str | None = None,
        name: str | None = None,
        tool_calls: list[ToolCallMsg] | None = None,
        agent_calls: list[AgentCallMsg] | None = None,
        images: list[str] | None = None,
    ) -> None:
        """Replace the message at position `idx` (0 = the system prompt when there is one).

        The stored row keeps its server id: the server cannot rename a message, so a new
        `message_id` (given, or on `message`) is not applied.
        """
        entries = self._entries()
        if not 0 <= idx < len(entries):
            raise IndexError("Memory index out of range.")
        if message is None:
            if role is None:
                raise MessageError("Either a Message object or role must be provided to replace_memory.")
            message = Message(
                role=role,
                content=content,
                message_id=message_id or str(uuid.uuid4()),
                name=name,
                tool_calls=tool_calls,
                agent_calls=agent_calls,
                images=images,
            )
        target = entries[idx]
        if "message_id" not in target:
            self._replace_system_prompt(message)
            return
        wire = message.to_dict()
        body = {field: wire.get(field) for field in _REPLACED_FIELDS}
        try:
            self._write_message("PATCH", self._message_path(target["message_id"]), body, idempotent=False)
        except NotFoundError:
            if self._session_exists():
                raise MessageError(f"The message at index {idx} was removed meanwhile.") from None
            raise

    def _replace_system_prompt(self, message: Message) -> None:
        extras = (message.name, message.tool_calls, message.agent_calls, message.images, message.tool_call_id)
        if message.role != "system" or not isinstance(message.content, str) or any(extras):
            # The prompt is a string on the session; a row cannot be moved in front of seq 1.
            raise MessageError(
                "Index 0 is the session's system prompt: it can only be replaced by a system message "
                "with text content and no other fields."
            )
        self._patch_session({"system_prompt": message.content})

    def delete_memory(self, idx: int) -> None:
        """Delete the message at position `idx`; deleting index 0 clears the system prompt."""
        entries = self._entries()
        if not 0 <= idx < len(entries):
            raise IndexError("Memory index out of range.")
        target = entries[idx]
        if "message_id" not in target:
            self._patch_session({"system_prompt": ""})
            return
        try:
            self._api.request("DELETE", self._message_path(target["message_id"]))
        except NotFoundError:
            if not self._session_exists():
                raise  # else another agent deleted it first: it is gone either way

    def remove_by_id(self, message_id: str) -> bool:
        """Delete a message; False when no such message is in this session."""
        canonical = _as_uuid(message_id)
        if canonical is None:
            return False
        try:
            self._api.request("DELETE", self._message_path(canonical))
        except NotFoundError:
            if self._session_exists():
                return False
            raise
        return True

    def reset_memory(self) -> None:
        """Delete every message, keeping the system prompt (or a leading system message, as marsys)."""
        kept = self._kept_on_reset()
        self._reset_to([] if kept is None else [kept])

    def _kept_on_reset(self) -> dict[str, Any] | None:
        """The row a reset keeps: marsys keeps index 0 when it is a system message, which is a
        leading system row when the session has no prompt."""
        if self._session()["system_prompt"]:
            return None
        first = self._api.get(self._path + "messages/", limit=1)["results"]
        return first[0] if first and first[0]["role"] == "system" else None

    def _reset_to(self, rows: list[dict[str, Any]]) -> None:
        """Reset on the server, store `rows` again (same ids, every field), emit the reset event."""
        self._api.request("POST", self._path + "reset/")
        if rows:
            self._append([_stored_record(row) for row in rows])
        self._emit_reset_event()

    def keep_last(self, n: int) -> list[str]:
        """Keep the system prompt and the last `n` messages, delete the others; return the kept ids.

        The "reset, re-add the last N" recipe, done so the server accepts it: when the cut falls
        inside a tool turn it moves back to the assistant message that made the calls (so more
        than `n` may stay), and a tool result whose call was deleted is dropped. Kept messages
        keep their ids, order and every stored field (their seqs continue after the old ones).
        A leading system message is kept as reset_memory() keeps it. When nothing would go,
        nothing changes; otherwise the session is reset (a MemoryResetEvent, compaction
        summaries reverted) and the kept messages are stored again. Not atomic: what another
        agent appends between the read and the reset is deleted too.
        """
        if n < 0:
            raise ValueError(f"n must be 0 or more, got {n}")
        size = n + 1
        while True:
            whole = size > MAX_LAST
            rows = self._rows() if whole else self._rows(last=size)
            whole = whole or len(rows) < size
            start, orphans = tail_cut(rows, n)
            if whole or not orphans:
                break
            size *= 2  # a kept tool result answers a call older than the rows read
        if whole and start == 0 and not orphans:
            return [row["message_id"] for row in rows]
        kept = [row for index, row in enumerate(rows) if index >= start and index not in orphans]
        head = self._kept_on_reset()
        if head is not None and all(row["message_id"] != head["message_id"] for row in kept):
            kept.insert(0, head)
        self._reset_to(kept)
        return [row["message_id"] for row in kept]

    # --- events --------------------------------------------------------------------------

    def set_event_context(
        self, agent_name: str, event_bus: EventSink | None = None, session_id: str | None = None
    ) -> None:
        """Emit marsys's memory events to `event_bus` (anything with `emit_nowait(event)`).

        As in marsys, `agent_name` is always set, while `event_bus` and `session_id` (the
        coordination session, reported in CompactionEvents) are only replaced when given.
        reset_memory() emits a MemoryResetEvent once a bus and an agent name are set.
        """
        self._agent_name = agent_name
        if event_bus is not None:
            self._event_bus = event_bus
        if session_id is not None:
            self._event_session_id = session_id

    def _emit_reset_event(self) -> None:
        if self._event_bus is not None and self._agent_name:
            emit(self._event_bus, MemoryResetEvent(agent_name=self._agent_name))

    # --- reads ---------------------------------------------------------------------------

    def retrieve_all(self) -> list[dict[str, Any]]:
        """Every message, system prompt first, as LLM API dicts."""
        return [_llm_dict(entry) for entry in self._entries()]

    def get_messages(self) -> list[dict[str, Any]]:
        """Messages for the LLM: retrieve_all(), as marsys's ConversationMemory."""
        return self.retrieve_all()

    def retrieve_recent(self, n: int = 1) -> list[dict[str, Any]]:
        """The last n entries of retrieve_all() (the system prompt counts, as in marsys)."""
        if n <= 0:
            return []
        rows = self._rows(last=n) if n <= MAX_LAST else self._rows()
        entries = [_llm_dict(row) for row in rows]
        if len(rows) < n:
            prompt = self._session()["system_prompt"]
            if prompt:
                entries.insert(0, _system(prompt))
        return entries[-n:]

    def retrieve_by_id(self, message_id: str) -> dict[str, Any] | None:
        canonical = _as_uuid(message_id)
        if canonical is None:
            return None
        try:
            return _llm_dict(self._api.get(self._message_path(canonical)))
        except NotFoundError:
            if self._session_exists():
                return None
            raise

    def retrieve_by_role(self, role: str, n: int | None = None) -> list[dict[str, Any]]:
        """Entries with this role (the system prompt is a "system" entry), the last n when n is set."""
        if role not in ROLES:
            return []
        limited = isinstance(n, int) and 0 < n <= MAX_LAST
        entries = [_llm_dict(row) for row in self._rows(role=role, last=n if limited else None)]
        if role == "system":
            prompt = self._session()["system_prompt"]
            if prompt:
                entries.insert(0, _system(prompt))
        return entries[-n:] if n else entries

    def retrieve_relevant(self, query: str, n: int = 5) -> list[dict[str, Any]]:
        """This session's n messages most relevant to `query`, best first, as retrieve_recent's dicts.

        A message counts once however many of its pieces (or its text attachments) matched. The
        system prompt is not a message and is never among them. At most 50 hits are searched, so
        a few very long messages can leave fewer than n.
        """
        if n <= 0:
            return []
        ids = relevant_ids(
            self._api,
            query,
            n=n,
            kinds=("message", "attachment"),
            session=self.session_id,
            id_field="message_id",
        )
        relevant: list[dict[str, Any]] = []
        for message_id in ids:
            try:
                relevant.append(_llm_dict(self._api.get(self._message_path(message_id))))
            except NotFoundError:
                continue  # deleted since it was indexed
            if len(relevant) == n:
                break
        return relevant

    def context(
        self,
        last: int | None = None,
        max_tokens: int | None = None,
        *,
        recall: str | None = None,
        recall_k: int | None = None,
        recall_kinds: Sequence[str] | None = None,
    ) -> ServedMessages:
        """The server's LLM context: system prompt + the newest messages within `last`/`max_tokens`.

        A list of OpenAI messages whose `context_id` names this answer: `replay_context(id)`
        shows later exactly what it was.

        With `recall` (a question or topic), the server adds one "relevant memory" system
        message after the prompt: the `recall_k` (default 5, at most 20) team memories most
        relevant to it, from `recall_kinds` (default: every kind), inside `max_tokens`. A
        refused recall argument raises SearchQueryError.
        """
        kinds = (
            None
            if recall_kinds is None
            else ",".join([recall_kinds] if isinstance(recall_kinds, str) else recall_kinds)
        )
        try:
            served = self._api.get(
                self._path + "context/",
                last=last,
                max_tokens=max_tokens,
                recall=recall,
                recall_k=recall_k,
                recall_kinds=kinds,
            )
        except ApiError as exc:
            if exc.status_code == 400 and any(field.startswith("recall") for field in exc.fields):
                raise refused(exc) from exc
            raise
        return served_messages(served)

    # --- files ---------------------------------------------------------------------------

    def save_to_file(self, filepath: str, additional_state: dict[str, Any] | None = None) -> None:
        """Write the session's export document; `additional_state` is also stored on the session.

        Messages are the server's lossless records (ids, tool_call_id, agent_calls, images as
        data URLs ...), not marsys's LLM dicts, so load_from_file restores them exactly.
        """
        if additional_state:
            self._patch_session({"additional_state": additional_state})
        document = self._api.get(self._path + "export/")
        document.pop("additional_state", None)
        document["memory_type"] = self.memory_type
        document["timestamp"] = time.time()
        if additional_state:
            document["additional_state"] = additional_state
        path = Path(filepath)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w") as file:
            json.dump(document, file, indent=2)
        logger.info("Memory saved to %s", filepath)

    def load_from_file(self, filepath: str) -> dict[str, Any] | None:
        """Replace this session's memory with a save_to_file document (ours or marsys's).

        A leading system message becomes the session's system prompt (marsys appends it after
        the kept prompt instead, duplicating it). Returns the file's additional_state.
        """
        path = Path(filepath)
        if not path.exists():
            logger.warning("Memory file %s does not exist. Starting with empty memory.", filepath)
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise MemoryClientError(f"Failed to load memory from {filepath}: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("messages", []), list):
            raise MemoryClientError(f"Failed to load memory from {filepath}: not a save_to_file document")
        if data.get("memory_type") != self.memory_type:
            logger.warning(
                "Memory type mismatch: file has %r, memory is %r.", data.get("memory_type"), self.memory_type
            )
        messages = [m for m in data.get("messages", []) if isinstance(m, dict)]  # marsys skips the rest too
        patch: dict[str, Any] = {"additional_state": data.get("additional_state")}
        if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
            patch["system_prompt"] = messages.pop(0)["content"]
        # Validate everything before changing anything; fresh ids, since the file's may be
        # taken by the session it was saved from.
        records = []
        for entry in messages:
            message = Message.from_dict({k: v for k, v in entry.items() if k != "message_id"})
            extras = {k: entry[k] for k in ("send_from", "send_to", "meta", "occurred_at") if entry.get(k) is not None}
            records.append({**message.to_dict(), **extras})
        self._patch_session(patch)
        self.reset_memory()
        self._append(records)
        logger.info("Memory loaded from %s with %d messages", filepath, len(records))
        return data.get("additional_state")


ConversationMemory = RemoteConversationMemory
