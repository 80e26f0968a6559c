"""A Google ADK `BaseMemoryService` kept on a memsite server.

    from google.adk.runners import Runner
    from memory_client.adapters.google_adk import MemsiteMemoryService

    memory = MemsiteMemoryService()  # MEMSITE_URL / MEMSITE_API_KEY
    runner = Runner(agent=agent, app_name="travel", session_service=sessions, memory_service=memory)
    await memory.add_session_to_memory(session)  # after a conversation: what it said is remembered

How ADK's names map onto memsite:

- the team is the API key's: every app and user the service names lives in that team, and another
  team's key finds none of it;
- each (`app_name`, `user_id`) pair is one memsite session, its memory: external_id
  `adk-memory:<app_name>:<user_id>` (each part percent-encoded, so "a:b" + "c" and "a" + "b:c"
  stay apart), metadata `{"adk": {"app_name": ..., "user_id": ...}}`, created by the first write;
- each remembered event is one message of it: role `user` for content ADK's user wrote, else
  `assistant`; `name` = the event's author, `occurred_at` = its timestamp, content = its text, and
  `meta["adk"]` = the ADK session and event it came from plus the remembered content (a
  `types.Content` of its text parts).

`search_memory` is memsite's hybrid search (full text and vectors) narrowed on the server to that
memory session, so the memories of one app and user never reach another's. Each hit becomes a
`MemoryEntry`: the event's content, its author and its time (ISO 8601 with the offset); its `id` is
the memsite message id.

What is remembered: the text of an event (its non-thought text parts). Function calls and their
responses are left out: they are the agent's plumbing, and a `load_memory` response holds earlier
memories, which would come back as new ones. Each event's message id is derived from the memory
session, the ADK session and the event id, so adding a session again (ADK allows it, and callers
do it after every turn) stores only the events not stored yet. The server indexes messages in a
background job: a memory is found once its index job has run (seconds on a running worker).
`delete_memory` is left to ADK's default (NotImplementedError): with ids derived from events, a
deleted event's memory would come back the next time its session is added.

ADK's methods are async and the client's HTTP layer is not: the requests run in a worker thread
(`asyncio.to_thread`), so the event loop never blocks.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from memory_client.adapters._sessions import BATCH, NamedSession
from memory_client.errors import ApiError, ConflictError, NotFoundError
from memory_client.search import relevant_ids
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT, HttpApi, new_idempotency_key
from memory_client.vocabulary.messages import content_text

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session

EXTERNAL_ID_PREFIX = "adk-memory"
META_KEY = "adk"  # where a message's `meta` keeps what ADK knows of it
MAX_RESULTS = 10  # memories per search, as ADK's own in-memory service returns
QUERY_MAX_CHARS = 1000  # the search endpoint's longest query
_EXTERNAL_ID_MAX = 200  # a session's external_id, at most
_STORED_IDS_KEPT = 100_000  # message ids remembered as stored (~10 MB at most)
_REUSED = "message_id_reused"  # the error of a message id sent again with other content
# Message ids are uuid5 names under this namespace: the same event always gets the same id.
_MESSAGE_NAMESPACE = uuid.UUID("6f4d7c52-1d0e-4b8e-9a53-2f0c9e1b7a44")


def memory_external_id(app_name: str, user_id: str) -> str:
    """The external_id of the memsite session holding the memory of `user_id` in `app_name`."""
    if not app_name or not user_id:
        raise ValueError("ADK memory needs a non-empty app_name and user_id.")
    name = f"{EXTERNAL_ID_PREFIX}:{quote(app_name, safe='')}:{quote(user_id, safe='')}"
    if len(name) > _EXTERNAL_ID_MAX:
        raise ValueError(f"app_name and user_id make an external_id over {_EXTERNAL_ID_MAX} characters: {name!r}")
    return name


def remembered_content(content: types.Content | None) -> types.Content | None:
    """The part of an event's content worth remembering: its non-thought text, else None."""
    if content is None or not content.parts:
        return None
    parts = [
        types.Part(text=part.text) for part in content.parts if part.text and part.text.strip() and not part.thought
    ]
    return types.Content(role=content.role, parts=parts) if parts else None


def _text(content: types.Content) -> str:
    return "\n".join(part.text for part in content.parts or [] if part.text)


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def _moment(timestamp: str | None) -> datetime | None:
    """A MemoryEntry's timestamp as an aware datetime; None when absent or unreadable.

    ADK's own services write the local time without an offset (datetime.fromtimestamp(...)
    .isoformat()), which memsite refuses as ambiguous: such a time is read in the local zone.
    """
    if not timestamp:
        return None
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.astimezone()


