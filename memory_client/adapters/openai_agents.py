"""An OpenAI Agents SDK `Session` kept on a memsite server.

    from agents import Agent, Runner
    from memory_client.adapters.openai_agents import MemsiteSession

    session = MemsiteSession("user-42")  # MEMSITE_URL / MEMSITE_API_KEY
    await Runner.run(agent, "Hello", session=session)

The SDK's `session_id` is the memsite session's `external_id`; the session is created by the
first write. Every Responses-API item is stored twice over in one memsite message: as OpenAI chat
fields, so the server's context, compaction, search, fact extraction and dashboard understand it
(a function call is an assistant `tool_calls` entry, its output a `tool` message answering it,
reasoning goes to `reasoning_details`), and verbatim in the message's `meta`, so `get_items` gives
back exactly what was added: the SDK compares what it reads with what it wrote. Consecutive model
output items (reasoning, text, function calls) share one assistant message, as OpenAI's chat
format wants them; messages other clients wrote (no items in `meta`) are read from their chat
fields.

`MemsiteSession(..., context="managed")` makes `get_items` return the session's managed context
(GET .../context/: after a compaction, the summary and the messages after it, tool outputs
truncated when over the threshold) instead of the whole history, for long conversations on a
`managed_conversation` session. Messages served as stored come back as their original items.

The SDK is async and the client's HTTP layer is not: each call runs the client's requests in a
worker thread (`asyncio.to_thread`), so the event loop never blocks, and the client's retry policy
and error mapping (memory_client.transport) apply unchanged.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar, cast

import httpx
from agents.items import TResponseInputItem
from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit

from memory_client.adapters._sessions import MAX_LAST, NamedSession
from memory_client.replay import replay_context
from memory_client.transport import DEFAULT_RETRIES, DEFAULT_TIMEOUT, HttpApi
from memory_client.vocabulary.messages import content_text, to_openai_message
from memory_client.vocabulary.wire import ContextReplay

ITEMS_KEY = "responses_items"  # where a message's `meta` keeps the items it stands for, verbatim
_INPUT_ROLES = {"user": "user", "system": "system", "developer": "system"}

ContextMode = Literal["history", "managed"]
Item = dict[str, Any]
_T = TypeVar("_T")


# --- items -> stored messages --------------------------------------------------------------------


def _kind(item: Mapping[str, Any]) -> str:
    """The item's type; an easy input message ({"role", "content"}) has none and is a message."""
    return str(item.get("type") or ("message" if "role" in item else "unknown"))


def _chat_part(part: Any) -> dict[str, Any] | None:
    """A Responses content part as a chat content part the server accepts; None when chat has none."""
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "refusal":
        return {"type": "refusal", "refusal": str(part.get("refusal", ""))}
    if kind == "input_image" and part.get("image_url"):
        return {"type": "image_url", "image_url": {"url": part["image_url"], "detail": part.get("detail") or "auto"}}
    if kind in ("input_image", "input_file"):
        file = {name: part[name] for name in ("file_id", "file_data", "filename") if part.get(name)}
        return {"type": "file", "file": file} if file else None
    return None


def _chat_content(content: Any) -> Any:
    """A message item's content in chat form: text stays text, parts become chat parts."""
    if content is None or isinstance(content, str):
        return content
    parts = [converted for part in content if (converted := _chat_part(part)) is not None]
    if all(part["type"] == "text" for part in parts):
        return "".join(part["text"] for part in parts)  # one plain string, as chat clients write it
    return parts


