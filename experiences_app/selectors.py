"""Reads of experiences, their revisions, the team's selection settings and the selection log."""

from __future__ import annotations

import difflib
import json
import re
import uuid
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, F, OuterRef, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from experiences_app.models import (
    Experience,
    ExperienceReview,
    ExperienceRevision,
    SelectionLog,
    TeamExperienceConfig,
)
from experiences_app.selection import DEFAULT_SELECTION_TEMPLATE
from experiences_app.word_diff import DiffRow, diff_text
from memory_app.agent_records.selectors import agent_sightings
from memory_app.conversations.models import Message, Session
from memory_app.rounds.models import Round
from memory_app.tenancy.models import Team
from memory_client.vocabulary.messages import content_text
from memsite.errors import NotFound

DIFF_FIELDS = ("exp_id", "who", "when", "what", "status")
CONTENT_DIFF_FIELDS = ("who", "when", "what")
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
        return _with_serving_number(Experience.objects.filter(team=team)).get(exp_id=exp_id)
    except Experience.DoesNotExist as exc:
        raise NotFound("Experience not found.") from exc


def _with_serving_number(experiences: QuerySet[Experience]) -> QuerySet[Experience]:
    return experiences.annotate(serving_number=F("serving_revision__number"))


def serving_revision_number(experience: Experience) -> int | None:
    """The number of the approved revision selection serves (None: none), read from the
    annotation the selectors add, else from the row."""
    if hasattr(experience, "serving_number"):
        return experience.serving_number
    if experience.status == Experience.Status.APPROVED:
        return experience.revision
    served = experience.serving_revision
    return served.number if served is not None else None


@dataclass(frozen=True)
class ServingState:
    """What an experience means to selection, in the words every page shows it with."""

    status: str  # the status pill's class: the state selection sees ("approved" while a revision serves)
    label: str  # "Approved r2 serving", "Draft r1", "Disabled"
    pending: str = ""  # "r3 awaiting review": an edit the serving revision stands in for

    @property
    def serving(self) -> bool:
        return self.status == Experience.Status.APPROVED


def serving_state(experience: Experience) -> ServingState:
    """The one account of whether selection offers an experience, and with which revision: an
    approved experience edited since stays selected with its approved text, so it reads
    "Approved r2 serving · r3 awaiting review", never "draft"."""
    serving = serving_revision_number(experience)
    if serving is not None and experience.status != Experience.Status.DISABLED:
        waiting = f"r{experience.revision} awaiting review" if experience.revision != serving else ""
        return ServingState(Experience.Status.APPROVED, f"Approved r{serving} serving", waiting)
    if experience.status == Experience.Status.DISABLED:
        return ServingState(Experience.Status.DISABLED, "Disabled")
    return ServingState(Experience.Status.DRAFT, f"Draft r{experience.revision}, not served")


def awaiting_review_while_serving(experience: Experience) -> bool:
    """A draft whose approved revision still serves: an edit of an approved experience awaiting review."""
    return experience.status == Experience.Status.DRAFT and experience.serving_revision_id is not None


def experience_list(
    *, team: Team, role: str | None = None, status: str | None = None, q: str | None = None
) -> QuerySet[Experience]:
    """The team's experiences by exp_id; `role` keeps those targeting it (empty `who` targets all)."""
    experiences = _with_serving_number(Experience.objects.filter(team=team))
    if role:
        experiences = _for_role(experiences, role)
    if status:
        experiences = experiences.filter(status=status)
    if q:
        experiences = experiences.filter(Q(exp_id__icontains=q) | Q(when__icontains=q) | Q(what__icontains=q))
    return experiences.order_by("exp_id")


def experience_roles(*, team: Team, exclude: Experience | None = None) -> list[str]:
    """Every role named in the team's experiences' `who` (but `exclude`'s), sorted case-insensitively."""
    roles: dict[str, str] = {}
    experiences = Experience.objects.filter(team=team).exclude(roles_key="")
    if exclude is not None:
        experiences = experiences.exclude(pk=exclude.pk)
    for who in experiences.values_list("who", flat=True):
        for role in who:
            roles.setdefault(role_key(role), role)
    return sorted(roles.values(), key=str.lower)


@dataclass(frozen=True)
class Candidate:
    """What a selection offers of one experience: the text of the revision it serves."""

    exp_id: str
    who: list[str]
    when: str
    what: str
    revision: int  # the ExperienceRevision served
    pending: bool = False  # a newer edit awaits review; this is the approved text
    trial: bool = False  # a draft offered only by a trial ("try this draft"), never by a real selection


@dataclass(frozen=True)
class KnownRole:
    name: str
    sources: tuple[str, ...]  # where the team's data names it, for the picker's hover text


