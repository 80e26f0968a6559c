"""Every write to experiences: create/edit/review with a revision per change, YAML import/export,
the team's selection settings, and the LLM selection itself (the selection flow).

`experience_select` calls an LLM, so it is not atomic: it reads, calls the backend outside any
transaction, then writes its SelectionLog row in one statement.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from experiences_app import selectors
from experiences_app.locks import experience_config_lock, experience_lock, team_experiences_lock
from experiences_app.models import (
    Experience,
    ExperienceReview,
    ExperienceRevision,
    SelectionLog,
    TeamExperienceConfig,
)
from experiences_app.selection import (
    candidate_block,
    format_experience_in_prompt,
    parse_selection,
    render_template,
    validate_template,
)
from experiences_app.yaml_io import (
    ExperienceData,
    ExperienceValidationError,
    dump_experience_file,
    parse_experience_files,
    validate_experience,
)
from memory_app.conversations.models import Session
from memory_app.events.models import MemoryEvent
from memory_app.events.services import event_record
from memory_app.llm import (
    EXTRACTIVE_BACKEND,
    ChatRequest,
    LLMBudgetExceeded,
    LLMPermanentError,
    LLMTransientError,
    get_backend,
)
from memory_app.search import services as search
from memory_app.search.documents import Doc, experience_doc
from memory_app.search.models import SearchKind
from memory_app.tenancy.models import ApiKey, Team
from memory_app.usage.llm_calls import llm_complete
from memory_client.vocabulary.messages import LLMMessage
from memsite.errors import BudgetExceeded, Conflict, InvalidInput, LLMFailed, LLMUnavailable

# Path segments of the experiences API that an exp_id would shadow (experiences/<exp_id>/).
RESERVED_EXP_IDS = frozenset({"import", "export", "select", "config"})
CONTENT_FIELDS = ("who", "when", "what")
Status = Experience.Status


def actor_label(*, api_key: ApiKey | None = None, user: Any = None) -> str:
    """Who made a change, as stored in author/reviewer/changed_by: "user:<name>" or "key:<label>"."""
    if user is not None and getattr(user, "is_authenticated", False):
        return f"user:{user.get_username()}"
    if api_key is not None:
        return f"key:{api_key.name or api_key.prefix}"
    return ""


def _validated(*, exp_id: Any, who: Any, when: Any, what: Any) -> ExperienceData:
    try:
        data = validate_experience(exp_id=exp_id, who=who, when=when, what=what)
    except ExperienceValidationError as exc:
        raise InvalidInput(str(exc), fields=exc.fields) from exc
    if data.exp_id.lower() in RESERVED_EXP_IDS:
        raise InvalidInput.for_field("exp_id", f"{data.exp_id!r} is reserved by the API; choose another id")
    return data


def _record(
    experience: Experience, *, actor: str, note: str, approved: bool = False, comment: str = ""
) -> ExperienceRevision:
    """Save the experience as its next revision (the caller holds the row); `approved` says this
    revision is the one that approves it, which the team's event feed (and webhooks) hear about.

    The serving revision follows the status: an approved experience serves this revision, a
    disabled one nothing, and a draft keeps what it served (an edit awaiting review must not take
    the approved text out of selection; callers clear it to withdraw an approval)."""
    experience.revision += 1
    experience.roles_key = selectors.roles_key(experience.who)
    if experience.status == Status.DISABLED:
        experience.serving_revision = None
    experience.save()
    search.index_docs(team_id=experience.team_id, docs=[search_document(experience)])
    if approved:
        event_record(
            team_id=experience.team_id,
            kind=MemoryEvent.Kind.EXPERIENCE_APPROVED,
            data={
                "exp_id": experience.exp_id,
                "revision": experience.revision,
                "approved_by": actor,
                "who": experience.who,
            },
        )
    revision = ExperienceRevision.objects.create(
        experience=experience,
        number=experience.revision,
        exp_id=experience.exp_id,
        who=experience.who,
        when=experience.when,
        what=experience.what,
        status=experience.status,
        changed_by=actor,
        note=note[:500],
    )
    if experience.status == Status.APPROVED:
        experience.serving_revision = revision
        experience.save(update_fields=["serving_revision"])
        ExperienceReview.objects.create(
            experience=experience,
            revision=revision.number,
            decision=ExperienceReview.Decision.APPROVED,
            comment=comment[:2000],
            reviewer=experience.reviewer or actor,
        )
    return revision


def search_document(experience: Experience) -> Doc:
    """What recall indexes of an experience: its `when`, the situation it is for."""
    return experience_doc(
        experience_id=experience.pk,
        when=experience.when,
        roles=experience.who or [],
        created_at=experience.created_at,
        retired_at=experience.updated_at if experience.status == Status.DISABLED else None,
    )


def _set_status(experience: Experience, status: str, *, actor: str) -> None:
    experience.status = status
    if status == Status.APPROVED:
        experience.reviewer, experience.reviewed_at = actor, timezone.now()


@transaction.atomic
def experience_create(
    *,
    team: Team,
    exp_id: str,
    who: list[str],
    when: str,
    what: str,
    actor: str,
    status: str = Status.DRAFT,
    note: str = "",
) -> Experience:
    data = _validated(exp_id=exp_id, who=who, when=when, what=what)
    experience = Experience(team=team, exp_id=data.exp_id, who=data.who, when=data.when, what=data.what, author=actor)
    _set_status(experience, status, actor=actor)
    try:
        with transaction.atomic():
            _record(experience, actor=actor, note=note or "created", approved=status == Status.APPROVED)
    except IntegrityError as exc:
        message = f"An experience with exp_id {data.exp_id!r} already exists."
        raise Conflict(message, fields={"exp_id": ["already exists"]}) from exc
    return experience


def status_after_edit(current: str, *, requested: str | None) -> str:
    """The status of an experience after a change to its content: the `requested` one, else an
    approved experience goes back to draft (it needs a new review; only approved ones are
    candidates for a selection) and any other keeps its status."""
    if requested is not None:
        return requested
    return Status.DRAFT if current == Status.APPROVED else current


@transaction.atomic
def experience_update(*, experience: Experience, data: Mapping[str, Any], actor: str, note: str = "") -> Experience:
    """Change who/when/what and/or status; a content change to an approved experience returns it
    to draft (it needs a new review) unless the same call sets the status. No change, no revision.
    Takes the experience's row lock (experiences_app.locks)."""
    experience = experience_lock(experience_id=experience.pk)
    merged = {name: data.get(name, getattr(experience, name)) for name in CONTENT_FIELDS}
    clean = _validated(exp_id=experience.exp_id, **merged)
    content_changed = (clean.who, clean.when, clean.what) != (experience.who, experience.when, experience.what)
    status = data.get("status")
    if status is not None and status not in Status.values:
        raise InvalidInput.for_field("status", f"must be one of {', '.join(Status.values)}")
    if status is None and content_changed:
        status = status_after_edit(experience.status, requested=None)
    status_changed = status is not None and status != experience.status
    if not content_changed and not status_changed:
        return experience
    experience.who, experience.when, experience.what = clean.who, clean.when, clean.what
    if status_changed and status is not None:  # status_changed implies a status: for the type checker
        _set_status(experience, status, actor=actor)
        if status == Status.DRAFT:
            experience.reviewer, experience.reviewed_at = "", None
    if data.get("status") == Status.DRAFT:
        # Asked for by name, draft withdraws the approval; an edit alone keeps the approved
        # revision serving until the edit itself is approved.
        experience.serving_revision = None
    _record(
        experience,
        actor=actor,
        note=note or ("edited" if content_changed else f"status set to {status}"),
        approved=status_changed and status == Status.APPROVED,
        comment=note if status == Status.APPROVED else "",
    )
    return experience


