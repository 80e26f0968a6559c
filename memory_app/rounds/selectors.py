"""Reads of the TaskWeaver-style multi-agent memory: rounds with their posts, role views, shared memory, export.

Rounds are read a page at a time in three queries (rounds, their posts, the posts'
attachments), whatever the page holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q

from memory_app.conversations.models import Message, Session
from memory_app.rounds.models import Attachment, Post, Round, SharedMemoryEntry
from memory_client.vocabulary.messages import content_text
from memsite.errors import NotFound

EXPORT_BATCH = 200  # rounds read per query by the export


def round_get(*, session: Session, round_id: str) -> Round:
    try:
        return Round.objects.select_related("session").get(session=session, round_id=round_id)
    except Round.DoesNotExist as exc:
        raise NotFound("Round not found.") from exc


def _role_filter(role: str) -> Q:
    return Q(send_from=role) | Q(send_to=role)


def attach_posts(rounds: Sequence[Round], *, role: str | None) -> None:
    """Set `round.posts_read`: its posts in seq order, each with its attachments in list order."""
    if not rounds:
        return
    posts = Message.objects.filter(round__in=[round_.pk for round_ in rounds])
    if role is not None:
        posts = posts.filter(_role_filter(role))
    messages = list(posts.order_by("seq"))
    attachments: dict[Any, list[Attachment]] = {}
    if messages:
        for attachment in Attachment.objects.filter(message__in=[m.pk for m in messages]).order_by(
            "message", "position"
        ):
            attachments.setdefault(attachment.message_id, []).append(attachment)
    # Keyed like Message.round_id (nullable), though every post read here is in one of `rounds`.
    round_ids: dict[int | None, str] = {round_.pk: round_.round_id for round_ in rounds}
    by_round: dict[int | None, list[Post]] = {}
    for message in messages:
        post = Post(message=message, attachments=attachments.get(message.pk, []), round_id=round_ids[message.round_id])
        by_round.setdefault(message.round_id, []).append(post)
    for round_ in rounds:
        round_.posts_read = by_round.get(round_.pk, [])


@dataclass(frozen=True)
class RoundPage:
    rounds: list[Round]  # with posts_read
    next_after: int | None  # the `after` cursor (a round order) of the next page


def round_page(
    *,
    session: Session,
    role: str | None = None,
    include_failure_rounds: bool = True,
    after: int | None = None,
    limit: int = 100,
) -> RoundPage:
    """The session's rounds in order with their posts and attachments.

    With `role`: TaskWeaver's get_role_rounds, every round (its id, user query and state), each
    holding only the posts that role sent or received: a round without one keeps an empty post
    list, as TaskWeaver's does. `include_failure_rounds=False` leaves failed rounds out.
    """
    rounds = Round.objects.filter(session=session)
    if not include_failure_rounds:
        rounds = rounds.exclude(state=Round.State.FAILED)
    if after is not None:
        rounds = rounds.filter(order__gt=after)
    page = list(rounds.order_by("order")[: limit + 1])
    has_more = len(page) > limit
    page = page[:limit]
    attach_posts(page, role=role)
    return RoundPage(rounds=page, next_after=page[-1].order if has_more else None)


def shared_memory_entries(
    *, session: Session, entry_type: str | None = None, latest_per_role: bool = True
) -> list[SharedMemoryEntry]:
    """TaskWeaver's get_shared_memory_entries.

    Conversation-scoped entries count from every round, round-scoped ones only from the
    current (latest) round. As in TaskWeaver's Memory, only each role's latest matching entry
    is kept (a newer plan replaces the role's older one), ordered by when those were
    written; `latest_per_role=False` returns every matching entry.
    """
    current = Round.objects.filter(session=session).order_by("-order").values("pk")[:1]
    entries = SharedMemoryEntry.objects.filter(session=session).filter(
        Q(scope=SharedMemoryEntry.Scope.CONVERSATION) | Q(scope=SharedMemoryEntry.Scope.ROUND, round=current)
    )
    if entry_type is not None:
        entries = entries.filter(type=entry_type)
    found = list(entries.select_related("round").order_by("id"))
    if not latest_per_role:
        return found
    latest: dict[tuple[str, str], SharedMemoryEntry] = {}
    for entry in found:
        latest[(entry.type, entry.created_by)] = entry
    return sorted(latest.values(), key=lambda entry: entry.pk)


# --- TaskWeaver shapes (to_dict) -------------------------------------------------------------


def attachment_dict(attachment: Attachment) -> dict[str, Any]:
    return {
        "id": attachment.attachment_id,
        "type": attachment.type,
        "content": attachment.content,
        "extra": attachment.extra,
    }


def post_dict(post: Post) -> dict[str, Any]:
    """Post.to_dict of a post (its message and attachments)."""
    message = post.message
    content = message.content
    return {
        "id": message.post_id or f"post-{message.pk.hex[:12]}",
        "message": content if isinstance(content, str) else content_text(content),
        "send_from": message.send_from or "",
        "send_to": message.send_to or "",
        "attachment_list": [attachment_dict(a) for a in post.attachments],
    }


def round_dict(round_: Round) -> dict[str, Any]:
    """Round.to_dict (reads `posts_read`)."""
    return {
        "id": round_.round_id,
        "user_query": round_.user_query,
        "state": round_.state,
        "post_list": [post_dict(post) for post in getattr(round_, "posts_read", [])],
    }


def entry_dict(entry: SharedMemoryEntry) -> dict[str, Any]:
    """SharedMemoryEntry.to_dict plus where it lives and who wrote it."""
    return {
        "type": entry.type,
        "content": entry.content,
        "scope": entry.scope,
        "id": entry.entry_id,
        "round": entry.round.round_id if entry.round is not None else None,
        "created_by": entry.created_by,
    }


def conversation_export(*, session: Session) -> dict[str, Any]:
    """Conversation.to_dict of the session, lossless for an imported one.

    Conversation.to_dict's keys (id, plugins, enabled, rounds) come first; memsite adds `session`
    (system prompt, external id, metadata) and, when there are entries not carried by an
    attachment, `shared_memory`.
    """
    metadata = dict(session.metadata or {})
    header = metadata.pop("conversation", None) or {}
    document: dict[str, Any] = {
        "id": header.get("id", f"conv-{session.pk.hex[:12]}"),
        "plugins": header.get("plugins", []),
        "enabled": header.get("enabled", True),
    }
    document.update({key: value for key, value in header.items() if key not in document})
    rounds: list[dict[str, Any]] = []
    after = 0
    while True:
        batch = list(Round.objects.filter(session=session, order__gt=after).order_by("order")[:EXPORT_BATCH])
        attach_posts(batch, role=None)
        rounds.extend(round_dict(round_) for round_ in batch)
        if len(batch) < EXPORT_BATCH:
            break
        after = batch[-1].order
    document["rounds"] = rounds
    standalone = SharedMemoryEntry.objects.filter(session=session, attachment__isnull=True).select_related("round")
    entries = [entry_dict(entry) for entry in standalone.order_by("id")]
    if entries:
        document[SHARED_MEMORY_KEY] = entries
    document[SESSION_KEY] = {
        "external_id": session.external_id,
        "system_prompt": session.system_prompt,
        "metadata": metadata,
    }
    return document


def shared_memory_list(*, session: Session) -> list[SharedMemoryEntry]:
    """Every shared-memory entry of the session, in the order written, with its round."""
    return list(SharedMemoryEntry.objects.filter(session=session).select_related("round").order_by("id"))


# Top-level keys of an exported conversation that are memsite's, not the conversation file format's.
SESSION_KEY = "session"


SHARED_MEMORY_KEY = "shared_memory"