def _message(
    *, message_id: str, content: types.Content, author: str | None, said_at: datetime | None, adk: dict[str, Any]
) -> dict[str, Any]:
    """One memory as a memsite message body."""
    body: dict[str, Any] = {
        "message_id": message_id,
        "role": "user" if content.role == "user" else "assistant",
        "content": _text(content),
        "meta": {META_KEY: {**adk, "content": content.model_dump(mode="json", exclude_none=True)}},
    }
    if author:
        body["name"] = author
    if said_at is not None:
        body["occurred_at"] = _iso(said_at)
    return body


def _entry(row: Mapping[str, Any]) -> MemoryEntry:
    """A stored message as ADK's MemoryEntry: its content as ADK wrote it (else its text), author and time."""
    meta = row.get("meta")
    kept = meta.get(META_KEY) if isinstance(meta, Mapping) else None
    kept = kept if isinstance(kept, Mapping) else {}
    if isinstance(kept.get("content"), Mapping):
        content = types.Content.model_validate(kept["content"])
    else:  # written by another client: its text, in ADK's roles
        role = "user" if row.get("role") == "user" else "model"
        content = types.Content(role=role, parts=[types.Part(text=content_text(row.get("content")))])
    said_at = row.get("occurred_at") or row.get("created_at")
    custom = kept.get("custom_metadata")
    return MemoryEntry(
        id=str(row["message_id"]),
        content=content,
        author=row.get("name") or ("user" if row.get("role") == "user" else None),
        timestamp=_iso(datetime.fromisoformat(said_at)) if said_at else None,
        custom_metadata=dict(custom) if isinstance(custom, Mapping) else {},
    )