def _reasoning_details(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A reasoning item in the `reasoning_details` shape (OpenRouter's, as marsys stores it)."""
    details: list[dict[str, Any]] = []
    common = {"id": item["id"]} if item.get("id") else {}
    for summary in item.get("summary") or []:
        details.append({"type": "reasoning.summary", "summary": summary.get("text", ""), **common})
    for content in item.get("content") or []:
        details.append({"type": "reasoning.text", "text": content.get("text", ""), **common})
    if item.get("encrypted_content"):
        details.append({"type": "reasoning.encrypted", "data": item["encrypted_content"], **common})
    return details or [{"type": "reasoning.summary", "summary": "", **common}]


def _model_output_message(items: list[Item]) -> dict[str, Any]:
    """One assistant message for consecutive model output items: text, tool calls and reasoning."""
    texts: list[dict[str, Any]] = []
    tool_calls: list[dict[str, Any]] = []
    reasoning: list[dict[str, Any]] = []
    for item in items:
        kind = _kind(item)
        if kind == "message":
            said = _chat_content(item.get("content"))
            texts.extend([{"type": "text", "text": said}] if isinstance(said, str) else said or [])
        elif kind == "function_call":
            function = {"name": item["name"], "arguments": item.get("arguments") or ""}
            tool_calls.append({"id": item["call_id"], "type": "function", "function": function})
        elif kind == "reasoning":
            reasoning.extend(_reasoning_details(item))
    content: Any = _chat_content(texts) if texts else None
    if content is None and not tool_calls:
        content = ""  # a turn of only reasoning or hosted-tool items: no null content without tool calls
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning:
        message["reasoning_details"] = reasoning
    return message


def _output_text(output: Any) -> Any:
    """A function call's output as tool message content: text, or chat parts (images, files)."""
    if isinstance(output, str):
        return output
    content = _chat_content(output)
    return content if content else json.dumps(output, ensure_ascii=False)


def _stored(message: dict[str, Any], items: list[Item]) -> dict[str, Any]:
    return {"message_id": str(uuid.uuid4()), **message, "meta": {ITEMS_KEY: items}}


def items_to_messages(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Items as memsite message bodies (each with a new message_id and its items in `meta`).

    Input messages (user, system, developer) and function call outputs are a message each;
    every run of other items (the model's text, function calls, reasoning, hosted tool calls) is
    one assistant message, so a turn's parallel calls are one `tool_calls` list, as chat wants.
    """
    messages: list[dict[str, Any]] = []
    pending: list[Item] = []

    def flush() -> None:
        if pending:
            messages.append(_stored(_model_output_message(pending), list(pending)))
            pending.clear()

    for original in items:
        item = copy.deepcopy(dict(original))
        kind = _kind(item)
        if kind == "function_call_output":
            flush()
            tool = {"role": "tool", "tool_call_id": item["call_id"], "content": _output_text(item.get("output"))}
            messages.append(_stored(tool, [item]))
        elif kind == "message" and item.get("role") in _INPUT_ROLES:
            flush()
            chat = {"role": _INPUT_ROLES[item["role"]], "content": _chat_content(item.get("content"))}
            messages.append(_stored(chat, [item]))
        else:
            pending.append(item)
    flush()
    return messages


# --- stored messages -> items --------------------------------------------------------------------


def _input_part(part: Any) -> dict[str, Any] | None:
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type")
    if kind == "text":
        return {"type": "input_text", "text": str(part.get("text", ""))}
    if kind == "image_url":
        image = part.get("image_url") or {}
        return {"type": "input_image", "image_url": image.get("url"), "detail": image.get("detail") or "auto"}
    if kind == "file":
        return {"type": "input_file", **dict(part.get("file") or {})}
    return None


def _input_content(message: Mapping[str, Any]) -> Any:
    content = message.get("content")
    images = list(message.get("images") or [])
    if isinstance(content, list) or images:
        parts = content if isinstance(content, list) else [{"type": "text", "text": content_text(content)}]
        parts = [*parts, *({"type": "image_url", "image_url": {"url": url}} for url in images)]
        return [converted for part in parts if (converted := _input_part(part)) is not None]
    return content_text(content)


def chat_to_items(message: Mapping[str, Any]) -> list[Item]:
    """Items for a chat message written without them (by another client, or served by /context/)."""
    role = message.get("role")
    if role == "tool":
        output = message.get("content")
        return [
            {
                "type": "function_call_output",
                "call_id": message.get("tool_call_id"),
                "output": output if isinstance(output, str) else content_text(output),
            }
        ]
    if role != "assistant":
        return [{"role": role, "content": _input_content(message)}]
    items: list[Item] = []
    text = content_text(message.get("content"))
    if text or not message.get("tool_calls"):
        items.append({"role": "assistant", "content": text})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": function.get("name", ""),
                "arguments": function.get("arguments", ""),
            }
        )
    return items


def message_items(row: Mapping[str, Any]) -> list[Item]:
    """The items a stored message stands for: those kept in its meta, else read from its chat fields."""
    meta = row.get("meta")
    kept = meta.get(ITEMS_KEY) if isinstance(meta, Mapping) else None
    if isinstance(kept, list) and kept:
        return copy.deepcopy(kept)
    return chat_to_items(row)


def _served_key(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False)


def context_items(served: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[Item]:
    """The managed context as items: a message served as stored gives back its original items.

    /context/ serves OpenAI messages without ids, so each is matched to the stored message it
    is served as (same chat form); a summary, or a tool output shortened by truncation, matches
    none and is read from its chat fields.
    """
    stored: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        stored.setdefault(_served_key(to_openai_message(row)), []).append(row)
    items: list[Item] = []
    for message in served:
        matches = stored.get(_served_key(message))
        items.extend(message_items(matches.pop(0)) if matches else chat_to_items(message))
    return items


def whole_tool_pairs(items: list[Item]) -> list[Item]:
    """Drop function call outputs whose call was cut off: no model takes an answer without its call."""
    calls = {item.get("call_id") for item in items if _kind(item) == "function_call"}
    return [item for item in items if _kind(item) != "function_call_output" or item.get("call_id") in calls]


# --- the Session ----------------------------------------------------------------------------------


class MemsiteSession:
    """The OpenAI Agents SDK `Session` protocol (agents 0.24) over a memsite session.

    `session_id` names the conversation (stored as the memsite session's external_id; it must be
    unique within the team). `context="managed"` makes `get_items` serve the managed context
    (see the module docstring). `memory_type`, `memory_config` and `system_prompt` are the
    settings of a session this creates (`memory_type="managed_conversation"` for compaction);
    an existing session keeps its own. `session_settings.limit` is the default `limit` of
    `get_items`, as for the SDK's own sessions. After `close()` every call raises RuntimeError,
    as the SDK's SQLiteSession does.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        context: ContextMode = "history",
        memory_type: str | None = None,
        memory_config: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if context not in ("history", "managed"):
            raise ValueError(f"context must be 'history' or 'managed', got {context!r}")
        self.session_id = session_id
        self.context: ContextMode = context
        # An empty settings object, never None: the SDK's own sessions default to one, and callers
        # (the SDK's runner, user code) read `session.session_settings.limit`.
        self.session_settings = (
            coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        )
        settings = {"memory_type": memory_type, "memory_config": memory_config, "system_prompt": system_prompt}
        self._api = HttpApi(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries, transport=transport
        )
        self._session = NamedSession(
            self._api, session_id, settings={name: value for name, value in settings.items() if value is not None}
        )
        # pop_item reads, then changes the newest message: one at a time per session object.
        self._write_lock = threading.Lock()
        # The context_id of the latest managed context get_items served (None before one).
        self.last_context_id: str | None = None
        self._closed = False

    @property
    def memsite_session_id(self) -> str | None:
        """The memsite session's id (None until the first write creates it)."""
        return self._session.id(create=False)

    def close(self) -> None:
        self._closed = True
        self._api.close()

    def _check_not_closed(self) -> None:
        """Raise as the SDK's SQLiteSession does: a closed session must not look empty or accept writes."""
        if self._closed:
            raise RuntimeError("MemsiteSession is closed")

    def replay_context(self, context_id: str | None = None) -> ContextReplay:
        """A served context exactly as it was served (default: the latest managed context)."""
        wanted = context_id or self.last_context_id
        if wanted is None:
            raise ValueError("No context served yet: get_items with context='managed' names one.")
        return replay_context(self._api, wanted)

    # --- the protocol ---------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The newest `limit` items (default session_settings.limit, else all), oldest first."""
        self._check_not_closed()
        resolved = resolve_session_limit(limit, self.session_settings)
        return cast(list[TResponseInputItem], await _in_thread(lambda: self._get_items(resolved)))

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items, each in its chat form with itself kept alongside (see items_to_messages)."""
        self._check_not_closed()  # before the empty list's early return, as the SDK's sessions do
        plain = [cast(Mapping[str, Any], item) for item in items]
        await _in_thread(lambda: self._add_items(plain))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (None when there is none)."""
        self._check_not_closed()
        return cast(TResponseInputItem | None, await _in_thread(self._pop_item))

    async def clear_session(self) -> None:
        """Delete every message (POST .../reset/); the session, its name and settings stay."""
        self._check_not_closed()
        await _in_thread(self._session.reset)

    # --- the work, in a worker thread -----------------------------------------------------------

    def _get_items(self, limit: int | None) -> list[Item]:
        if limit is not None and limit == 0:
            return []
        session_id = self._session.id(create=False)
        if session_id is None:
            return []
        if self.context == "managed":
            return self._managed_items(session_id, limit)
        last = limit if limit is not None and limit > 0 else None
        # Every stored message stands for at least one item, so the newest `limit` messages hold
        # the newest `limit` items.
        items = [item for row in self._session.rows(session_id, last=last) for item in message_items(row)]
        return items[-last:] if last is not None else items

    def _managed_items(self, session_id: str, limit: int | None) -> list[Item]:
        answer = self._api.get(self._session.path(session_id) + "context/")
        # The items are the Agents SDK's own type, with no room for an id: the id of what was
        # served is kept on the session, for GET /contexts/{id}/ (the replay).
        self.last_context_id = answer.get("context_id")
        served = answer["messages"]
        rows = self._session.rows(session_id, last=min(len(served), MAX_LAST)) if served else []
        items = context_items(served, rows)
        if limit is not None and limit > 0:
            items = whole_tool_pairs(items[-limit:])
        return items

    def _add_items(self, items: list[Mapping[str, Any]]) -> None:
        self._session.append(items_to_messages(items))

    def _pop_item(self) -> Item | None:
        with self._write_lock:
            session_id = self._session.id(create=False)
            if session_id is None:
                return None
            rows = self._session.rows(session_id, last=1)
            if not rows:
                return None
            row = rows[-1]
            items = message_items(row)
            path = f"{self._session.path(session_id)}messages/{row['message_id']}/"
            if len(items) == 1:
                self._api.request("DELETE", path)
            else:
                # The newest message stands for several items (a model turn): it keeps the others.
                rest = _stored(_model_output_message(items[:-1]), items[:-1])
                meta = {**(row.get("meta") or {}), ITEMS_KEY: items[:-1]}
                body = {
                    "content": rest["content"],
                    "tool_calls": rest.get("tool_calls"),
                    "reasoning_details": rest.get("reasoning_details"),
                    "meta": meta,
                }
                self._api.request("PATCH", path, json_body=body)
            return items[-1]


async def _in_thread(work: Callable[[], _T]) -> _T:
    return await asyncio.to_thread(work)
