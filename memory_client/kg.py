"""marsys 0.2.1's KGMemory, kept on a memsite server: durable facts, extracted by its workers.

marsys keeps a list of (role, subject, predicate, object, timestamp) entries and extracts
facts in a fire-and-forget asyncio task. Here the session (memory_type "kg") holds them:

- `add()` appends the raw content as a message. The server schedules an extraction run for
  it (a worker asks the LLM, or the offline extractive backend), and the facts appear when
  the run is done; `wait_for_facts()` waits for that.
- marsys also keeps the raw content as an entry ("raw_content contains <text>"), and so do
  the reads here: each message of the session is one raw entry (`raw_entries=False` leaves
  them out). Every other entry is a live fact of the session (`GET /api/v1/facts/`).
- Reads return marsys's `_fact_to_dict` shape: {"role": r, "content": "Fact (r): s p o."}.

Facts are never deleted: removing one invalidates it (kept for audit and `as_of` queries),
which the server allows to admin-role keys only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple, cast

import httpx

from memory_client.errors import (
    ApiError,
    AuthenticationError,
    FactExtractionError,
    FactExtractionTimeout,
    MessageError,
    NotFoundError,
)
from memory_client.events import EventSink, MemoryResetEvent, emit
from memory_client.memory import MAX_LAST, ROLES, SessionBound, _as_uuid
from memory_client.messages import AgentCallMsg, Message, ToolCallMsg
from memory_client.search import relevant_ids
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT, HttpApi, new_idempotency_key

logger = logging.getLogger(__name__)

KG = "kg"
DEFAULT_EXTRACTION_TIMEOUT = 120.0  # seconds extract_and_update_from_text / wait_for_facts wait
ACTIVE = ("pending", "running")
FAILED = ("failed", "quarantined", "discarded")
TERMINAL = ("done", *FAILED)
# marsys stores `description` as this fact, and raw content as "raw_content contains <text>".
DESCRIPTION_FACT = ("system", "system_configuration", "has_initial_description")
RAW_SUBJECT, RAW_PREDICATE = "raw_content", "contains"
_PAGE = 500
_RUN_PAGE = 50
_FIRST_POLL = 0.05
_MAX_POLL = 1.0


class _Entry(NamedTuple):
    """One entry of marsys's kg list: a live fact, or a message standing for its raw content."""

    id: str
    is_fact: bool
    role: str
    subject: str
    predicate: str
    object: str
    at: datetime


def fact_to_dict(entry: Mapping[str, Any]) -> dict[str, Any]:
    """marsys's KGMemory._fact_to_dict: a fact as the message dict an LLM receives."""
    role = entry["role"]
    return {
        "role": role,
        "content": f"Fact ({role}): {entry['subject']} {entry['predicate']} {entry['object']}.",
    }


def _fact_entry(fact: Mapping[str, Any]) -> _Entry:
    return _Entry(
        id=str(fact["id"]),
        is_fact=True,
        role=fact["role"],
        subject=fact["subject"],
        predicate=fact["predicate"],
        object=fact["object"],
        # Its latest sighting: a fact stated again is recent again (created_at keeps the first).
        at=datetime.fromisoformat(fact.get("last_seen_at") or fact["created_at"]),
    )


def _raw_entry(message: Mapping[str, Any]) -> _Entry:
    content = message.get("content")
    return _Entry(
        id=str(message["message_id"]),
        is_fact=False,
        role=message["role"],
        subject=RAW_SUBJECT,
        predicate=RAW_PREDICATE,
        object=str(content) if content else "empty",  # marsys's str(content) or "empty"
        at=datetime.fromisoformat(message["created_at"]),
    )


def _as_dict(entry: _Entry) -> dict[str, Any]:
    return fact_to_dict(entry._asdict())


def _oldest_first(entries: list[_Entry]) -> list[_Entry]:
    return sorted(entries, key=lambda entry: entry.at)


def _newest_first(entries: list[_Entry]) -> list[_Entry]:
    return sorted(entries, key=lambda entry: entry.at, reverse=True)


