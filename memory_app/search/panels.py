"""What recall shows outside the search page: the link from an indexed item to the page of its
source (and of its session), and the session page's panel of what recall injected into the
session's served contexts. The search page (memory_app/search/pages.py) and the session page (a
conversations page) both read them, so they live below the pages: no domain imports another
domain's pages.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.apps import apps
from django.db.models import Q
from django.urls import reverse

from memory_app.agent_records.models import AgentMemoryEntry
from memory_app.conversations.models import Session
from memory_app.dashboard.links import message_url
from memory_app.search.models import SearchItem, SearchKind
from memory_app.tenancy.models import Team
from memory_app.usage.models import ContextServe

# The served contexts with recalled memories the session page lists, newest first.
RECALL_SERVES_SHOWN = 10
RECALL_TEXT_CHARS = 240

# What a kind is called on a hit or a recalled memory (its badge).
KIND_BADGES: dict[str, str] = {
    SearchKind.MESSAGE: "message",
    SearchKind.SUMMARY: "summary",
    SearchKind.FACT: "fact",
    SearchKind.RECORD: "record",
    SearchKind.EXPERIENCE: "experience",
    SearchKind.SHARED_MEMORY: "shared memory",
    SearchKind.ATTACHMENT: "attachment",
    SearchKind.MEMORY_FILE: "memory file",
}


@dataclass(frozen=True)
class SourceLink:
    url: str  # "" when the source has no page of its own (or is gone)
    label: str
    session_url: str = ""
    session_label: str = ""


def _session_label(session_id: Any, names: Mapping[str, str | None]) -> str:
    return names.get(str(session_id)) or str(session_id)[:8]


def source_links(*, team: Team, items: Sequence[SearchItem]) -> list[SourceLink]:
    """The page of each item's source, and of its session, in a few batched lookups: the names of
    the sessions, the record entries' own ids (the agent memory page's anchors), the experiences'
    exp_ids (their pages' slugs). Every lookup stays inside `team`."""
    session_ids = {item.session_id for item in items if item.session_id}
    names = {
        str(pk): external_id
        for pk, external_id in Session.objects.filter(team=team, pk__in=session_ids).values_list("pk", "external_id")
    }
    entry_ids = {item.record_entry_id for item in items if item.kind == SearchKind.RECORD and item.record_entry_id}
    entries = {
        pk: (entry_id, archived_at)
        for pk, entry_id, archived_at in AgentMemoryEntry.objects.filter(team=team, pk__in=entry_ids).values_list(
            "pk", "entry_id", "archived_at"
        )
    }
    experiences = _experience_slugs(
        team,
        {int(item.source_key) for item in items if item.kind == SearchKind.EXPERIENCE and item.source_key.isdigit()},
    )
    links = []
    for item in items:
        link = _source_link(item, entries=entries, experiences=experiences)
        if item.session_id and str(item.session_id) in names:
            link = SourceLink(
                url=link.url,
                label=link.label,
                session_url=reverse("dashboard:session", args=[item.session_id]),
                session_label=_session_label(item.session_id, names),
            )
        links.append(link)
    return links


def _experience_slugs(team: Team, pks: set[int]) -> dict[int, str]:
    """exp_id by primary key. Experiences live in an app memory_app may not import; the app
    registry hands over its model without an import."""
    if not pks:
        return {}
    try:
        experience = apps.get_model("experiences_app", "Experience")
    except LookupError:  # a deployment without the experiences app
        return {}
    return dict(experience.objects.filter(team=team, pk__in=pks).values_list("pk", "exp_id"))


def _source_link(
    item: SearchItem, *, entries: Mapping[int, tuple[str, datetime | None]], experiences: Mapping[int, str]
) -> SourceLink:
    kind = item.kind
    if kind in (SearchKind.MESSAGE, SearchKind.ATTACHMENT) and item.session_id:
        what = "message" if kind == SearchKind.MESSAGE else "attachment of message"
        return SourceLink(url=message_url(item.session_id, item.seq), label=f"{what} #{item.seq}")
    if kind == SearchKind.SUMMARY and item.session_id:
        anchor = f"#run-{item.compaction_run_id}" if item.compaction_run_id else "#compactions"
        return SourceLink(url=reverse("dashboard:session", args=[item.session_id]) + anchor, label="compaction summary")
    if kind == SearchKind.FACT and item.fact_id:
        return SourceLink(url=reverse("dashboard:fact", args=[item.fact_id]), label="open fact")
    if kind == SearchKind.RECORD and item.session_id and item.agent:
        url = reverse("dashboard:agent_memory", args=[item.session_id, item.agent])
        entry = entries.get(item.record_entry_id) if item.record_entry_id else None
        if entry is not None:
            entry_id, archived_at = entry
            url += "#" + ("archived-" if archived_at else "") + entry_id
        return SourceLink(url=url, label=f"{item.agent}'s {item.role or 'record'}")
    if kind == SearchKind.EXPERIENCE and item.source_key.isdigit():
        slug = experiences.get(int(item.source_key))
        if slug:
            return SourceLink(url=reverse("experiences:detail", args=[slug]), label=f"experience {slug}")
    if kind == SearchKind.SHARED_MEMORY and item.session_id:
        return SourceLink(url=reverse("dashboard:session_rounds", args=[item.session_id]), label="shared memory")
    if kind == SearchKind.MEMORY_FILE and item.source_key.isdigit():
        url = reverse("dashboard:memory_file", args=[int(item.source_key)])
        return SourceLink(url=url, label=f"{item.agent or 'shared'} memory file")
    return SourceLink(url="", label=KIND_BADGES.get(kind, kind))


# --- the session page's panel: what recall injected into its served contexts -------------------


@dataclass(frozen=True)
class RecalledMemory:
    kind: str
    badge: str
    source_id: str
    score: float | None
    text: str  # the start of the item's text; "" when it is no longer indexed
    link: SourceLink


@dataclass(frozen=True)
class ServedRecall:
    served_at: datetime
    agent: str
    query: str
    served_tokens: int
    memories: list[RecalledMemory]


def _stand_in(team: Team, memory: Mapping[str, Any]) -> SearchItem:
    """An unsaved item made of what the ledger kept, for a memory no longer indexed: enough for
    the links that need only its kind, id, session and seq."""
    kind, source_id = str(memory.get("kind") or ""), str(memory.get("id") or "")
    seq = memory.get("seq")
    return SearchItem(
        team=team,
        kind=kind,
        source_key=source_id,
        session_id=_uuid_or_none(memory.get("session")),
        seq=seq if isinstance(seq, int) else None,
        fact_id=_uuid_or_none(source_id) if kind == SearchKind.FACT else None,
        compaction_run_id=_uuid_or_none(source_id) if kind == SearchKind.SUMMARY else None,
    )


def _uuid_or_none(value: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


def session_recalls(*, team: Team, session: Session, limit: int = RECALL_SERVES_SHOWN) -> list[ServedRecall]:
    """The session's latest served contexts into which recall put memories, with each memory's
    source. One query, and two or three more only when there is something to show."""
    serves = list(
        ContextServe.objects.filter(session=session, team=team)
        .exclude(Q(recalled=[]) | Q(recalled__isnull=True))
        .order_by("-created_at", "-pk")[:limit]
    )
    if not serves:
        return []
    memories = [m for serve in serves for m in serve.recalled if isinstance(m, Mapping)]
    item_ids = {m["item_id"] for m in memories if isinstance(m.get("item_id"), int)}
    items = {item.pk: item for item in SearchItem.objects.filter(team=team, pk__in=item_ids)}
    resolved = [items.get(m.get("item_id")) or _stand_in(team, m) for m in memories]  # type: ignore[arg-type]
    links = iter(source_links(team=team, items=resolved))
    views = iter(
        RecalledMemory(
            kind=item.kind,
            badge=KIND_BADGES.get(item.kind, item.kind),
            source_id=str(memory.get("id") or ""),
            score=memory.get("score") if isinstance(memory.get("score"), int | float) else None,
            text=_short(item.text),
            link=next(links),
        )
        for memory, item in zip(memories, resolved, strict=True)
    )
    return [
        ServedRecall(
            served_at=serve.created_at,
            agent=serve.agent,
            query=serve.recall_query,
            served_tokens=serve.served_tokens,
            memories=[next(views) for m in serve.recalled if isinstance(m, Mapping)],
        )
        for serve in serves
    ]


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= RECALL_TEXT_CHARS else flat[:RECALL_TEXT_CHARS].rstrip() + "…"