def experience_approve(*, experience: Experience, actor: str, note: str = "") -> Experience:
    return experience_update(experience=experience, data={"status": Status.APPROVED}, actor=actor, note=note)


def experience_disable(*, experience: Experience, actor: str, note: str = "") -> Experience:
    return experience_update(experience=experience, data={"status": Status.DISABLED}, actor=actor, note=note)


@transaction.atomic
def experience_reject(*, experience: Experience, actor: str, comment: str) -> ExperienceReview:
    """Refuse the draft's current revision with a comment for its author. Nothing else changes: the
    text stays for the author to revise (a new revision returns it to the review queue), and an
    approved revision it would replace keeps serving. Takes the experience's row lock."""
    experience = experience_lock(experience_id=experience.pk)
    comment = comment.strip()
    if not comment:
        raise InvalidInput.for_field("comment", "Say what to change: the author reads this comment.")
    if experience.status != Status.DRAFT:
        raise Conflict(f"{experience.exp_id} is {experience.status}: only a draft awaiting review can be rejected.")
    if experience.reviews.filter(revision=experience.revision, decision=ExperienceReview.Decision.REJECTED).exists():
        raise Conflict(f"Revision {experience.revision} of {experience.exp_id} is already rejected.")
    return ExperienceReview.objects.create(
        experience=experience,
        revision=experience.revision,
        decision=ExperienceReview.Decision.REJECTED,
        comment=comment[:2000],
        reviewer=actor,
    )