class RemoteKGMemory(SessionBound):
    """marsys's KGMemory over the REST API (see the module docstring).

    Without `session_id` a new "kg" session is created; `description` becomes its system
    prompt and, as in marsys, the fact (system_configuration, has_initial_description,
    description). With `session_id` the client attaches to that session (made a "kg" one if
    it was not). `model` is accepted for marsys call sites and unused: the server's LLM
    backend extracts. `extraction_timeout` bounds extract_and_update_from_text() and
    wait_for_facts() unless they are given their own `timeout`.
    """

    def __init__(
        self,
        model: Any = None,
        description: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        session_id: str | None = None,
        external_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
        extraction_timeout: float = DEFAULT_EXTRACTION_TIMEOUT,
        raw_entries: bool = True,
    ) -> None:
        canonical = None if session_id is None else _as_uuid(session_id)
        if session_id is not None and canonical is None:
            raise ValueError(f"session_id must be a UUID, got {session_id!r}")
        self.memory_type = KG
        self.extraction_timeout = extraction_timeout
        self.raw_entries = raw_entries
        self._agent_name: str | None = None
        self._event_bus: EventSink | None = None
        self._api = HttpApi(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, transport=transport
        )
        try:
            if canonical is None:
                body: dict[str, Any] = {"system_prompt": description or "", "memory_type": KG}
                if external_id is not None:
                    body["external_id"] = external_id
                if metadata is not None:
                    body["metadata"] = metadata
                self.session_id: str = self._api.request(
                    "POST", "sessions/", json_body=body, idempotency_key=new_idempotency_key()
                ).json()["id"]
                if description:
                    self.add_fact(*DESCRIPTION_FACT, description)
            else:
                session = self._api.get(f"sessions/{canonical}/")
                self.session_id = session["id"]
                if session["memory_type"] != KG:
                    self._api.request("PATCH", self._path, json_body={"memory_type": KG})
        except BaseException:
            self._api.close()  # no connection pool left behind by a constructor that failed
            raise

    # --- plumbing ------------------------------------------------------------------------

    def _pages(self, path: str, params: dict[str, Any], limit: int | None = None) -> Iterator[dict[str, Any]]:
        """Rows of a list endpoint in its order, page after page, until exhausted or `limit` rows.

        Takes every paging style of this API: a bare list, limit/offset pages with a `next`
        URL, and cursor pages with `next_after`.
        """
        query = {key: value for key, value in params.items() if value is not None}
        query["limit"] = min(limit, _PAGE) if limit is not None else _PAGE
        url: str | None = path
        seen = 0
        while url is not None:
            page = self._api.get(url, **query)
            rows = page if isinstance(page, list) else page["results"]
            for row in rows:
                yield row
                seen += 1
                if limit is not None and seen >= limit:
                    return
            if isinstance(page, list) or not rows:
                return
            if page.get("next"):
                # The next URL carries the whole query; httpx would replace it with `params`.
                following = httpx.URL(page["next"])
                url, query = str(following.copy_with(query=None)), dict(following.params)
            elif page.get("next_after") is not None:
                query["after"] = page["next_after"]
            else:
                return

    def _facts(self, *, role: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The session's live facts as the API shows them, most recently seen first."""
        query = {"session": self.session_id, "role": role, "order": "last_seen"}
        return list(self._pages("facts/", query, limit))

    def _messages(self, *, role: str | None = None, last: int | None = None) -> list[dict[str, Any]]:
        """The session's messages in seq order: the `last` N, or all of them."""
        if role is not None and role not in ROLES:
            return []  # the server has no message with another role
        if last is not None and last <= MAX_LAST:
            return self._api.get(self._path + "messages/", role=role, last=last)["results"]
        rows = list(self._pages(self._path + "messages/", {"role": role}))
        return rows if last is None else rows[-last:]

    def _entries(self, *, role: str | None = None, newest: int | None = None) -> list[_Entry]:
        """Facts and raw entries, oldest first; only the `newest` N when N is given."""
        entries = [_fact_entry(fact) for fact in self._facts(role=role, limit=newest)]
        if self.raw_entries:
            entries += [_raw_entry(message) for message in self._messages(role=role, last=newest)]
        ordered = _oldest_first(entries)
        return ordered if newest is None else ordered[-newest:]

    def _fact(self, fact_id: str) -> dict[str, Any] | None:
        """A live fact of this session, or None."""
        try:
            fact = self._api.get(f"facts/{fact_id}/")
        except NotFoundError:
            return None
        if fact.get("session") != self.session_id or fact.get("invalidated_at"):
            return None
        return fact

    def _message(self, message_id: str) -> dict[str, Any] | None:
        try:
            return self._api.get(f"{self._path}messages/{message_id}/")
        except NotFoundError:
            return None

    def _invalidate(self, fact_id: str) -> None:
        """DELETE a fact: the server invalidates it (admin-role keys only)."""
        try:
            self._api.request("DELETE", f"facts/{fact_id}/")
        except NotFoundError:
            pass  # invalidated by someone else meanwhile: gone either way
        except AuthenticationError as exc:
            if exc.status_code != 403:
                raise
            raise AuthenticationError(
                "Removing facts from KG memory invalidates them, which needs an admin-role API key "
                f"(the server answered: {exc.detail})",
                status_code=exc.status_code,
                error=exc.error,
                fields=exc.fields,
            ) from exc

    def _remove(self, entry: _Entry) -> None:
        if entry.is_fact:
            self._invalidate(entry.id)
            return
        try:
            self._api.request("DELETE", f"{self._path}messages/{entry.id}/")
        except NotFoundError:
            pass

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
    ) -> str:
        """Store the raw content as a message of the session; the server extracts its facts.

        Returns the message id (the raw entry's id). Extraction is the server's job: a worker
        runs it soon after, durably; wait_for_facts() waits for it.
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
        if _as_uuid(message.message_id) is None:
            raise MessageError(
                f"message_id must be a UUID for the memsite server, got {message.message_id!r}",
                message_id=message.message_id,
            )
        try:
            # A client-chosen message_id makes the append safe to retry.
            self._api.request(
                "POST", self._path + "messages/", json_body=message.to_dict(), idempotency_key=new_idempotency_key()
            )
        except ApiError as exc:
            if exc.status_code in (400, 413):
                raise MessageError(exc.detail, fields=exc.fields) from exc
            raise
        return message.message_id

    def add_fact(self, role: str, subject: str, predicate: str, obj: str, *, confidence: float | None = None) -> str:
        """Store a fact (subject, predicate, object) of this session; return its id.

        The same live fact is stored once: adding it again counts it (times_seen) and returns
        the same id. A 400 (empty or too long a field ...) is a MessageError naming the field.
        """
        body: dict[str, Any] = {
            "session": self.session_id,
            "role": role,
            "subject": subject,
            "predicate": predicate,
            "object": obj,
        }
        if confidence is not None:
            body["confidence"] = confidence
        try:
            # Retried like a message append: the server keeps one live copy of a fact, so a
            # repeat can at worst count it once more in times_seen, never store it twice.
            response = self._api.request("POST", "facts/", json_body=body, idempotent=True)
        except ApiError as exc:
            if exc.status_code == 400:
                raise MessageError(exc.detail, fields=exc.fields) from exc
            raise
        return str(response.json()["id"])

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
        """Update an entry, as marsys does: a fact takes role and a {subject, predicate, object} dict.

        Editing a fact needs an admin-role key. A raw entry (message) takes role and text
        content. Other arguments are ignored, as in marsys.
        """
        canonical = _as_uuid(message_id)
        not_found = MessageError(f"Fact with message_id '{message_id}' not found in KG.", message_id=message_id)
        if canonical is None:
            raise not_found
        if self._fact(canonical) is not None:
            body: dict[str, Any] = {} if role is None else {"role": role}
            if isinstance(content, dict):
                body.update({key: content[key] for key in ("subject", "predicate", "object") if key in content})
            elif content is not None:
                logger.warning("KGMemory.update: content should be a dict with subject/predicate/object")
            if body:
                self._api.request("PATCH", f"facts/{canonical}/", json_body=body)
            return
        if self.raw_entries and self._message(canonical) is not None:
            body = {} if role is None else {"role": role}
            if content is not None:
                body["content"] = content
            if body:
                self._api.request("PATCH", f"{self._path}messages/{canonical}/", json_body=body)
            return
        raise not_found

    def delete_memory(self, idx: int) -> None:
        """Remove the entry at `idx` of retrieve_all()'s order (a fact is invalidated)."""
        entries = self._entries()
        if not 0 <= idx < len(entries):
            raise IndexError("KG index out of range.")
        self._remove(entries[idx])

    def remove_by_id(self, message_id: str) -> bool:
        """Remove a fact (invalidate it) or a raw entry by id; False when this memory has none."""
        canonical = _as_uuid(message_id)
        if canonical is None:
            return False
        if self._fact(canonical) is not None:
            self._invalidate(canonical)
            return True
        if self.raw_entries and self._message(canonical) is not None:
            self._remove(_Entry(canonical, False, "", "", "", "", datetime.min))
            return True
        return False

    def reset_memory(self) -> None:
        """Clear the memory as marsys does (every entry, the description fact too).

        The session's live facts are invalidated (kept for audit; needs an admin-role key),
        then its messages are deleted. The system prompt stays on the session.
        """
        for fact in self._facts():
            self._invalidate(str(fact["id"]))
        self._api.request("POST", self._path + "reset/")
        if self._event_bus is not None and self._agent_name:
            emit(self._event_bus, MemoryResetEvent(agent_name=self._agent_name))

    def set_event_context(
        self, agent_name: str, event_bus: EventSink | None = None, session_id: str | None = None
    ) -> None:
        """reset_memory() emits MemoryResetEvent(agent_name) to `event_bus`, as in marsys."""
        self._agent_name = agent_name
        if event_bus is not None:
            self._event_bus = event_bus

    # --- extraction ----------------------------------------------------------------------

    def _run(self, run_id: str) -> dict[str, Any]:
        return self._api.get(f"fact-extractions/{run_id}/")

    def _check(self, run: dict[str, Any]) -> None:
        if run["status"] in FAILED:
            raise FactExtractionError(
                f"Fact extraction {run['id']} of session {self.session_id} {run['status']}: "
                f"{run.get('error') or 'no reason given'}",
                run=run,
            )

    def _run_facts(self, run: dict[str, Any]) -> list[dict[str, str]]:
        """The facts `run` added, as marsys's raw triples, oldest first.

        Facts the run found already stored only count in its `facts_seen`: they keep the
        run that first added them.
        """
        started = datetime.fromisoformat(run["created_at"])
        added = []
        for fact in self._pages("facts/", {"session": self.session_id}):
            if datetime.fromisoformat(fact["created_at"]) < started:
                break  # newest first: nothing older can come from this run
            if fact.get("extraction_run") == run["id"]:
                added.append({"subject": fact["subject"], "predicate": fact["predicate"], "object": fact["object"]})
        return added[::-1]

    async def extract_and_update_from_text(
        self, input_text: str, role: str = "user", *, timeout: float | None = None
    ) -> list[dict[str, str]]:
        """Extract facts from `input_text` on the server, wait for the run, return what it added.

        The facts are stored with `role` as their source role. Raises FactExtractionError if
        the run failed, was quarantined (its raw output is kept for staff to fix) or was
        discarded, and FactExtractionTimeout after `timeout` seconds (default
        extraction_timeout); marsys logs its failures and returns [] instead.
        """
        if not input_text.strip():
            return []  # nothing to extract (the server refuses a blank text)
        # Not retried once sent: a second run would ask the LLM again for the same text.
        run = self._api.request(
            "POST", self._path + "extract-facts/", json_body={"text": input_text, "role": role}, expect=(202,)
        ).json()
        deadline = time.monotonic() + (self.extraction_timeout if timeout is None else timeout)
        delay = _FIRST_POLL
        while run["status"] not in TERMINAL:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FactExtractionTimeout(
                    f"Fact extraction {run['id']} still {run['status']} after the timeout", run=run
                )
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, _MAX_POLL)
            run = self._run(run["id"])
        self._check(run)
        return self._run_facts(run)

    def wait_for_facts(self, timeout: float | None = None) -> list[dict[str, Any]]:
        """Wait until every message of the session went through extraction; then retrieve_all().

        Done when no run is pending or running and a finished run covers the session's last
        message. Raises FactExtractionError if that run failed, was quarantined or discarded,
        and FactExtractionTimeout after `timeout` seconds (default extraction_timeout). Blocks
        the calling thread while it polls.
        """
        deadline = time.monotonic() + (self.extraction_timeout if timeout is None else timeout)
        target = self._api.get(self._path)["last_seq"] or 0
        delay = _FIRST_POLL
        while True:
            runs = list(self._pages("fact-extractions/", {"session": self.session_id}, limit=_RUN_PAGE))
            covering = max((run for run in runs if _covers(run, target)), key=_created, default=None)
            if target == 0 or (covering is not None and not any(run["status"] in ACTIVE for run in runs)):
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                active = next((run for run in runs if run["status"] in ACTIVE), covering)
                raise FactExtractionTimeout(
                    f"Facts of session {self.session_id} up to message {target} not extracted after the timeout",
                    run=active,
                )
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, _MAX_POLL)
        if covering is not None:
            self._check(covering)
        return self.retrieve_all()

    # --- reads ---------------------------------------------------------------------------

    def retrieve_all(self) -> list[dict[str, Any]]:
        """Every entry, oldest first, as marsys's fact dicts."""
        return [_as_dict(entry) for entry in self._entries()]

    def get_messages(self) -> list[dict[str, Any]]:
        """retrieve_all(), as marsys's BaseMemory."""
        return self.retrieve_all()

    def retrieve_recent(self, n: int = 1) -> list[dict[str, Any]]:
        """The n most recent entries, NEWEST FIRST (marsys's KGMemory order)."""
        if n <= 0:
            return []
        return [_as_dict(entry) for entry in _newest_first(self._entries(newest=n))]

    def retrieve_by_role(self, role: str, n: int | None = None) -> list[dict[str, Any]]:
        """Entries whose source role is `role`, newest first; the n newest when n > 0."""
        newest = n if n is not None and n > 0 else None
        return [_as_dict(entry) for entry in _newest_first(self._entries(role=role, newest=newest))]

    def retrieve_by_id(self, message_id: str) -> dict[str, Any] | None:
        """A fact, or the raw entry of a message added here, by id; None if this memory has none."""
        canonical = _as_uuid(message_id)
        if canonical is None:
            return None
        fact = self._fact(canonical)
        if fact is not None:
            return fact_to_dict(fact)
        if self.raw_entries:
            message = self._message(canonical)
            if message is not None:
                return _as_dict(_raw_entry(message))
        return None

    def retrieve_relevant(self, query: str, n: int = 5) -> list[dict[str, Any]]:
        """This session's n live facts most relevant to `query`, best first, as fact dicts.

        Only facts: raw entries (the messages facts are extracted from) are left out, so one
        piece of knowledge does not take two places. At most 50 come back.
        """
        if n <= 0:
            return []
        ids = relevant_ids(self._api, query, n=n, kinds=("fact",), session=self.session_id, id_field="fact_id")
        relevant: list[dict[str, Any]] = []
        for fact_id in ids:
            fact = self._fact(fact_id)  # None when invalidated since it was indexed
            if fact is not None:
                relevant.append(fact_to_dict(fact))
            if len(relevant) == n:
                break
        return relevant

    def facts(self, **filters: Any) -> list[dict[str, Any]]:
        """The session's facts as the API shows them (provenance, confidence, validity ...).

        `filters` are the API's: subject, predicate, object, role, q, as_of,
        include_invalidated. Newest first.
        """
        return list(self._pages("facts/", {**filters, "session": self.session_id}))

    # --- files ---------------------------------------------------------------------------

    def save_to_file(self, filepath: str, additional_state: dict[str, Any] | None = None) -> None:
        """marsys's MemoryManager.save_to_file: retrieve_all() and additional_state as JSON."""
        document: dict[str, Any] = {"memory_type": KG, "messages": self.retrieve_all(), "timestamp": time.time()}
        if additional_state:
            document["additional_state"] = additional_state
        path = Path(filepath)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2))


def _created(run: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(run["created_at"])


def _covers(run: dict[str, Any], seq: int) -> bool:
    """Did this finished message run take in message `seq`?"""
    return run["status"] in TERMINAL and run.get("to_seq") is not None and run["to_seq"] >= seq


KGMemory = RemoteKGMemory
