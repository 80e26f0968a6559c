"""marsys 0.2.1's MemoryManager: builds the memory for `memory_type` and delegates to it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import httpx

from memory_client.config import ManagedMemoryConfig
from memory_client.errors import AgentConfigurationError
from memory_client.events import EventSink
from memory_client.kg import DEFAULT_EXTRACTION_TIMEOUT, RemoteKGMemory
from memory_client.managed import DEFAULT_COMPACTION_TIMEOUT, RemoteManagedConversationMemory
from memory_client.memory import RemoteConversationMemory
from memory_client.memory_files import MemoryFiles
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT


class MemoryManager:
    """marsys's MemoryManager: the same constructor (plus where the server is) and methods.

    "conversation_history" builds a ConversationMemory, "managed_conversation" a
    ManagedConversationMemory configured by `memory_config` (a ManagedMemoryConfig, a
    partial dict, or None for the team's defaults), "kg" a KGMemory whose facts the
    server extracts (`model` is not required for it, unlike in marsys). The module is
    `memory_module`, and every attribute the manager does not define is the module's, so
    `manager.get_cache_stats()` works where marsys needs `manager.memory_module`.
    `model` is accepted for marsys call sites and unused; `token_counter` is put on a
    ManagedMemoryConfig as marsys does, and never sent (the server counts tokens).
    """

    memory_module: RemoteConversationMemory | RemoteKGMemory

    def __init__(
        self,
        memory_type: str = "conversation_history",
        description: str | None = None,
        model: Any = None,
        memory_config: ManagedMemoryConfig | Mapping[str, Any] | None = None,
        token_counter: Any = None,
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
        extraction_timeout: float = DEFAULT_EXTRACTION_TIMEOUT,
    ) -> None:
        where: dict[str, Any] = {
            "base_url": base_url,
            "api_key": api_key,
            "session_id": session_id,
            "external_id": external_id,
            "metadata": metadata,
            "timeout": timeout,
            "max_retries": max_retries,
            "transport": transport,
        }
        if memory_type == "managed_conversation":
            if token_counter is not None and isinstance(memory_config, ManagedMemoryConfig):
                memory_config.token_counter = token_counter
            self.memory_module = RemoteManagedConversationMemory(
                config=memory_config, description=description, compaction_timeout=compaction_timeout, **where
            )
        elif memory_type == "conversation_history":
            self.memory_module = RemoteConversationMemory(description, memory_type=memory_type, **where)
        elif memory_type == "kg":
            self.memory_module = RemoteKGMemory(model, description, extraction_timeout=extraction_timeout, **where)
        else:
            raise AgentConfigurationError(
                f"Unknown memory_type: {memory_type} (one of 'conversation_history', 'managed_conversation', 'kg')",
                config_field="memory_type",
                config_value=memory_type,
            )
        self.memory_type = memory_type

    def __getattr__(self, name: str) -> Any:
        # Only called for names the manager lacks; memory_module itself must not recurse here
        # while __init__ is still building it.
        if name == "memory_module":
            raise AttributeError(name)
        return getattr(self.memory_module, name)

    def __enter__(self) -> MemoryManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.memory_module.close()

    def set_event_context(
        self, agent_name: str, event_bus: EventSink | None = None, session_id: str | None = None
    ) -> None:
        """Emit MemoryResetEvent (and, for managed memory, CompactionEvent) to `event_bus`."""
        self.memory_module.set_event_context(agent_name, event_bus, session_id)

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
        """Hybrid search over the team's memory, best first: every session unless `session` is
        given (`session=manager.session_id` for this one). See ConversationMemory.search."""
        return self.memory_module.search(
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

    def memory_files(self, agent: str | None = None) -> MemoryFiles:
        """The team's memory files (an agent's, or the shared ones), over this manager's connection."""
        return MemoryFiles(agent, api=self.memory_module._api)

    def retrieve_relevant(self, query: str, n: int = 5) -> list[dict[str, Any]]:
        """The memory's n entries most relevant to `query`, best first: messages of this session
        for conversation memories, live facts for KG memory (each in its retrieve_recent shape)."""
        return self.memory_module.retrieve_relevant(query, n)

    def extract_and_update_from_text(self, *args: Any, **kwargs: Any) -> Any:
        """The KG memory's extract_and_update_from_text (a coroutine to await); marsys's error otherwise."""
        if not isinstance(self.memory_module, RemoteKGMemory):
            raise NotImplementedError("extract_and_update_from_text is only available for KGMemory.")
        return self.memory_module.extract_and_update_from_text(*args, **kwargs)

    def keep_last(self, n: int) -> list[str]:
        """The conversation memories' keep_last (see ConversationMemory.keep_last); KG memory has none."""
        if isinstance(self.memory_module, RemoteKGMemory):
            raise NotImplementedError("keep_last is only available for conversation memories, not KGMemory.")
        return self.memory_module.keep_last(n)

    async def compact_if_needed(self, runtime: dict[str, Any] | None = None, **options: Any) -> dict[str, Any] | None:
        """The managed memory's compact_if_needed (options: wait, timeout); None for other types."""
        if isinstance(self.memory_module, RemoteManagedConversationMemory):
            return await self.memory_module.compact_if_needed(runtime, **options)
        return None

    async def compact_for_payload_error(self, runtime: dict[str, Any] | None = None, **options: Any) -> bool:
        """The managed memory's compact_for_payload_error (option: timeout); False for other types."""
        if isinstance(self.memory_module, RemoteManagedConversationMemory):
            return await self.memory_module.compact_for_payload_error(runtime, **options)
        return False
