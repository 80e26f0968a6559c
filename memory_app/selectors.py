"""Reads of conversation memory that are more than a one-line filter."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet

from memory_app import tokens
from memory_app.models import Message, Session, Team
from memory_client.openai_format import to_openai_message
from memsite.errors import NotFound

EXPORT_FIELDS = (
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "agent_calls",
    "structured_data",
    "reasoning_details",
    "images",
    "send_from",
    "send_to",
    "meta",
)
_CONTEXT_FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id", "images", "token_count")


def session_get(*, team: Team, session_id: uuid.UUID | str) -> Session:
    """The team's session, or NotFound: another team's id is indistinguishable from none."""
    try:
        return Session.objects.get(team=team, pk=session_id)
    except (Session.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound("Session not found.") from exc


def session_list(
    *,
    team: Team,
    external_id: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    search: str | None = None,
    memory_type: str | None = None,
) -> QuerySet[Session]:
    sessions = Session.objects.filter(team=team)
    if external_id:
        sessions = sessions.filter(external_id=external_id)
    if created_after:
        sessions = sessions.filter(created_at__gte=created_after)
    if created_before:
        sessions = sessions.filter(created_at__lt=created_before)
    if memory_type:
        sessions = sessions.filter(memory_type=memory_type)
    if search:
        sessions = sessions.filter(Q(external_id__icontains=search) | Q(system_prompt__icontains=search))
    return sessions.annotate(message_count=Count("messages")).order_by("-created_at", "-pk")


def message_get(*, session: Session, message_id: uuid.UUID | str) -> Message:
    try:
        return Message.objects.get(session=session, pk=message_id)
    except (Message.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound("Message not found.") from exc


@dataclass(frozen=True)
class MessagePage:
    messages: list[Message]
    next_after: int | None


def message_page(
    *,
    session: Session,
    role: str | None = None,
    after: int | None = None,
    limit: int = 100,
    last: int | None = None,
) -> MessagePage:
    """A page of messages in seq order: `last` N, or up to `limit` after seq `after`."""
    messages = Message.objects.filter(session=session)
    if role:
        messages = messages.filter(role=role)
    if last is not None:
        newest = list(messages.order_by("-seq")[:last])
        return MessagePage(messages=newest[::-1], next_after=None)
    if after is not None:
        messages = messages.filter(seq__gt=after)
    page = list(messages.order_by("seq")[: limit + 1])
    has_more = len(page) > limit
    page = page[:limit]
    return MessagePage(messages=page, next_after=page[-1].seq if has_more else None)


def _drop_orphan_tool_results(window: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Remove tool results whose assistant tool call is not in the window.

    A budget cut can fall between an assistant's tool_calls and its results; sending the
    results alone makes every OpenAI request fail, so they go with their call.
    """
    open_calls: set[str] = set()
    kept: list[dict[str, Any]] = []
    for message in window:
        if message["role"] == Message.Role.TOOL:
            if message.get("tool_call_id") not in open_calls:
                continue
        for call in message.get("tool_calls") or []:
            open_calls.add(call["id"])
        kept.append(message)
    return kept


@dataclass(frozen=True)
class Context:
    messages: list[dict[str, Any]]
    token_count: int


def context_build(*, session: Session, last: int, max_tokens: int | None = None) -> Context:
    """System prompt + the most recent messages that fit `last` and `max_tokens`.

    Reads only the window (newest first by the (session, seq) index) and sums cached
    token counts, so its cost follows the window, not the length of the history.
    """
    newest_first = list(Message.objects.filter(session=session).order_by("-seq").values(*_CONTEXT_FIELDS)[:last])
    system_tokens = session.system_prompt_tokens
    budget = None if max_tokens is None else max_tokens - system_tokens - tokens.REPLY_PRIMING_TOKENS
    window: list[dict[str, Any]] = []
    used = 0
    for message in newest_first:
        if budget is not None and used + message["token_count"] > budget:
            break
        used += message["token_count"]
        window.append(message)
    window = _drop_orphan_tool_results(window[::-1])

    out: list[dict[str, Any]] = []
    if session.system_prompt:
        out.append({"role": "system", "content": session.system_prompt})
    out.extend(to_openai_message(message) for message in window)
    total = tokens.count_request([system_tokens, *(m["token_count"] for m in window)])
    return Context(messages=out, token_count=total)


def message_export_dict(message: Message) -> dict[str, Any]:
    """A message in the export format: its stored fields, nulls omitted."""
    data: dict[str, Any] = {"message_id": str(message.pk)}
    for field in EXPORT_FIELDS:
        value = getattr(message, field)
        if value is not None:
            data[field] = value
    return data


def session_export(*, session: Session) -> dict[str, Any]:
    """MemoryManager.save_to_file's document, lossless: import(export(s)) == s."""
    messages: list[dict[str, Any]] = []
    if session.system_prompt:
        messages.append({"role": "system", "content": session.system_prompt})
    messages.extend(
        message_export_dict(m) for m in Message.objects.filter(session=session).order_by("seq").iterator(2000)
    )
    document: dict[str, Any] = {
        "memory_type": session.memory_type,
        "messages": messages,
        "timestamp": time.time(),
        "session": {"external_id": session.external_id, "metadata": session.metadata},
    }
    if session.additional_state:
        document["additional_state"] = session.additional_state
    return document
