"""Writes of the multi-agent (TaskWeaver-style) memory: rounds, posts with attachments, shared memory, import.

A post is a message appended with `message_append` (same seq counter, token count,
compaction trigger and fact extraction as any message) that belongs to a round; its
attachments are rows beside it, written in the same transaction.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max

from memory_app.conversations import services
from memory_app.conversations.locks import hold_session_lock
from memory_app.conversations.models import Message, Session
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.rounds.models import Attachment, Round, SharedMemoryEntry
from memory_app.rounds.selectors import SESSION_KEY, SHARED_MEMORY_KEY
from memory_app.search import services as search
from memory_app.tenancy.models import Team
from memory_client.vocabulary.conversation import ATTACHMENT_TYPES, ROUND_STATES, SCOPES, new_id
from memsite.errors import Conflict, InvalidInput
from memsite.path_segments import DOT_SEGMENT

logger = logging.getLogger(__name__)

# A round id is a URL segment (.../rounds/{id}/): no slash or space, and not "." or ".." (clients
# normalise those away, memsite.path_segments), or the round could be created but never addressed again.
ROUND_ID = re.compile(rf"(?!{DOT_SEGMENT}\Z)[^\s/]{{1,64}}")
ROUND_ID_RULE = "must be 1-64 characters without spaces or slashes, and not . or .. (nor %2E)"
USER_ROLE_NAME = "User"  # the name of the human in send_from/send_to
SHARED_MEMORY_TYPE = "shared_memory_entry"


def post_role(send_from: str) -> str:
    """The chat role a post is stored with when none is given: the user's posts are `user`."""
    return Message.Role.USER if send_from == USER_ROLE_NAME else Message.Role.ASSISTANT


# --- rounds -------------------------------------------------------------------------------


@transaction.atomic
def round_create(
    *, session: Session, user_query: str, round_id: str | None = None, state: str = Round.State.CREATED
) -> tuple[Round, bool]:
    """A new round at the end of the session: (round, created).

    A client-chosen `round_id` makes the call retry-safe: the same id with the same query
    returns the stored round (created False); with another query it is a conflict. Takes the
    session's row lock, so concurrent rounds take their order one after another.
    """
    hold_session_lock(session_id=session.pk)
    if round_id:
        existing = Round.objects.filter(session=session, round_id=round_id).first()
        if existing is not None:
            if existing.user_query != user_query:
                raise Conflict(
                    f"Round {round_id!r} already exists with another user_query.",
                    fields={"id": ["already used by another round of this session"]},
                )
            return existing, False
    last = Round.objects.filter(session=session).aggregate(last=Max("order"))["last"] or 0
    try:
        with transaction.atomic():
            created = Round.objects.create(
                team_id=session.team_id,
                session=session,
                round_id=round_id or new_id("round"),
                order=last + 1,
                user_query=user_query,
                state=state,
            )
    except IntegrityError as exc:
        raise Conflict("Another round was created at the same time; retry.") from exc
    return created, True


def round_set_state(*, round_: Round, state: str) -> Round:
    """TaskWeaver's change_round_state: created, finished or failed, in any direction."""
    if state not in ROUND_STATES:
        raise InvalidInput.for_field("state", f"must be one of {', '.join(ROUND_STATES)}")
    if round_.state != state:
        round_.state = state
        round_.save(update_fields=["state", "updated_at"])
    return round_


# --- posts --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PostResult:
    message: Message
    attachments: list[Attachment]
    replayed: bool


def _entry_fields(extra: Any) -> dict[str, str] | None:
    """The SharedMemoryEntry a `shared_memory_entry` attachment's extra describes, or None."""
    if not isinstance(extra, Mapping):
        return None
    kind, content, scope = extra.get("type"), extra.get("content"), extra.get("scope")
    if not (isinstance(kind, str) and kind and isinstance(content, str) and scope in SCOPES):
        return None
    entry_id = extra.get("id")
    return {"type": kind, "content": content, "scope": scope, "entry_id": entry_id if isinstance(entry_id, str) else ""}


def shared_entry_problem(extra: Any) -> str | None:
    """Why a shared_memory_entry attachment's extra is not an entry (None when it is one)."""
    if _entry_fields(extra) is None:
        return f"a shared_memory_entry attachment needs extra {{type, content, scope ({' or '.join(SCOPES)})}}"
    return None