def known_roles(*, team: Team, exclude: Experience | None = None) -> list[KnownRole]:
    """Every role name the team's data knows, case-insensitively deduplicated and sorted: agent
    names of its sessions, messages, agent records and API keys (the agents pages' sightings),
    roles of past selections, roles named by its experiences, and the roles its settings switch.
    The roles an experience's `who` is offered from; another one is a warning, not an error
    (see unknown_roles). `exclude` leaves out the roles only that experience names, so its own
    typo does not make itself known."""
    found: dict[str, tuple[str, set[str]]] = {}

    def add(name: str, source: str) -> None:
        if name and name.strip():
            found.setdefault(role_key(name), (name.strip(), set()))[1].add(source)

    for sighting in agent_sightings(team=team):
        add(sighting.agent, "API keys" if sighting.session_id is None else "sessions")
    for role in selection_log_roles(team=team):
        add(role, "selections")
    for role in experience_roles(team=team, exclude=exclude):
        add(role, "experiences")
    config = experience_config_get(team=team)
    for switch in (*USE_EXPERIENCE_SWITCHES, *(config.use_experience or {})):
        add(switch_role(switch), "settings")
    ordered = sorted(found.values(), key=lambda item: item[0].lower())
    return [KnownRole(name, tuple(sorted(sources))) for name, sources in ordered]


def unknown_roles(*, who: Sequence[str], known: Sequence[KnownRole]) -> dict[str, str]:
    """The roles of `who` that no agent of the team has, each with the closest known name ("" when
    none is close): a typo there would silently select nothing."""
    names = {role_key(role.name): role.name for role in known}
    unknown: dict[str, str] = {}
    for role in who:
        if role.strip() and role_key(role) not in names:
            close = difflib.get_close_matches(role_key(role), list(names), n=1, cutoff=0.75)
            unknown[role] = names[close[0]] if close else ""
    return unknown


def unknown_role_warnings(*, who: Sequence[str], known: Sequence[KnownRole]) -> list[str]:
    """What the form shows under `who` for each unknown role."""
    warnings = []
    for role, close in unknown_roles(who=who, known=known).items():
        text = f"No agent has the role {role!r} yet: this experience selects nothing until one does."
        warnings.append(text + (f" Did you mean {close!r}?" if close else ""))
    return warnings


def experience_candidates(*, team: Team, role: str, trial: Experience | None = None) -> list[Candidate]:
    """The experiences a selection for `role` offers, by exp_id: every approved one whose `who` names
    the role or is empty, with the text of its approved revision. An approved experience whose edit
    awaits review (a draft that still has a serving revision) is offered with its approved text.

    `trial` (a "try this draft" run) offers that experience's current text instead of, or besides,
    what it serves, when its current `who` targets the role."""
    status = Experience.Status
    approved = _for_role(Experience.objects.filter(team=team, status=status.APPROVED), role).only(
        "exp_id", "who", "when", "what", "revision"
    )
    found = {
        exp.exp_id: Candidate(exp.exp_id, list(exp.who), exp.when, exp.what, exp.revision)
        for exp in approved
        if targets_role(exp.who, role)  # the LIKE is a prefilter; a role containing "|" could match a neighbour
    }
    # Few rows: an edit of an approved experience, while it waits for review. Its roles are the
    # served revision's, which the experience's roles_key no longer describes, so they are checked here.
    pending = Experience.objects.filter(team=team, status=status.DRAFT, serving_revision__isnull=False).select_related(
        "serving_revision"
    )
    for exp in pending:
        served = exp.serving_revision
        if served is not None and targets_role(served.who, role):
            found[exp.exp_id] = Candidate(
                exp.exp_id, list(served.who), served.when, served.what, served.number, pending=True
            )
    if trial is not None:
        found.pop(trial.exp_id, None)
        if targets_role(trial.who, role):
            found[trial.exp_id] = Candidate(
                trial.exp_id, list(trial.who), trial.when, trial.what, trial.revision, trial=True
            )
    return [found[exp_id] for exp_id in sorted(found)]


# A selection's log names at most this many experiences it did not offer (a team may keep
# hundreds); the count beyond is kept as one more entry.
NOT_OFFERED_LISTED = 100


def experiences_not_offered(*, team: Team, role: str, offered: Collection[str]) -> list[dict[str, str]]:
    """Every experience of the team a selection for `role` did not offer to the LLM, by exp_id,
    with why: a draft never approved, disabled, or for other roles. What a selection leaves
    out is as telling as what it picks."""
    rows = (
        Experience.objects.filter(team=team)
        .exclude(exp_id__in=list(offered))
        .select_related("serving_revision")
        .order_by("exp_id")
        .only("exp_id", "who", "status", "revision", "serving_revision__who", "serving_revision__number")
    )
    out: list[dict[str, str]] = []
    for exp in rows[: NOT_OFFERED_LISTED + 1]:
        if len(out) == NOT_OFFERED_LISTED:
            total = Experience.objects.filter(team=team).exclude(exp_id__in=list(offered)).count()
            out.append({"exp_id": "", "reason": f"and {total - NOT_OFFERED_LISTED} more"})
            break
        out.append({"exp_id": exp.exp_id, "reason": _not_offered_reason(exp, role)})
    return out


