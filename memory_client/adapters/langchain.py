"""A LangChain `BaseChatMessageHistory` kept on a memsite server.

    from memory_client.adapters.langchain import MemsiteChatMessageHistory

    history = MemsiteChatMessageHistory("user-42")  # MEMSITE_URL / MEMSITE_API_KEY
    answer = model.invoke([*history.messages, question])
    history.add_messages([question, answer])

(`RunnableWithMessageHistory`, deprecated in langchain-core 1.x, takes it too.)

The history's `session_id` is the memsite session's `external_id`; the session is created by the
first write. Each LangChain message is stored as one memsite message in OpenAI's chat format
(LangChain's own `convert_to_openai_messages`: an AIMessage's tool calls become `tool_calls`, a
ToolMessage a `tool` message answering one, content blocks chat content parts), so the server's
context, compaction, search and dashboard understand it, with the message itself kept in `meta`
(`message_to_dict`), so reading it back gives an equal message (ids, metadata, blocks the chat
format has no place for). Messages other clients wrote are read from their chat fields.

The async methods run the client's requests in a worker thread, so an event loop never blocks.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    BaseMessage,
    convert_to_messages,
    convert_to_openai_messages,
    message_to_dict,
    messages_from_dict,
)

from memory_client.adapters._sessions import NamedSession
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT, HttpApi
from memory_client.vocabulary.messages import to_openai_message

MESSAGE_KEY = "langchain_message"  # where a message's `meta` keeps the LangChain message, verbatim
# The content parts the server stores; LangChain passes other blocks (provider-specific) through,
# and those live on only in `meta`.
_CHAT_PARTS = frozenset({"text", "image_url", "input_audio", "file", "refusal"})
_CHAT_FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id")


def _chat_content(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    return [part for part in content if isinstance(part, Mapping) and part.get("type") in _CHAT_PARTS]


def to_stored(message: BaseMessage) -> dict[str, Any]:
    """A LangChain message as a memsite message body: its chat form, and itself in `meta`."""
    chat = convert_to_openai_messages(message)
    body: dict[str, Any] = {name: chat[name] for name in _CHAT_FIELDS if chat.get(name) is not None}
    body["content"] = _chat_content(chat.get("content"))
    if body["role"] == "developer":
        body["role"] = "system"  # memsite's roles are chat's four
    return {"message_id": str(uuid.uuid4()), **body, "meta": {MESSAGE_KEY: message_to_dict(message)}}


def from_stored(row: Mapping[str, Any]) -> BaseMessage:
    """The LangChain message a stored message stands for (kept in meta, else read from chat fields)."""
    meta = row.get("meta")
    kept = meta.get(MESSAGE_KEY) if isinstance(meta, Mapping) else None
    if isinstance(kept, Mapping):
        return messages_from_dict([dict(kept)])[0]
    return convert_to_messages([dict(to_openai_message(row))])[0]


class MemsiteChatMessageHistory(BaseChatMessageHistory):
    """LangChain's chat message history over a memsite session named `session_id`.

    `memory_type`, `memory_config` and `system_prompt` are the settings of a session this
    creates; an existing session keeps its own.
    """

    def __init__(
        self,
        session_id: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        memory_type: str | None = None,
        memory_config: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.session_id = session_id
        settings = {"memory_type": memory_type, "memory_config": memory_config, "system_prompt": system_prompt}
        self._api = HttpApi(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, transport=transport
        )
        self._session = NamedSession(
            self._api, session_id, settings={name: value for name, value in settings.items() if value is not None}
        )

    # The base class declares a plain attribute; LangChain's own histories read it as a property too.
    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message, oldest first, read from the server (other writers included)."""
        session_id = self._session.id(create=False)
        if session_id is None:
            return []
        return [from_stored(row) for row in self._session.rows(session_id)]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages in order, in one atomic request (up to 100 at a time)."""
        self._session.append([to_stored(message) for message in messages])

    def clear(self) -> None:
        """Delete every message (POST .../reset/); the session, its name and settings stay."""
        self._session.reset()

    async def aget_messages(self) -> list[BaseMessage]:
        return await asyncio.to_thread(lambda: self.messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await asyncio.to_thread(self.add_messages, list(messages))

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)

    def close(self) -> None:
        self._api.close()
