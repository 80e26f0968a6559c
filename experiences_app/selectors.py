"""Reads of experiences, their revisions, the team's selection settings and the selection log."""

from __future__ import annotations

import difflib
import json
import re
import uuid
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from experiences_app.models import Experience, ExperienceRevision, SelectionLog, TeamExperienceConfig
from experiences_app.selection import DEFAULT_SELECTION_TEMPLATE
from memory_app.conversations.models import Message, Session
from memory_app.rounds.models import Round
from memory_app.tenancy.models import Team
from memory_client.vocabulary.messages import content_text
from memsite.errors import NotFound

DIFF_FIELDS = ("exp_id", "who", "when", "what", "status")
OFFLINE_ALIAS = "offline"
LLM_ALIASES = ("", OFFLINE_ALIAS)  # "" = the configured LLM (memory_app.llm.get_backend())
_CONTEXT_LINE_CHARS = 500
_FILE_PART = re.compile(r"[^A-Za-z0-9_-]+")


# --- roles -----------------------------------------------------------------------------------


# The experience configuration's switches, `<switch>.use_experience`, and the role each governs.
# The configuration names a switch after the role's configuration section, not its name: the
# CodeInterpreter role's section is `code_generator`. Either spelling works as a key; a role not
# listed here is switched by its own name.
USE_EXPERIENCE_SWITCHES: dict[str, str] = {"planner": "Planner", "code_generator": "CodeInterpreter"}


def role_key(role: str) -> str:
    """How a role is compared: trimmed and case-folded ("Planner" targets the role "planner")."""
    return role.strip().lower()


def roles_key(who: list[str]) -> str:
    """The stored form of `who` the database filters on: "|a|b|", or "" for every role."""
    return "".join(f"|{role_key(role)}" for role in who) + "|" if who else ""


def targets_role(who: list[str], role: str) -> bool:
    return not who or role_key(role) in {role_key(item) for item in who}


def _for_role(experiences: QuerySet[Experience], role: str) -> QuerySet[Experience]:
    return experiences.filter(Q(roles_key="") | Q(roles_key__contains=f"|{role_key(role)}|"))


# --- experiences -----------------------------------------------------------------------------


def experience_get(*, team: Team, exp_id: str) -> Experience:
    """The team's experience, or NotFound: another team's exp_id is indistinguishable from none."""
    try:
        return Experience.objects.get(team=team, exp_id=exp_id)
    except Experience.DoesNotExist as exc:
        raise NotFound("Experience not found.") from exc


def experience_list(
    *, team: Team, role: str | None = None, status: str | None = None, q: str | None = None
) -> QuerySet[Experience]:
    """The team's experiences by exp_id; `role` keeps those targeting it (empty `who` targets all)."""
    experiences = Experience.objects.filter(team=team)
    if role:
        experiences = _for_role(experiences, role)
    if status:
        experiences = experiences.filter(status=status)
    if q:
        experiences = experiences.filter(Q(exp_id__icontains=q) | Q(when__icontains=q) | Q(what__icontains=q))
    return experiences.order_by("exp_id")


def experience_roles(*, team: Team) -> list[str]:
    """Every role named in the team's experiences' `who`, sorted case-insensitively (for pickers)."""
    roles: dict[str, str] = {}
    for who in Experience.objects.filter(team=team).exclude(roles_key="").values_list("who", flat=True):
        for role in who:
            roles.setdefault(role_key(role), role)
    return sorted(roles.values(), key=str.lower)


def experience_candidates(*, team: Team, role: str) -> list[Experience]:
    """Approved experiences whose `who` names the role or is empty, by exp_id (the selection's `who` filter)."""
    rows = _for_role(Experience.objects.filter(team=team, status=Experience.Status.APPROVED), role).only(
        "exp_id", "who", "when", "what"
    )
    # The LIKE above is a prefilter; a role containing "|" could match a neighbour's key.
    return [exp for exp in rows.order_by("exp_id") if targets_role(exp.who, role)]


def experience_revisions(*, experience: Experience) -> QuerySet[ExperienceRevision]:
    return experience.revisions.order_by("-number")


def experience_revision_get(*, experience: Experience, number: int) -> ExperienceRevision:
    try:
        return experience.revisions.get(number=number)
    except ExperienceRevision.DoesNotExist as exc:
        raise NotFound(f"Revision {number} of {experience.exp_id} not found.") from exc