@transaction.atomic
def post_create(*, round_: Round, post: Mapping[str, Any]) -> PostResult:
    """Append a post to the round: a message (send_from/send_to, content = the post's message)
    and its attachments. A `shared_memory_entry` attachment also records the entry it carries.

    `post` is validated: message, send_from, send_to, attachment_list [{type, content, extra, id}],
    optional role, message_id (retry-safe as for messages), occurred_at (when it was said)
    and id (the post id).
    """
    session = round_.session
    record = {
        "role": post.get("role") or post_role(post["send_from"]),
        "content": post["message"],
        "send_from": post["send_from"],
        "send_to": post["send_to"],
        "post_id": post.get("id") or new_id("post"),
    }
    if post.get("message_id"):
        record["message_id"] = post["message_id"]
    if post.get("occurred_at") is not None:
        record["occurred_at"] = post["occurred_at"]
    result = services.message_append(session=session, messages=[record], path="", round_id=round_.pk)
    message = result.messages[0]
    if result.replayed:
        if message.round_id != round_.pk:
            raise Conflict("message_id already used by a message of another round.")
        return PostResult(message=message, attachments=list(message.attachments.order_by("position")), replayed=True)
    attachments = _create_attachments(message=message, items=post.get("attachment_list") or [])
    _record_carried_entries(round_=round_, message=message, attachments=attachments)
    return PostResult(message=message, attachments=attachments, replayed=False)


def _create_attachments(*, message: Message, items: Sequence[Mapping[str, Any]]) -> list[Attachment]:
    return Attachment.objects.bulk_create(
        Attachment(
            message=message,
            position=position,
            attachment_id=item.get("id") or new_id("atta"),
            type=item["type"],
            content=item.get("content") or "",
            extra=item.get("extra"),
        )
        for position, item in enumerate(items)
    )


def _record_carried_entries(*, round_: Round, message: Message, attachments: Sequence[Attachment]) -> None:
    for attachment in attachments:
        if attachment.type != SHARED_MEMORY_TYPE:
            continue
        fields = _entry_fields(attachment.extra)
        if fields is None:
            continue  # kept as an attachment; the import reported it
        _entry_insert(
            session=round_.session,
            round_=round_,
            attachment=attachment,
            created_by=message.send_from or "",
            **fields,
        )


# --- shared memory ------------------------------------------------------------------------


def _entry_insert(
    *,
    session: Session,
    round_: Round | None,
    type: str,
    content: str,
    scope: str,
    entry_id: str,
    created_by: str,
    attachment: Attachment | None = None,
) -> SharedMemoryEntry:
    try:
        with transaction.atomic():
            entry = SharedMemoryEntry.objects.create(
                team_id=session.team_id,
                session=session,
                round=round_,
                attachment=attachment,
                entry_id=entry_id or new_id("sme"),
                type=type,
                scope=scope,
                content=content,
                created_by=created_by,
            )
            search.index_shared_memory(team_id=session.team_id, entries=[entry])
            return entry
    except IntegrityError as exc:
        raise Conflict(
            f"Shared memory entry {entry_id!r} already exists in this session.",
            fields={"id": ["already used by another entry of this session"]},
        ) from exc


@transaction.atomic
def shared_memory_entry_create(
    *,
    session: Session,
    type: str,
    content: str,
    scope: str,
    round_: Round | None = None,
    created_by: str = "",
    entry_id: str | None = None,
) -> tuple[SharedMemoryEntry, bool]:
    """Record an entry: (entry, created). Without `round_` it belongs to the current (latest) round;
    a round-scoped entry needs one. The same `entry_id` with the same content is a replay."""
    if entry_id:
        existing = SharedMemoryEntry.objects.filter(session=session, entry_id=entry_id).first()
        if existing is not None:
            if (existing.type, existing.scope, existing.content) != (type, scope, content):
                raise Conflict(
                    f"Shared memory entry {entry_id!r} already exists with other content.",
                    fields={"id": ["already used by another entry of this session"]},
                )
            return existing, False
    if round_ is None:
        round_ = Round.objects.filter(session=session).order_by("-order").first()
    if round_ is None and scope == SharedMemoryEntry.Scope.ROUND:
        raise InvalidInput.for_field("scope", "a round-scoped entry needs a round, and this session has none")
    entry = _entry_insert(
        session=session,
        round_=round_,
        type=type,
        content=content,
        scope=scope,
        entry_id=entry_id or "",
        created_by=created_by,
    )
    return entry, True