@transaction.atomic
def experience_delete(*, experience: Experience) -> None:
    """Deletes the experience and its revisions; `disabled` is the reversible way to retire one.
    Selection logs keep the exp_ids they chose."""
    search.index_forget(team_id=experience.team_id, kind=SearchKind.EXPERIENCE, source_keys=[str(experience.pk)])
    experience.delete()


# --- files -----------------------------------------------------------------------------------


def _import_entry(name: str, exp_id: str, status: str) -> dict[str, Any]:
    return {"file": name, "exp_id": exp_id, "status": status}


def _updated_entry(name: str, exp_id: str, *, previous: str, status: str, serving: bool) -> dict[str, Any]:
    # An approved experience the import changes without approving keeps its approved revision in
    # selection while the change awaits review (`awaiting_review`); `left_selection` would say it
    # dropped out, which an import no longer does (kept for the API's readers).
    waits = previous == Status.APPROVED and status != Status.APPROVED
    return {
        "file": name,
        "exp_id": exp_id,
        "previous_status": previous,
        "status": status,
        "left_selection": waits and not serving,
        "awaiting_review": waits and serving,
    }


@transaction.atomic
def experiences_import(
    *,
    team: Team,
    files: Iterable[tuple[str, bytes]],
    actor: str,
    dry_run: bool = False,
    approve: bool = False,
) -> dict[str, Any]:
    """Import handcrafted_exp_*.yaml files, deduplicated by exp_id; one bad file never stops the others.

    The report lists {file, exp_id, status} under created / unchanged, the same plus
    previous_status, awaiting_review and left_selection under updated, and {file, line, error}
    under rejected. `approve` approves what the import creates or changes (unchanged experiences
    keep their status); without it new experiences are drafts and changed approved ones are drafts
    awaiting review whose approved revision stays in selection until the change is approved: those
    are listed again under awaiting_review. `dry_run` reports the same without writing. Takes
    the row locks of every experience of the team, in pk order (experiences_app.locks).
    """
    parsed, errors = parse_experience_files(files)
    report: dict[str, Any] = {
        "dry_run": dry_run,
        "created": [],
        "updated": [],
        "unchanged": [],
        "rejected": [],
        "left_selection": [],
        "awaiting_review": [],
    }
    report["rejected"] = [{"file": e.name, "line": e.line, "error": e.message} for e in errors]
    existing = {exp.exp_id: exp for exp in team_experiences_lock(team=team)}
    status = Status.APPROVED if approve else None
    for name, data in parsed:
        if data.exp_id.lower() in RESERVED_EXP_IDS:
            report["rejected"].append({"file": name, "line": None, "error": f"exp_id {data.exp_id!r} is reserved"})
            continue
        current = existing.get(data.exp_id)
        if current is None:
            report["created"].append(_import_entry(name, data.exp_id, status or Status.DRAFT))
            if not dry_run:
                experience_create(
                    team=team,
                    **_fields(data),
                    actor=actor,
                    status=status or Status.DRAFT,
                    note=f"imported from {name}",
                )
        elif (data.who, data.when, data.what) == (current.who, current.when, current.what):
            report["unchanged"].append(_import_entry(name, data.exp_id, current.status))
        else:
            previous, after = current.status, status_after_edit(current.status, requested=status)
            serving = current.serving_revision_id is not None
            if not dry_run:
                changes: dict[str, Any] = {"who": data.who, "when": data.when, "what": data.what}
                if status:
                    changes["status"] = status
                note = f"imported from {name}"
                saved = experience_update(experience=current, data=changes, actor=actor, note=note)
                after, serving = saved.status, saved.serving_revision_id is not None
            entry = _updated_entry(name, data.exp_id, previous=previous, status=after, serving=serving)
            report["updated"].append(entry)
            for key in ("left_selection", "awaiting_review"):
                if entry[key]:
                    report[key].append(entry)
    if dry_run:
        transaction.set_rollback(True)  # nothing was written; this guards the promise
    report["rejected"].sort(key=lambda item: item["file"])
    return report