def _diff_lines(revision: ExperienceRevision, field: str) -> list[str]:
    value = getattr(revision, field)
    if field == "who":
        return list(value) or ["(every role)"]
    return str(value).split("\n")


def experience_revision_diff(*, experience: Experience, a: int, b: int) -> dict[str, str]:
    """A unified diff per field from revision `a` to revision `b` ("" where the field did not change)."""
    old = experience_revision_get(experience=experience, number=a)
    new = experience_revision_get(experience=experience, number=b)
    diffs: dict[str, str] = {}
    for field in DIFF_FIELDS:
        lines = difflib.unified_diff(
            _diff_lines(old, field),
            _diff_lines(new, field),
            fromfile=f"{field} (r{a})",
            tofile=f"{field} (r{b})",
            lineterm="",
        )
        diffs[field] = "\n".join(lines)
    return diffs


# --- settings --------------------------------------------------------------------------------


def experience_config_get(*, team: Team) -> TeamExperienceConfig:
    """The team's settings; an unsaved default (every role uses experiences) until someone saves them."""
    config = TeamExperienceConfig.objects.filter(team=team).first()
    return config or TeamExperienceConfig(team=team)


def config_template(config: TeamExperienceConfig) -> str:
    return config.selection_template or DEFAULT_SELECTION_TEMPLATE


def switch_role(switch: str) -> str:
    """The role a `<switch>.use_experience` key governs: the mapped role, else the role of that name."""
    return USE_EXPERIENCE_SWITCHES.get(role_key(switch), switch)


def role_switches(role: str) -> list[str]:
    """The switch names of USE_EXPERIENCE_SWITCHES that govern `role` (none for most roles)."""
    return [switch for switch, governed in USE_EXPERIENCE_SWITCHES.items() if role_key(governed) == role_key(role)]


@dataclass(frozen=True)
class UseExperience:
    """Whether a role uses experiences, and the `use_experience` key that says so ("" = none: the default)."""

    enabled: bool
    key: str = ""


def config_use_experience(config: TeamExperienceConfig, role: str) -> UseExperience:
    """`<role>.use_experience` for `role`: its own name (exact, then case-folded) first, then the
    switch that governs it (`code_generator` for CodeInterpreter); unlisted roles use experiences."""
    flags = config.use_experience or {}
    if role in flags:
        return UseExperience(bool(flags[role]), role)
    folded = {role_key(name): name for name in flags}
    for name in (role, *role_switches(role)):
        if role_key(name) in folded:
            key = folded[role_key(name)]
            return UseExperience(bool(flags[key]), key)
    return UseExperience(True)


def config_uses_experience(config: TeamExperienceConfig, role: str) -> bool:
    return config_use_experience(config, role).enabled


def switch_conflicts(flags: Mapping[str, bool]) -> list[str]:
    """One message per role that two spellings of its switch set differently (e.g. code_generator
    and CodeInterpreter): which one wins would be a guess, so the settings refuse it."""
    by_role: dict[str, list[str]] = {}
    for name in flags:
        by_role.setdefault(role_key(switch_role(name)), []).append(name)
    problems = []
    for names in by_role.values():
        if len({bool(flags[name]) for name in names}) > 1:
            spelled = " and ".join(f"{name!r}" for name in names)
            problems.append(f"{spelled} both set use_experience for role {switch_role(names[0])!r}, differently")
    return problems


# --- the context of a selection -------------------------------------------------------------