# --- conversation import ------------------------------------------------------------------


@dataclass
class ParsedConversation:
    """A conversation document checked and cleaned: what to store, and what was left out."""

    header: dict[str, Any]  # every top-level key but rounds, shared_memory and session
    rounds: list[dict[str, Any]]
    shared_memory: list[dict[str, Any]]
    session: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


class _Problems:
    def __init__(self) -> None:
        self.fields: dict[str, list[str]] = {}

    def add(self, path: str, message: str) -> None:
        self.fields.setdefault(path, []).append(message)

    def text(self, value: Any, path: str, *, required: bool = True) -> str:
        if value is None and not required:
            return ""
        if not isinstance(value, str):
            self.add(path, "must be a string")
            return ""
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(path, "must be a list")
            return []
        return value


def _parse_attachment(item: Any, path: str, problems: _Problems, warnings: list[str]) -> dict[str, Any] | None:
    if not isinstance(item, Mapping):
        problems.add(path, "must be an object")
        return None
    kind = item.get("type")
    if kind not in ATTACHMENT_TYPES:
        # Older conversation files stay readable: Attachment.from_dict gives None, Post drops it.
        warnings.append(f"{path}: removed attachment type {kind!r} dropped")
        return None
    clean = {
        "id": problems.text(item.get("id"), f"{path}.id", required=False) or new_id("atta"),
        "type": kind,
        "content": problems.text(item.get("content"), f"{path}.content", required=False),
        "extra": item.get("extra"),
    }
    if kind == SHARED_MEMORY_TYPE and (problem := shared_entry_problem(item.get("extra"))):
        warnings.append(f"{path}.extra: {problem}; kept as an attachment only")
    return clean


def _parse_post(item: Any, path: str, problems: _Problems, warnings: list[str]) -> dict[str, Any] | None:
    if not isinstance(item, Mapping):
        problems.add(path, "must be an object")
        return None
    attachments = [
        _parse_attachment(attachment, f"{path}.attachment_list[{index}]", problems, warnings)
        for index, attachment in enumerate(problems.items(item.get("attachment_list"), f"{path}.attachment_list"))
    ]
    return {
        "id": problems.text(item.get("id"), f"{path}.id", required=False) or new_id("post"),
        "message": problems.text(item.get("message"), f"{path}.message"),
        "send_from": problems.text(item.get("send_from"), f"{path}.send_from"),
        "send_to": problems.text(item.get("send_to"), f"{path}.send_to"),
        "attachment_list": [attachment for attachment in attachments if attachment is not None],
    }


def _parse_round(item: Any, path: str, problems: _Problems, warnings: list[str]) -> dict[str, Any] | None:
    if not isinstance(item, Mapping):
        problems.add(path, "must be an object")
        return None
    state = item.get("state", Round.State.CREATED)
    if state not in ROUND_STATES:
        problems.add(f"{path}.state", f"must be one of {', '.join(ROUND_STATES)}")
    posts = [
        _parse_post(post, f"{path}.post_list[{index}]", problems, warnings)
        for index, post in enumerate(problems.items(item.get("post_list"), f"{path}.post_list"))
    ]
    round_id = problems.text(item.get("id"), f"{path}.id", required=False)
    if round_id and not ROUND_ID.fullmatch(round_id):
        problems.add(f"{path}.id", ROUND_ID_RULE)
    return {
        "id": round_id or new_id("round"),
        "user_query": problems.text(item.get("user_query"), f"{path}.user_query"),
        "state": state,
        "post_list": [post for post in posts if post is not None],
    }


def _parse_entry(item: Any, path: str, problems: _Problems) -> dict[str, Any]:
    if not isinstance(item, Mapping):
        problems.add(path, "must be an object")
        return {}
    if item.get("scope") not in SCOPES:
        problems.add(f"{path}.scope", f"must be one of {', '.join(SCOPES)}")
    return {
        "id": problems.text(item.get("id"), f"{path}.id", required=False),
        "type": problems.text(item.get("type"), f"{path}.type"),
        "content": problems.text(item.get("content"), f"{path}.content"),
        "scope": item.get("scope"),
        "round": problems.text(item.get("round"), f"{path}.round", required=False),
        "created_by": problems.text(item.get("created_by"), f"{path}.created_by", required=False),
    }