def _not_offered_reason(exp: Experience, role: str) -> str:
    served = exp.serving_revision
    if exp.status == Experience.Status.DISABLED:
        return "disabled"
    if exp.status == Experience.Status.DRAFT and served is None:
        return f"draft r{exp.revision}: never approved"
    if exp.status == Experience.Status.DRAFT and served is not None:
        # An approved experience whose edit awaits review: the roles of the revision it serves count.
        return f"for {', '.join(served.who)}, not {role} (approved r{served.number})"
    return f"for {', '.join(exp.who)}, not {role}"


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


@dataclass(frozen=True)
class FieldDiff:
    field: str
    rows: list[DiffRow]


def _field_text(source: object, field: str) -> str:
    value = getattr(source, field)
    if field == "who":
        return "\n".join(value) or "(every role)"
    return str(value)


def content_word_diff(old: object, new: object, *, fields: Sequence[str] = CONTENT_DIFF_FIELDS) -> list[FieldDiff]:
    """The fields that differ between two versions of an experience (revisions or the experience
    itself), each as rows with the changed words marked (experiences_app.word_diff)."""
    diffs = []
    for field in fields:
        rows = diff_text(_field_text(old, field), _field_text(new, field))
        if rows:
            diffs.append(FieldDiff(field, rows))
    return diffs


def experience_revision_word_diff(*, experience: Experience, a: int, b: int) -> list[FieldDiff]:
    """What changed from revision `a` to revision `b`, word by word (the page's compare view)."""
    old = experience_revision_get(experience=experience, number=a)
    new = experience_revision_get(experience=experience, number=b)
    return content_word_diff(old, new, fields=("who", "when", "what", "status"))


# --- review ----------------------------------------------------------------------------------


def _rejected_current_revision() -> Exists:
    return Exists(
        ExperienceReview.objects.filter(
            experience=OuterRef("pk"), revision=OuterRef("revision"), decision=ExperienceReview.Decision.REJECTED
        )
    )


def review_queue(*, team: Team) -> QuerySet[Experience]:
    """Drafts awaiting a decision, oldest change first: a draft whose current revision was rejected
    waits for its author instead, until an edit makes a new revision."""
    return (
        _with_serving_number(Experience.objects.filter(team=team, status=Experience.Status.DRAFT))
        .exclude(_rejected_current_revision())
        .select_related("serving_revision")
        .order_by("updated_at", "exp_id")
    )


def rejected_drafts_count(*, team: Team) -> int:
    drafts = Experience.objects.filter(team=team, status=Experience.Status.DRAFT)
    return drafts.filter(_rejected_current_revision()).count()


def approved_bases(*, experiences: Sequence[Experience]) -> dict[int, ExperienceRevision]:
    """Per experience (by pk), the approved revision its pending text is reviewed against: the one
    selection serves, else the latest approved one in its history (none for a new draft). One
    query for those that serve nothing; `serving_revision` should be select_related."""
    bases: dict[int, ExperienceRevision] = {}
    others = []
    for exp in experiences:
        if exp.serving_revision_id is not None and exp.serving_revision is not None:
            bases[exp.pk] = exp.serving_revision
        else:
            others.append(exp.pk)
    if others:
        approved = ExperienceRevision.objects.filter(
            experience_id__in=others, status=Experience.Status.APPROVED
        ).order_by("experience_id", "-number")
        for revision in approved:
            bases.setdefault(revision.experience_id, revision)
    return bases


def latest_reviews(*, experiences: Sequence[Experience]) -> dict[int, ExperienceReview]:
    """The latest review decision per experience (by pk), one query."""
    latest: dict[int, ExperienceReview] = {}
    for review in ExperienceReview.objects.filter(experience__in=[e.pk for e in experiences]).order_by(
        "experience_id", "-created_at", "-id"
    ):
        latest.setdefault(review.experience_id, review)
    return latest


def experience_reviews(*, experience: Experience) -> QuerySet[ExperienceReview]:
    return experience.reviews.order_by("-created_at", "-id")


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
    *,
    team: Team,
    role: str | None = None,
    session: Session | None = None,
    picked: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[SelectionLog]:
    """The team's selections, newest first. `picked` keeps those that selected that exp_id; `since`
    and `until` bound the time (until excluded)."""
    logs = SelectionLog.objects.filter(team=team)
    if role:
        logs = logs.filter(role=role)
    if session is not None:
        logs = logs.filter(session=session)
    if picked:
        # `selected` is a JSON list of exp_ids, which SQLite cannot search by containment: match
        # the quoted id in its text (exp_ids are slugs, so they are stored unescaped).
        logs = logs.annotate(selected_text=Cast("selected", TextField())).filter(
            selected_text__contains=json.dumps(picked)
        )
    if since is not None:
        logs = logs.filter(created_at__gte=since)
    if until is not None:
        logs = logs.filter(created_at__lt=until)
    return logs.order_by("-created_at", "-pk")


def selection_log_roles(*, team: Team) -> list[str]:
    """The roles the team's selections were made for (the selections page's filter choices)."""
    roles = SelectionLog.objects.filter(team=team).values_list("role", flat=True).distinct()
    return sorted(set(roles), key=str.lower)


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
