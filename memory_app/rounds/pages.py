"""Dashboard pages for multi-agent memory: a session's rounds, and each agent's work record.

Read-only and scoped like every session page (`views.team_page`: the user's current team,
another team's session is a 404). Each page reads a fixed number of queries whatever it
holds: rounds, their posts and attachments come from round_selectors.round_page (three
queries), an agent's entries from agent_memory_selectors.agent_memory_timeline (one).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from memory_app.agent_records import selectors as agent_memory_selectors
from memory_app.agent_records.models import AgentMemory, AgentMemoryEntry
from memory_app.conversations import selectors as session_selectors
from memory_app.conversations.models import Session
from memory_app.dashboard.decorators import get_or_404, non_negative_int, team_page
from memory_app.dashboard.message_content import pretty_json
from memory_app.dashboard.role_colours import ROLE_PALETTE as ROLE_PALETTE  # re-exported: its tests read it here
from memory_app.dashboard.role_colours import role_hue
from memory_app.rounds import selectors as round_selectors
from memory_app.rounds.models import Attachment, Post, Round, SharedMemoryEntry
from memory_app.tenancy.models import Team

ROUNDS_PER_PAGE = 20

# TaskWeaver's AttachmentType, grouped as its definition lists them: the group names the badge colour.
ATTACHMENT_GROUPS: dict[str, str] = {
    **dict.fromkeys(("plan", "current_plan_step", "plan_reasoning", "stop"), "planner"),
    **dict.fromkeys(("thought", "reply_type", "reply_content", "verification"), "code"),
    **dict.fromkeys(
        ("code_error", "execution_status", "execution_result", "artifact_paths", "revise_message"), "execution"
    ),
    "function": "function",
    **dict.fromkeys(("web_exploring_plan", "web_exploring_screenshot", "web_exploring_link"), "web"),
    **dict.fromkeys(("session_variables", "shared_memory_entry"), "shared"),
    **dict.fromkeys(("invalid_response", "text", "image_url"), "misc"),
}
# Shown as code (monospace, whitespace kept) rather than prose.
CODE_ATTACHMENTS = frozenset({"reply_content", "code_error", "execution_result", "artifact_paths", "function"})


# --- the round view ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttachmentView:
    type: str
    group: str
    content: str
    is_code: bool
    extra: str  # pretty JSON, "" when there is none


@dataclass(frozen=True)
class PostView:
    seq: int
    send_from: str
    send_to: str
    from_hue: int
    to_hue: int
    text: str
    attachments: list[AttachmentView]


@dataclass(frozen=True)
class RoundView:
    round: Round
    posts: list[PostView]
    roles: list[str] = field(default_factory=list)  # everyone who sent or received a post


def _attachment_view(attachment: Attachment) -> AttachmentView:
    return AttachmentView(
        type=attachment.type,
        group=ATTACHMENT_GROUPS.get(attachment.type, "misc"),
        content=attachment.content,
        is_code=attachment.type in CODE_ATTACHMENTS,
        extra=pretty_json(attachment.extra) if attachment.extra not in (None, "", {}, []) else "",
    )


def _post_view(post: Post) -> PostView:
    shape = round_selectors.post_dict(post)
    return PostView(
        seq=post.message.seq,
        send_from=shape["send_from"],
        send_to=shape["send_to"],
        from_hue=role_hue(shape["send_from"]),
        to_hue=role_hue(shape["send_to"]),
        text=shape["message"],
        attachments=[_attachment_view(a) for a in post.attachments],
    )


def _round_view(round_: Round) -> RoundView:
    posts = [_post_view(post) for post in round_.posts_read]
    roles: list[str] = []
    for post in posts:
        for role in (post.send_from, post.send_to):
            if role and role not in roles:
                roles.append(role)
    return RoundView(round=round_, posts=posts, roles=roles)


@dataclass(frozen=True)
class EntryView:
    entry: SharedMemoryEntry
    in_effect: bool  # what get_shared_memory_entries returns now
    by_hue: int


def _shared_memory(session: Session) -> list[EntryView]:
    effective = {entry.pk for entry in round_selectors.shared_memory_entries(session=session)}
    return [
        EntryView(entry, entry.pk in effective, role_hue(entry.created_by))
        for entry in round_selectors.shared_memory_list(session=session)
    ]


def _agents(session: Session) -> list[dict[str, Any]]:
    return [
        {"name": memory.agent, "hue": role_hue(memory.agent)}
        for memory in agent_memory_selectors.agent_memory_list(session=session)
    ]


@team_page
def session_rounds(request: HttpRequest, session_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    session = get_or_404(session_selectors.session_get, team=team, session_id=session_id)
    after = non_negative_int(request.GET.get("after"))
    page = round_selectors.round_page(session=session, after=after, limit=ROUNDS_PER_PAGE)
    return render(
        request,
        "memory_app/rounds.html",
        {
            "team": team,
            "teams": teams,
            "session": session,
            "rounds": [_round_view(round_) for round_ in page.rounds],
            "next_after": page.next_after,
            "paged": after is not None,
            "shared_memory": _shared_memory(session),
            "agents": _agents(session),
        },
    )


# --- one agent's memory -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TimelineItem:
    kind: str  # discovery, attempt, decision
    entry_id: str
    timestamp: datetime | None
    data: dict[str, Any]
    lessons: list[str]
    alternatives: list[tuple[str, str]]  # (name, why not)
    next_step: str

    @property
    def is_failure(self) -> bool:
        return self.kind == AgentMemoryEntry.Kind.ATTEMPT and self.data.get("result") == "failure"


def _strings(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]


def _alternatives(value: Any) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict):
            found.append((str(item.get("name", "")), str(item.get("reason") or "")))
        else:
            found.append((str(item), ""))
    return found


def _timeline_items(rows: Sequence[AgentMemoryEntry]) -> list[TimelineItem]:
    return [
        TimelineItem(
            kind=row.kind,
            entry_id=row.entry_id,
            timestamp=row.timestamp,
            data=row.data if isinstance(row.data, dict) else {},
            lessons=_strings(row.data.get("lessons")) if isinstance(row.data, dict) else [],
            alternatives=_alternatives(row.data.get("alternatives")) if isinstance(row.data, dict) else [],
            next_step=str(row.data.get("nextStep") or row.data.get("nextAttempt") or "")
            if isinstance(row.data, dict)
            else "",
        )
        for row in rows
    ]


def _team_agent_memory(session: Session, agent: str) -> AgentMemory:
    return get_or_404(agent_memory_selectors.agent_memory_get, session=session, agent=agent)


@team_page
def agent_memory(
    request: HttpRequest, session_id: uuid.UUID, agent: str, *, team: Team, teams: list[Team]
) -> HttpResponse:
    session = get_or_404(session_selectors.session_get, team=team, session_id=session_id)
    memory = _team_agent_memory(session, agent)
    timeline = agent_memory_selectors.agent_memory_timeline(memory=memory)
    live = _timeline_items(timeline.live)
    context = memory.header.get("context") if isinstance(memory.header.get("context"), dict) else {}
    history = memory.header.get("history") if isinstance(memory.header.get("history"), list) else []
    counts = {kind: sum(1 for item in live if item.kind == kind) for kind in AgentMemoryEntry.Kind.values}
    return render(
        request,
        "memory_app/agent_memory.html",
        {
            "team": team,
            "teams": teams,
            "session": session,
            "memory": memory,
            "hue": role_hue(memory.agent),
            "agents": _agents(session),
            "timeline": live,
            "archived": _timeline_items(timeline.archived),
            "counts": counts,
            "failures": sum(1 for item in live if item.is_failure),
            "context": context,
            "history": [item for item in history if isinstance(item, dict)],
        },
    )