def session_role_context(*, session: Session, role: str) -> str:
    """The recent conversation the role took part in, oldest first, bounded in messages and characters.

    Like TaskWeaver's `memory.get_role_rounds(role, include_failure_rounds=False)`: messages sent
    from or to the role, never a post of a failed round; a session without multi-agent addressing
    (no message names the role) gives its recent messages instead, with the same rule.
    """
    limit = settings.EXPERIENCE_CONTEXT_MESSAGES
    fields = ("role", "content", "send_from", "send_to")
    messages = (
        Message.objects.filter(session=session)
        .exclude(role=Message.Role.SYSTEM)
        .exclude(round__state=Round.State.FAILED)  # messages outside any round stay
    )
    addressed = Q(send_from__iexact=role.strip()) | Q(send_to__iexact=role.strip())
    rows = list(messages.filter(addressed).order_by("-seq").values(*fields)[:limit])
    if not rows:
        rows = list(messages.order_by("-seq").values(*fields)[:limit])
    lines: list[str] = []
    budget = settings.EXPERIENCE_CONTEXT_MAX_CHARS
    for row in rows:  # newest first, so the budget keeps the most recent
        text = " ".join(content_text(row["content"]).split())
        if len(text) > _CONTEXT_LINE_CHARS:
            text = text[: _CONTEXT_LINE_CHARS - 1] + "…"
        speaker = row["send_from"] or row["role"]
        line = f"{speaker} -> {row['send_to']}: {text}" if row["send_to"] else f"{speaker}: {text}"
        if len(line) + 1 > budget:
            break
        budget -= len(line) + 1
        lines.append(line)
    return "\n".join(reversed(lines))


# --- the selection log -----------------------------------------------------------------------


def selection_log_list(
    *, team: Team, role: str | None = None, session: Session | None = None
) -> QuerySet[SelectionLog]:
    logs = SelectionLog.objects.filter(team=team)
    if role:
        logs = logs.filter(role=role)
    if session is not None:
        logs = logs.filter(session=session)
    return logs.order_by("-created_at", "-pk")


def selection_log_get(*, team: Team, log_id: uuid.UUID | str) -> SelectionLog:
    try:
        return SelectionLog.objects.get(team=team, pk=log_id)
    except (SelectionLog.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound("Selection not found.") from exc


@dataclass(frozen=True)
class PromptLogFile:
    name: str
    content: bytes


def _file_part(value: str, default: str) -> str:
    return _FILE_PART.sub("-", value).strip("-")[:60] or default


def selection_log_file(*, log: SelectionLog) -> PromptLogFile:
    """The selection's prompt log: the prompt messages as JSON, named
    `{role}_experience_selection_log_{round}_{post}.json` (role lower-cased; "0" for a missing part)."""
    role = _file_part(log.role.lower(), "role")
    name = f"{role}_experience_selection_log_{_file_part(log.round_id, '0')}_{_file_part(log.post_id, '0')}.json"
    content = json.dumps(log.messages, ensure_ascii=False, indent=2).encode()
    return PromptLogFile(name=name, content=content)


@dataclass(frozen=True)
class ExperienceUsage:
    """How many selections offered an experience as a candidate and how many chose it."""

    candidate_7d: int = 0
    selected_7d: int = 0
    candidate_30d: int = 0
    selected_30d: int = 0


USAGE_WINDOWS = (7, 30)  # days


def experience_usage(
    *, team: Team, exp_ids: Collection[str] | None = None, now: datetime | None = None
) -> dict[str, ExperienceUsage]:
    """Candidate and selected counts per exp_id over the last 7 and 30 days, in ONE query.

    The ids live inside JSON lists (SelectionLog.candidates / selected), which SQLite and
    PostgreSQL cannot unnest the same way, so the 30-day rows stream once (only those two
    columns and the time) and are counted here. `exp_ids` limits the answer (e.g. one page).
    """
    now = now or timezone.now()
    week_start = now - timedelta(days=USAGE_WINDOWS[0])
    rows = (
        SelectionLog.objects.filter(team=team, created_at__gte=now - timedelta(days=USAGE_WINDOWS[1]))
        .values_list("created_at", "candidates", "selected")
        .iterator(chunk_size=2000)
    )
    # Keyed by the stored JSON's exp_id, None where a candidate lacks one.
    counts: dict[str, Counter[str | None]] = {name: Counter() for name in ExperienceUsage.__dataclass_fields__}
    for created_at, candidates, selected in rows:
        recent = created_at >= week_start
        offered = {c.get("exp_id") for c in candidates or [] if isinstance(c, dict)}
        chosen = set(selected or [])
        counts["candidate_30d"].update(offered)
        counts["selected_30d"].update(chosen)
        if recent:
            counts["candidate_7d"].update(offered)
            counts["selected_7d"].update(chosen)
    wanted = set(exp_ids) if exp_ids is not None else set().union(*(c.keys() for c in counts.values()))
    return {
        exp_id: ExperienceUsage(**{name: counter[exp_id] for name, counter in counts.items()})
        for exp_id in wanted
        if isinstance(exp_id, str)
    }