def _fields(data: ExperienceData) -> dict[str, Any]:
    return {"exp_id": data.exp_id, "who": list(data.who), "when": data.when, "what": data.what}


def experiences_export(*, team: Team, status: str | None = None) -> list[tuple[str, bytes]]:
    """Every experience (or those with `status`) as handcrafted_exp_*.yaml files, by exp_id. Status is not
    part of the experience file format; importing the files back changes nothing."""
    experiences = Experience.objects.filter(team=team).order_by("exp_id")
    if status:
        experiences = experiences.filter(status=status)
    return [
        dump_experience_file(ExperienceData(exp_id=e.exp_id, who=list(e.who), when=e.when, what=e.what))
        for e in experiences
    ]


# --- settings --------------------------------------------------------------------------------


@transaction.atomic
def experience_config_update(*, team: Team, data: Mapping[str, Any], actor: str) -> TeamExperienceConfig:
    """Save the team's use_experience flags, selection template ("" = the default) and LLM alias.

    Takes the row lock of the team's settings (experiences_app.locks).
    """
    config = experience_config_lock(team=team)
    if "use_experience" in data:
        flags = data["use_experience"]
        if not isinstance(flags, Mapping) or not all(
            isinstance(k, str) and k.strip() and isinstance(v, bool) for k, v in flags.items()
        ):
            raise InvalidInput.for_field("use_experience", "must map role names to true or false")
        flags = {k.strip(): v for k, v in flags.items()}
        conflicts = selectors.switch_conflicts(flags)
        if conflicts:
            raise InvalidInput("use_experience: " + "; ".join(conflicts), fields={"use_experience": conflicts})
        config.use_experience = flags
    if "selection_template" in data:
        template = data["selection_template"] or ""
        if template.strip():
            try:
                validate_template(template)
            except ValueError as exc:
                raise InvalidInput.for_field("selection_template", str(exc)) from exc
        config.selection_template = template if template.strip() else ""
    if "llm_alias" in data:
        if data["llm_alias"] not in selectors.LLM_ALIASES:
            allowed = ", ".join(repr(a) for a in selectors.LLM_ALIASES)
            raise InvalidInput.for_field("llm_alias", f"unknown alias; allowed: {allowed}")
        config.llm_alias = data["llm_alias"]
    config.updated_by = actor
    config.save()
    return config


# --- selection -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SelectionResult:
    role: str
    query: str
    context: str
    use_experience: bool
    skipped: str  # why no LLM was asked ("" when one was)
    candidates: list[dict[str, str]]  # [{"exp_id", "when"}]
    selected: list[dict[str, str]]  # [{"exp_id", "what"}]
    prompt_text: str  # the block to inject into the role's prompt
    messages: list[LLMMessage] = field(default_factory=list)  # what the LLM was sent
    raw_response: str = ""
    backend: str = ""
    model: str = ""
    latency_ms: int = 0
    log_id: str | None = None
    trial_exp_id: str = ""  # the draft a trial offered ("" for a real selection, which is logged)
    pending: list[str] = field(default_factory=list)  # offered with their approved text; an edit awaits review
    not_offered: list[dict[str, str]] = field(default_factory=list)  # [{"exp_id", "reason"}]