class MemsiteMemoryService(BaseMemoryService):
    """ADK's memory service over memsite: one memsite session per app and user (see the module docstring).

    `base_url`/`api_key` default to MEMSITE_URL / MEMSITE_API_KEY; a write key stores, a read key
    may only search.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._api = HttpApi(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, transport=transport
        )
        self._memories: dict[tuple[str, str], NamedSession] = {}
        # The newest message ids this service stored or found stored (oldest first), so adding a
        # session again sends only its new events. Bounded: an id forgotten, or stored by another
        # process, costs one request the server answers as a replay (see _store).
        self._stored: dict[str, None] = {}
        self._lock = threading.Lock()  # ADK calls in from several tasks, each on a worker thread

    def close(self) -> None:
        self._api.close()

    def memory_session(self, app_name: str, user_id: str) -> NamedSession:
        """The memsite session holding this app's memory of this user (created by its first write)."""
        key = (app_name, user_id)
        with self._lock:
            if key not in self._memories:
                metadata = {META_KEY: {"app_name": app_name, "user_id": user_id}}
                self._memories[key] = NamedSession(
                    self._api, memory_external_id(app_name, user_id), settings={"metadata": metadata}
                )
            return self._memories[key]

    # --- ADK's BaseMemoryService ------------------------------------------------------------------

    async def add_session_to_memory(self, session: Session) -> None:
        """Remember what the session's events said; events remembered before are not stored twice."""
        await self.add_events_to_memory(
            app_name=session.app_name, user_id=session.user_id, events=session.events, session_id=session.id
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Remember what these events said (a delta: the rest of the session is left as it is)."""
        events = list(events)
        custom = dict(custom_metadata or {})
        await asyncio.to_thread(self._add_events, app_name, user_id, events, session_id or "", custom)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Store explicit memories: each entry's text, author and timestamp; an entry's `id` makes it stored once."""
        entries = list(memories)
        custom = dict(custom_metadata or {})
        await asyncio.to_thread(self._add_memories, app_name, user_id, entries, custom)

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """The app's memories of this user most relevant to `query`, best first (at most 10)."""
        memories = await asyncio.to_thread(self._search, app_name, user_id, query)
        return SearchMemoryResponse(memories=memories)

    # --- the work, in a worker thread -------------------------------------------------------------

    def _message_id(self, memory_session_id: str, *names: str) -> str:
        # The memory session's id (unique across teams) in the name: message ids are global.
        return str(uuid.uuid5(_MESSAGE_NAMESPACE, "\x00".join((memory_session_id, *names))))

    def _add_events(
        self, app_name: str, user_id: str, events: Iterable[Event], session_id: str, custom: dict[str, Any]
    ) -> None:
        said = [(event, content) for event in events if (content := remembered_content(event.content)) is not None]
        if not said:
            return
        memory = self.memory_session(app_name, user_id)
        memory_id = memory.id(create=True)
        messages = []
        for event, content in said:
            event_id = event.id or str(uuid.uuid4())
            adk: dict[str, Any] = {"session_id": session_id, "event_id": event_id, "invocation_id": event.invocation_id}
            if custom:
                adk["custom_metadata"] = custom
            messages.append(
                _message(
                    message_id=self._message_id(memory_id, "event", session_id, event_id),
                    content=content,
                    author=event.author,
                    said_at=datetime.fromtimestamp(event.timestamp, tz=UTC),
                    adk=adk,
                )
            )
        self._store(memory, memory_id, messages)

    def _add_memories(
        self, app_name: str, user_id: str, entries: Iterable[MemoryEntry], custom: dict[str, Any]
    ) -> None:
        remembered: list[tuple[MemoryEntry, types.Content]] = []
        for entry in entries:
            content = remembered_content(entry.content)
            if content is None:  # refused before anything is stored
                raise ValueError(f"A memory needs text: memsite finds memories by their words ({entry!r}).")
            remembered.append((entry, content))
        if not remembered:
            return
        memory = self.memory_session(app_name, user_id)
        memory_id = memory.id(create=True)
        messages = []
        for entry, content in remembered:
            metadata = {**custom, **entry.custom_metadata}
            adk: dict[str, Any] = {"memory_id": entry.id} if entry.id else {}
            if metadata:
                adk["custom_metadata"] = metadata
            messages.append(
                _message(
                    message_id=self._message_id(memory_id, "memory", entry.id) if entry.id else str(uuid.uuid4()),
                    content=content,
                    author=entry.author,
                    said_at=_moment(entry.timestamp),
                    adk=adk,
                )
            )
        self._store(memory, memory_id, messages)

    def _store(self, memory: NamedSession, memory_id: str, messages: list[dict[str, Any]]) -> None:
        """Append the messages not stored yet, in order.

        A batch whose messages are all stored already is answered as a replay; one that mixes
        stored and new messages (another process remembered part of the session) is refused, and
        then each message goes alone: stored, answered as the replay it is, or kept as first stored.
        """
        with self._lock:
            new = [message for message in messages if message["message_id"] not in self._stored]
        path = memory.path(memory_id) + "messages/"
        for start in range(0, len(new), BATCH):
            chunk = new[start : start + BATCH]
            try:
                self._append(path, chunk[0] if len(chunk) == 1 else {"messages": chunk})
            except ApiError as exc:
                if not (isinstance(exc, ConflictError) or exc.error == _REUSED):
                    raise
                for message in chunk:
                    self._append_alone(path, message)
            self._note_stored(message["message_id"] for message in chunk)

    def _note_stored(self, message_ids: Iterable[str]) -> None:
        with self._lock:
            self._stored.update(dict.fromkeys(message_ids))
            while len(self._stored) > _STORED_IDS_KEPT:
                del self._stored[next(iter(self._stored))]  # the oldest

    def _append(self, path: str, body: dict[str, Any]) -> None:
        self._api.request("POST", path, json_body=body, idempotency_key=new_idempotency_key())

    def _append_alone(self, path: str, message: dict[str, Any]) -> None:
        try:
            self._append(path, message)
        except ApiError as exc:
            # The event was remembered before with other content (e.g. with other custom
            # metadata): the memory of what was said stays as it was first stored.
            if exc.error != _REUSED:
                raise

    def _search(self, app_name: str, user_id: str, query: str) -> list[MemoryEntry]:
        query = query.strip()[:QUERY_MAX_CHARS]
        if not query:
            return []  # the endpoint refuses an empty query; nothing matches it anyway
        memory_id = self.memory_session(app_name, user_id).id(create=False)
        if memory_id is None:
            return []  # nothing remembered yet for this app and user
        ids = relevant_ids(self._api, query, n=MAX_RESULTS, kinds=["message"], session=memory_id, id_field="message_id")
        entries: list[MemoryEntry] = []
        for message_id in ids:
            try:
                row = self._api.get(f"sessions/{memory_id}/messages/{message_id}/")
            except NotFoundError:
                continue  # deleted since it was indexed
            entries.append(_entry(row))
            if len(entries) == MAX_RESULTS:
                break
        return entries
