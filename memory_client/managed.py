"""marsys 0.2.1's ManagedConversationMemory, with compaction done by the memsite server.

marsys compacts in the agent's process: `compact_if_needed()` summarises and rewrites the
message list before `get_messages()`. Here a Celery worker on the server compacts, and the
raw history is never rewritten:

- `get_messages()` / `retrieve_all()` return the server's active context: system prompt,
  original instruction, the latest summary and the messages after it (GET .../context/).
- `get_raw_messages()` returns every stored message, compacted or not.
- `compact_if_needed()` queues a run when the session is over its threshold and returns
  without waiting (the server already packs an over-threshold context into its target
  while the run is queued); `wait=True` waits like marsys does.
- `compact_for_payload_error()` queues a payload-too-large run and waits for its outcome.

Both compaction methods are `async def`, as in marsys, so marsys's Agent awaits them
unchanged. Their HTTP calls are short blocking requests like every other method's; waiting
for a run sleeps with `asyncio.sleep`, so the event loop keeps running meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import httpx

from memory_client.config import ManagedMemoryConfig
from memory_client.errors import ConflictError, MemoryClientError
from memory_client.events import EventSink, compaction_event_from, emit
from memory_client.memory import MAX_LAST, RemoteConversationMemory
from memory_client.messages import Message
from memory_client.replay import ServedMessages, served_messages
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT

logger = logging.getLogger(__name__)

MANAGED = "managed_conversation"
DEFAULT_COMPACTION_TIMEOUT = 120.0  # seconds compact_for_payload_error waits for the worker
ACTIVE = ("pending", "running")
_TERMINAL_EVENTS = {"compaction_completed": "done", "compaction_failed": "failed"}
_FIRST_POLL = 0.05
_MAX_POLL = 1.0
_EVENT_PAGE = 500  # the events endpoint's largest page


def _config_json(config: ManagedMemoryConfig | Mapping[str, Any]) -> dict[str, Any]:
    return config.to_dict() if isinstance(config, ManagedMemoryConfig) else dict(config)


def _later(first: str, second: str) -> bool:
    """Is server timestamp `first` later than `second`?"""
    return datetime.fromisoformat(first) > datetime.fromisoformat(second)


def _last_compaction(run: dict[str, Any] | None) -> dict[str, Any] | None:
    """A done run in the shape of marsys's metadata["last_compaction"] (plus the run's id and range)."""
    if run is None:
        return None
    finished = run.get("finished_at")
    return {
        "run_id": run["id"],
        "timestamp": datetime.fromisoformat(finished).timestamp() if finished else None,
        "trigger": run["trigger"],
        "stages_run": run["stages_run"],
        "pre_compaction_tokens": run["pre_tokens"],
        "pre_compaction_messages": run["pre_messages"],
        "post_compaction_tokens": run["post_tokens"],
        "post_compaction_messages": run["post_messages"],
        "pre_payload_bytes": run["pre_bytes"],
        "post_payload_bytes": run["post_bytes"],
        "covered_to_seq": run["covered_to_seq"],
        "backend": run["backend"],
        "model": run["model"],
    }


class RemoteManagedConversationMemory(RemoteConversationMemory):
    """marsys's ManagedConversationMemory over the REST API (see the module docstring).

    `config` is a ManagedMemoryConfig (sent in full) or a partial dict (the server fills the
    rest from the team's defaults); None sends nothing, so team defaults apply. The server
    validates it: a refused setting raises MemoryConfigError naming its path. Attaching to
    an existing session (`session_id=`) with a config merges it into the session's, and makes
    the session a managed one if it was not. marsys's strategy arguments are accepted and
    ignored: the server's processors do that work.
    """

    def __init__(
        self,
        config: ManagedMemoryConfig | Mapping[str, Any] | None = None,
        trigger_strategy: Any = None,
        process_strategy: Any = None,
        retrieval_strategy: Any = None,
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
        compaction_timeout: float = DEFAULT_COMPACTION_TIMEOUT,
    ) -> None:
        if config is not None and not isinstance(config, (ManagedMemoryConfig, Mapping)):
            raise TypeError(f"config must be a ManagedMemoryConfig or a dict, got {type(config).__name__}")
        for name, strategy in (
            ("trigger_strategy", trigger_strategy),
            ("process_strategy", process_strategy),
            ("retrieval_strategy", retrieval_strategy),
        ):
            if strategy is not None:
                logger.warning("%s is ignored: the memsite server decides when and how to compact.", name)
        self._requested_config = config
        self._token_counter = config.token_counter if isinstance(config, ManagedMemoryConfig) else None
        self.compaction_timeout = compaction_timeout
        # Id of the last server event seen; None until known (a new session has none yet).
        self._event_cursor: int | None = None if session_id is not None else 0
        super().__init__(
            description,
            base_url=base_url,
            api_key=api_key,
            session_id=session_id,
            memory_type=MANAGED,
            external_id=external_id,
            metadata=metadata,
            timeout=timeout,
            max_retries=max_retries,
            transport=transport,
        )

    def _session_settings(self) -> dict[str, Any]:
        if self._requested_config is None:
            return {}
        return {"memory_config": _config_json(self._requested_config)}

    def _attach_changes(self, session: dict[str, Any], description: str | None) -> dict[str, Any]:
        changes = super()._attach_changes(session, description)
        changes.update(self._session_settings())
        if session["memory_type"] != MANAGED:
            changes["memory_type"] = MANAGED
        return changes

    @property
    def config(self) -> ManagedMemoryConfig:
        """The session's effective config as the server holds it now (with this client's token_counter)."""
        config = ManagedMemoryConfig.from_dict(self._session()["memory_config"] or {})
        config.token_counter = self._token_counter
        return config

    # --- reads -----------------------------------------------------------------------------

    def get_messages(self) -> ServedMessages:
        """The active context for the LLM, OpenAI format: prompt, instruction, summary, newer messages.

        `last` is sent explicitly: without it the endpoint serves only MEMSITE_CONTEXT_WINDOW
        messages, while marsys's managed memory serves every message after the summary. The
        list's `context_id` names what was served (`replay_context`).
        """
        return served_messages(self._api.get(self._path + "context/", last=MAX_LAST))

    def retrieve_all(self) -> ServedMessages:
        """get_messages(), as in marsys's managed memory (the raw history is get_raw_messages())."""
        return self.get_messages()

    def get_raw_messages(self) -> list[Message]:
        """Every stored message in order, as Message objects; compaction never changes these."""
        return [Message.from_dict(row) for row in self._rows()]

    def get_cache_stats(self) -> dict[str, Any]:
        """marsys's monitoring dict, from the session's accounting and its compaction ledger.

        `cache_valid` is always True (the server derives the context on each read);
        `estimated_total_tokens` is the active context's size, which the threshold is
        compared with; `last_compaction` is the latest completed run, shaped like marsys's
        metadata["last_compaction"].
        """
        session = self._session()
        runs = self._runs()
        threshold = _threshold(session)
        active = next((run for run in runs if run["status"] in ACTIVE), None)
        return {
            "cache_valid": True,
            "raw_count": session["message_count"],
            "estimated_total_tokens": session["active_tokens"],
            "threshold_tokens": threshold,
            "over_threshold": threshold is not None and session["active_tokens"] > threshold,
            "active_compaction": None if active is None else {"run_id": active["id"], "status": active["status"]},
            "compactions_done": sum(1 for run in runs if run["status"] == "done"),
            "last_compaction": _last_compaction(next((run for run in runs if run["status"] == "done"), None)),
        }

    # --- writes ----------------------------------------------------------------------------

    def _kept_on_reset(self) -> dict[str, Any] | None:
        """None: a reset deletes every message (marsys's managed memory keeps none); the prompt
        stays on the session."""
        return None

    # --- compaction ------------------------------------------------------------------------

    def _runs(self) -> list[dict[str, Any]]:
        """The session's compaction runs, newest first."""
        return self._api.get(self._path + "compactions/")

    def _find_run(self, run_id: str) -> dict[str, Any] | None:
        return next((run for run in self._runs() if run["id"] == run_id), None)

    def _request_compaction(self, reason: str) -> dict[str, Any]:
        # Safe to retry: while a run is pending or running the server returns it, not a new one.
        response = self._api.request(
            "POST", self._path + "compact/", params={"reason": reason}, idempotent=True, expect=(202,)
        )
        return response.json()

    def _queue_if_over_threshold(self) -> dict[str, Any] | None:
        session = self._session()
        threshold = _threshold(session)
        if threshold is None or session["active_tokens"] <= threshold:
            return None
        runs = self._runs()
        latest = runs[0] if runs else None
        if latest is not None and latest["status"] in ACTIVE:
            return latest  # the server queued one when an append crossed the threshold
        if (
            latest is not None
            and latest["status"] == "failed"
            and not _later(session["updated_at"], latest["created_at"])
        ):
            # Nothing was appended since it failed: the same run would fail the same way.
            return None
        try:
            return self._request_compaction("manual")
        except ConflictError:
            return None  # nothing can be compacted (the server says why; marsys does nothing either)

    async def compact_if_needed(
        self, runtime: dict[str, Any] | None = None, *, wait: bool = False, timeout: float | None = None
    ) -> dict[str, Any] | None:
        """Queue a compaction if the session's active context is over its threshold.

        Returns the queued (or already active) run as the API shows it, or None when none
        is needed, or when the latest run failed and nothing was appended since. marsys
        returns None and compacts before returning; here the server compacts in the
        background unless `wait=True` (then up to `timeout`, default compaction_timeout).
        `runtime` (marsys's model and instruction for its summariser) is not used: the
        server's LLM backend summarises. Server events seen meanwhile go to the event bus.
        """
        if wait:
            self._ensure_event_cursor()  # before the run can end, so that its last event comes after
        run = self._queue_if_over_threshold()
        if run is not None and wait:
            await self._wait_for_run(run["id"], timeout)
            run = self._find_run(run["id"]) or run
        if self._event_bus is not None:
            self.poll_events()
        return run

    async def compact_for_payload_error(
        self, runtime: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> bool:
        """Queue a payload-too-large recovery run and wait for it (up to `timeout`, default compaction_timeout).

        True only if the run completed and the serialized payload shrank; False if it
        failed, timed out (it may still complete later), or the server could not be asked
        (logged; marsys also reports failure as False rather than raising). If another
        compaction is already pending or running, the server answers with that run and its
        outcome counts. `runtime` is not used (see compact_if_needed).
        """
        try:
            self._ensure_event_cursor()
            run = self._request_compaction("payload_error")
            finished = await self._wait_for_run(run["id"], timeout)
            final = self._find_run(run["id"])
        except MemoryClientError:
            logger.exception("Payload compaction of session %s could not be run", self.session_id)
            return False
        if final is None or final["status"] != "done":
            status = final["status"] if final else "missing"
            reason = "timed out" if finished is None and status in ACTIVE else (final or {}).get("error", "")
            logger.warning("Payload compaction %s of session %s: %s %s", run["id"], self.session_id, status, reason)
            return False
        return final["post_bytes"] < final["pre_bytes"]

    async def _wait_for_run(self, run_id: str, timeout: float | None) -> str | None:
        """Poll the event feed until `run_id` completes or fails; its status, or None on timeout."""
        deadline = time.monotonic() + (self.compaction_timeout if timeout is None else timeout)
        delay = _FIRST_POLL
        while True:
            for record in self.poll_events():
                if (record.get("data") or {}).get("run_id") == run_id and record["kind"] in _TERMINAL_EVENTS:
                    return _TERMINAL_EVENTS[record["kind"]]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, _MAX_POLL)

    # --- events ----------------------------------------------------------------------------

    def set_event_context(
        self, agent_name: str, event_bus: EventSink | None = None, session_id: str | None = None
    ) -> None:
        """As ConversationMemory's, plus CompactionEvents for the server's compaction events.

        The server's events are read by poll_events(), which compact_if_needed() and
        compact_for_payload_error() call; events from before the bus was set are skipped,
        as marsys only emits while one is set. CompactionEvent.session_id is `session_id`
        if given, else this memory's session id (marsys emits nothing without one).
        """
        had_bus = self._event_bus is not None
        super().set_event_context(agent_name, event_bus, session_id)
        if self._event_bus is not None and not had_bus:
            self._fetch_events()  # skip to the end of the feed: what happened so far is not news

    def _fetch_events(self) -> list[dict[str, Any]]:
        """The session's server events after the cursor, oldest first; moves the cursor."""
        events: list[dict[str, Any]] = []
        while True:
            page = self._api.get("events/", session=self.session_id, after=self._event_cursor, limit=_EVENT_PAGE)
            events.extend(page["results"])
            if page["results"]:
                self._event_cursor = page["results"][-1]["id"]
            elif self._event_cursor is None:
                self._event_cursor = 0
            if page["next_after"] is None:
                return events

    def _ensure_event_cursor(self) -> None:
        if self._event_cursor is None:
            self._fetch_events()  # skip the history: only what happens from now on is news

    def poll_events(self) -> list[dict[str, Any]]:
        """The session's server events since the last poll; compaction ones go to the event bus.

        The first poll of a memory attached to an existing session only finds where the
        feed ends and returns []. Reset events are returned but not emitted: reset_memory()
        emits MemoryResetEvent itself, where marsys does.
        """
        if self._event_cursor is None:
            self._ensure_event_cursor()
            return []
        events = self._fetch_events()
        if self._event_bus is not None:
            for record in events:
                event = compaction_event_from(
                    record,
                    session_id=self._event_session_id or self.session_id,
                    agent_name=self._agent_name or "unknown",
                )
                if event is not None:
                    emit(self._event_bus, event)
        return events


ManagedConversationMemory = RemoteManagedConversationMemory


def _threshold(session: dict[str, Any]) -> int | None:
    """The managed context's threshold_tokens (None for a session that is not managed)."""
    if session.get("memory_type") != "managed_conversation":
        return None
    return (session.get("memory_config") or {}).get("threshold_tokens")