def _clip_context(text: str, limit: int) -> str:
    # The end of a conversation is what the query continues from.
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def experience_select(
    *,
    team: Team,
    role: str,
    query: str,
    context: str | None = None,
    session: Session | None = None,
    round_id: str = "",
    post_id: str = "",
    trial: Experience | None = None,
) -> SelectionResult:
    """Ask the LLM which approved experiences for `role` apply to `query`, and log the exchange.

    `trial` runs a trial instead ("try this draft"): that experience's current text is offered as a
    candidate, and nothing is written to the selection log, so no page or count ever shows the
    trial as a selection (the LLM call itself is counted in usage: it spent tokens).

    Only `when` texts go into the prompt; the result's prompt_text holds only the `what` texts of
    the selected ones. With a `session`, the context is that session's recent messages for the role.
    No LLM is asked (and nothing logged) when the role's use_experience is false or no experience
    targets the role. LLM failures are logged, then raised as LLMUnavailable / LLMFailed.
    """
    config = selectors.experience_config_get(team=team)
    if session is not None:
        context = selectors.session_role_context(session=session, role=role)
    context = _clip_context(context or "", settings.EXPERIENCE_CONTEXT_MAX_CHARS)
    empty: dict[str, Any] = {"role": role, "query": query, "context": context, "selected": [], "prompt_text": ""}
    switch = selectors.config_use_experience(config, role)
    if not switch.enabled:
        skipped = f"use_experience is false for role {role!r}"
        if selectors.role_key(switch.key) != selectors.role_key(role):
            skipped += f" (set by {switch.key}.use_experience)"
        return SelectionResult(**empty, use_experience=False, skipped=skipped, candidates=[])
    experiences = selectors.experience_candidates(team=team, role=role, trial=trial)
    candidates = [{"exp_id": e.exp_id, "when": e.when} for e in experiences]
    marks: dict[str, Any] = {
        "trial_exp_id": trial.exp_id if trial is not None and any(e.trial for e in experiences) else "",
        "pending": [e.exp_id for e in experiences if e.pending],
        "not_offered": selectors.experiences_not_offered(
            team=team, role=role, offered=[c["exp_id"] for c in candidates]
        ),
    }
    if not candidates:
        return SelectionResult(
            **empty,
            **marks,
            use_experience=True,
            skipped=f"no approved experience targets role {role!r}",
            candidates=[],
        )

    prompt = render_template(
        selectors.config_template(config),
        experiences=candidate_block([(c["exp_id"], c["when"]) for c in candidates]),
        user_query=query,
        context=context or "(no conversation yet)",
    )
    messages: list[LLMMessage] = [{"role": "user", "content": prompt}]
    backend = get_backend(EXTRACTIVE_BACKEND if config.llm_alias == selectors.OFFLINE_ALIAS else None)
    request = ChatRequest(
        messages=messages,
        purpose="select_experiences",
        # OpenAI refuses json_object unless the prompt mentions JSON; a custom template may not.
        json_object=backend.supports_json_object and "json" in prompt.lower(),
        metadata={"candidates": candidates, "query": query, "context": context},
    )
    log = SelectionLog(
        team=team,
        role=role,
        query=query,
        context=context,
        candidates=candidates,
        not_offered=marks["not_offered"],
        messages=messages,
        backend=backend.name,
        model=backend.model,
        session=session,
        round_id=round_id,
        post_id=post_id,
    )
    started = time.monotonic()
    try:
        answer = llm_complete(backend=backend, request=request, team=team, session=session, agent=role)
    except (LLMTransientError, LLMPermanentError) as exc:
        log.latency_ms = int((time.monotonic() - started) * 1000)
        log.error = exc.detail
        if trial is None:
            log.save(force_insert=True)
        where = f"selection {log.pk}" if trial is None else "a trial: not logged"
        if isinstance(exc, LLMBudgetExceeded):
            raise BudgetExceeded(
                f"No experiences selected: {exc.detail} ({where})", retry_after=exc.retry_after
            ) from exc
        error = LLMUnavailable if isinstance(exc, LLMTransientError) else LLMFailed
        raise error(f"The LLM could not select experiences: {exc.detail} ({where})") from exc
    log.latency_ms = int((time.monotonic() - started) * 1000)

    chosen = parse_selection(answer.text, [c["exp_id"] for c in candidates])
    what = {e.exp_id: e.what for e in experiences}
    selected = [{"exp_id": exp_id, "what": what[exp_id]} for exp_id in chosen]
    log.raw_response = answer.text
    log.selected = chosen
    log.backend, log.model = answer.backend, answer.model
    log.prompt_tokens, log.completion_tokens = answer.prompt_tokens, answer.completion_tokens
    if trial is None:
        log.save(force_insert=True)
    return SelectionResult(
        role=role,
        query=query,
        context=context,
        use_experience=True,
        skipped="",
        candidates=candidates,
        selected=selected,
        prompt_text=format_experience_in_prompt([(s["exp_id"], s["what"]) for s in selected]),
        messages=messages,
        raw_response=answer.text,
        backend=answer.backend,
        model=answer.model,
        latency_ms=log.latency_ms,
        log_id=str(log.pk) if trial is None else None,
        **marks,
    )