def conversation_parse(document: Any) -> ParsedConversation:
    """Check a conversation dict (Conversation.to_dict's shape, plus memsite's optional
    `session` and `shared_memory`). Removed attachment types are dropped with a warning; a
    document that is not a conversation is an InvalidInput naming every bad path."""
    problems = _Problems()
    warnings: list[str] = []
    if not isinstance(document, Mapping):
        raise InvalidInput.for_field("conversation", "must be an object with `rounds`")
    if "rounds" not in document:
        problems.add("rounds", "required")
    rounds = [
        _parse_round(item, f"rounds[{index}]", problems, warnings)
        for index, item in enumerate(problems.items(document.get("rounds"), "rounds"))
    ]
    ids = [round_["id"] for round_ in rounds if round_ is not None]
    if len(ids) != len(set(ids)):
        problems.add("rounds", "round ids must be unique")
    entries = [
        _parse_entry(item, f"{SHARED_MEMORY_KEY}[{index}]", problems)
        for index, item in enumerate(problems.items(document.get(SHARED_MEMORY_KEY), SHARED_MEMORY_KEY))
    ]
    for index, entry in enumerate(entries):
        if entry and entry["round"] and entry["round"] not in ids:
            problems.add(f"{SHARED_MEMORY_KEY}[{index}].round", "names no round of this conversation")
        elif entry and entry["scope"] == SharedMemoryEntry.Scope.ROUND and not entry["round"]:
            problems.add(f"{SHARED_MEMORY_KEY}[{index}].round", "required for a round-scoped entry")
    session = document.get(SESSION_KEY) or {}
    if not isinstance(session, Mapping):
        problems.add(SESSION_KEY, "must be an object")
        session = {}
    if problems.fields:
        first, messages = next(iter(problems.fields.items()))
        raise InvalidInput(f"{first}: {messages[0]}", fields=problems.fields)
    header = {key: value for key, value in document.items() if key not in ("rounds", SHARED_MEMORY_KEY, SESSION_KEY)}
    return ParsedConversation(
        header=header,
        rounds=[round_ for round_ in rounds if round_ is not None],
        shared_memory=entries,
        session={key: session[key] for key in ("external_id", "system_prompt", "metadata") if key in session},
        warnings=warnings,
    )


@transaction.atomic
def conversation_import(*, team: Team, parsed: ParsedConversation) -> Session:
    """Create a session holding the conversation: its rounds, posts (as messages, in order),
    attachments and shared memory entries. The conversation's own keys (id, plugins,
    enabled ...) are kept in the session's metadata under "conversation"."""
    metadata = dict(parsed.session.get("metadata") or {})
    metadata["conversation"] = parsed.header
    session = services.session_create(
        team=team,
        system_prompt=parsed.session.get("system_prompt") or "",
        external_id=parsed.session.get("external_id"),
        metadata=metadata,
    )
    by_id: dict[str, Round] = {}
    posts = 0
    for item in parsed.rounds:
        round_, _ = round_create(
            session=session, user_query=item["user_query"], round_id=item["id"], state=item["state"]
        )
        by_id[round_.round_id] = round_
        if not item["post_list"]:
            continue
        records = [
            {
                "role": post_role(post["send_from"]),
                "content": post["message"],
                "send_from": post["send_from"],
                "send_to": post["send_to"],
                "post_id": post["id"],
            }
            for post in item["post_list"]
        ]
        appended = services.message_append(session=session, messages=records, path="", round_id=round_.pk).messages
        for message, post in zip(appended, item["post_list"], strict=True):
            attachments = _create_attachments(message=message, items=post["attachment_list"])
            _record_carried_entries(round_=round_, message=message, attachments=attachments)
        posts += len(appended)
    for entry in parsed.shared_memory:
        entry_round = by_id.get(entry["round"]) if entry["round"] else None
        _entry_insert(
            session=session,
            round_=entry_round,
            type=entry["type"],
            content=entry["content"],
            scope=entry["scope"],
            entry_id=entry["id"],
            created_by=entry["created_by"],
        )
    event_record(
        team_id=team.pk,
        session=session,
        kind=MemoryEvent.Kind.IMPORTED,
        data={"rounds": len(parsed.rounds), "messages": posts, "dropped": len(parsed.warnings)},
    )
    return session
