"""Dashboard pages for experiences: the list with usage counts, create/edit with
validation as you type and a live YAML preview, one experience with its revisions and diffs,
the review queue, "try selection", import/export and the team's selection settings.

Every page is scoped to the user's current team (`memory_app.dashboard.decorators.team_page`); approving,
disabling and changing the settings are POSTs for the team's admins (the API asks an admin key
for the same), via `memory_app.dashboard.decorators.team_admin_action`. Every write calls
experiences_app.services, like the API and the admin.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django import forms
from django.contrib import messages as flash
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from experiences_app import selectors, services
from experiences_app.api.serializers import MAX_CONTEXT_CHARS, MAX_QUERY_CHARS
from experiences_app.models import Experience, ExperienceReview, ExperienceRevision, TeamExperienceConfig
from experiences_app.selection import DEFAULT_SELECTION_TEMPLATE
from experiences_app.yaml_io import (
    EXP_ID_MAX_LENGTH,
    MAX_TEXT_CHARS,
    ExperienceData,
    ExperienceValidationError,
    dump_experience_file,
    uploaded_experience_files,
    validate_experience,
    write_zip,
)
from memory_app.conversations import selectors as memory_selectors
from memory_app.conversations.models import Session
from memory_app.dashboard.decorators import get_or_404, redirect_back, team_admin_action, team_page
from memory_app.tenancy import selectors as tenancy_selectors
from memory_app.tenancy.models import Team
from memsite.errors import Conflict, InvalidInput, LLMFailed, LLMUnavailable, NotFound

EXPERIENCES_PER_PAGE = 50
REVIEWS_PER_PAGE = 20  # each card carries its diff
SELECTIONS_PER_PAGE = 50
REVISIONS_SHOWN = 100
SESSIONS_OFFERED = 50  # the newest sessions in the "try selection" picker
MAX_UPLOADS = 500
MAX_ROLE_CHARS = 200
STATUS_LABELS = dict(Experience.Status.choices)


def _page_context(request: HttpRequest, team: Team, teams: list[Team], tab: str, **extra: Any) -> dict[str, Any]:
    drafts = selectors.review_queue(team=team).count()
    return {
        "team": team,
        "teams": teams,
        "tab": tab,
        "can_curate": tenancy_selectors.user_is_team_admin(user=request.user, team=team),
        "draft_count": drafts,
        **extra,
    }


curation_action = team_admin_action("experiences:list")


def _team_experience(team: Team, exp_id: str) -> Experience:
    return get_or_404(selectors.experience_get, team=team, exp_id=exp_id)


def _experience_url(exp_id: str) -> str:
    return reverse("experiences:detail", args=[exp_id])


def _who_lines(text: str) -> list[str]:
    """Roles written as text: one per line or comma-separated (blank ones ignored)."""
    return [part for line in text.splitlines() for part in line.split(",") if part.strip()]


def _posted_who(post: Any) -> tuple[list[str], str]:
    """The `who` of a posted experience form: the ticked known roles (`who`, repeated; a value
    may also hold several lines, as the API-shaped form did) plus the typed `who_other`, in that
    order, each role once (case-insensitively). Also returns the typed text, to show it again."""
    other = post.get("who_other", "")
    roles: dict[str, str] = {}
    for value in (*post.getlist("who"), other):
        for role in _who_lines(value):
            roles.setdefault(selectors.role_key(role), role.strip())
    return list(roles.values()), other


# --- the list --------------------------------------------------------------------------------


class ListFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    role = forms.CharField(required=False, max_length=MAX_ROLE_CHARS)
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *Experience.Status.choices])

    def filters(self) -> dict[str, str | None]:
        self.is_valid()
        data = self.cleaned_data
        return {name: (data.get(name) or "").strip() or None for name in ("q", "role", "status")}


@team_page
def experience_list(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    form = ListFilterForm(request.GET)
    found = selectors.experience_list(team=team, **form.filters())
    page = Paginator(found, EXPERIENCES_PER_PAGE).get_page(request.GET.get("page"))
    usage = selectors.experience_usage(team=team, exp_ids=[exp.exp_id for exp in page])
    rows = [(exp, usage[exp.exp_id]) for exp in page]
    filtered = any(request.GET.get(name) for name in ("q", "role", "status"))
    context = _page_context(
        request,
        team,
        teams,
        "list",
        form=form,
        page=page,
        rows=rows,
        filtered=filtered,
        roles=selectors.experience_roles(team=team),  # a filter: the roles experiences name
    )
    return render(request, "experiences_app/list.html", context)


# --- create and edit ---------------------------------------------------------------------------


FORM_FIELDS = ("exp_id", "who_other", "when", "what", "note")
MAX_WHO_CHARS = 100_000


class ExperienceForm(forms.Form):
    """Shapes and sizes only; the rules are yaml_io.validate_experience's, run by the services.
    `who` is read apart (_posted_who): it is ticked boxes plus typed text."""

    exp_id = forms.CharField(max_length=EXP_ID_MAX_LENGTH, required=False, strip=False)
    who_other = forms.CharField(required=False, strip=False, max_length=MAX_WHO_CHARS)
    when = forms.CharField(required=False, strip=False, max_length=MAX_TEXT_CHARS * 2)
    what = forms.CharField(required=False, strip=False, max_length=MAX_TEXT_CHARS * 2)
    note = forms.CharField(required=False, max_length=500)


def _values(raw: dict[str, Any], who: list[str]) -> dict[str, Any]:
    """validate_experience's arguments from the form's strings."""
    return {"exp_id": raw.get("exp_id", ""), "who": who, "when": raw.get("when", ""), "what": raw.get("what", "")}


@dataclass(frozen=True)
class Checked:
    """What the form would save: the field errors, the warnings that do not stop a save (unknown
    roles), and the exact file an export would write ("" while there are errors)."""

    errors: dict[str, list[str]]
    warnings: dict[str, list[str]]
    yaml: str


def _check(
    values: dict[str, Any], *, team: Team, existing: Experience | None, known: list[selectors.KnownRole]
) -> Checked:
    """The same rules as services.experience_create/update: yaml_io.validate_experience, the
    reserved ids, and (for a new one) an exp_id the team does not use yet; plus the unknown-role
    warning. A role no agent has is a warning, not an error: experiences are often written (or
    imported) before the agent that will use them first runs, and blocking that would be wrong;
    a typo, the other reason, is caught by the warning and its "did you mean"."""
    exp_id = existing.exp_id if existing else values["exp_id"]
    errors: dict[str, list[str]] = {}
    warnings = {"who": selectors.unknown_role_warnings(who=values["who"], known=known)}
    try:
        clean = validate_experience(exp_id=exp_id, who=values["who"], when=values["when"], what=values["what"])
    except ExperienceValidationError as exc:
        errors = dict(exc.fields)
    # The id is checked even while other fields are still being typed.
    if existing is None and "exp_id" not in errors:
        if exp_id.lower() in services.RESERVED_EXP_IDS:
            errors["exp_id"] = [f"{exp_id!r} is reserved by the API; choose another id"]
        elif selectors.experience_list(team=team).filter(exp_id=exp_id).exists():
            errors["exp_id"] = ["already exists"]
    if errors:
        return Checked(errors, warnings, "")
    return Checked({}, warnings, dump_experience_file(clean)[1].decode())


@dataclass(frozen=True)
class RoleChoice:
    name: str
    sources: str  # where the team's data names it, for the hover text
    checked: bool


def _role_choices(known: list[selectors.KnownRole], who: list[str]) -> tuple[list[RoleChoice], str]:
    """One box per known role (ticked when `who` names it) and the roles of `who` no box stands
    for, as the "other roles" text."""
    wanted = {selectors.role_key(role) for role in who}
    names = {selectors.role_key(role.name) for role in known}
    choices = [
        RoleChoice(role.name, ", ".join(role.sources), selectors.role_key(role.name) in wanted) for role in known
    ]
    return choices, ", ".join(role for role in who if selectors.role_key(role) not in names)


def _render_form(
    request: HttpRequest,
    team: Team,
    teams: list[Team],
    *,
    experience: Experience | None,
    raw: dict[str, str] | None = None,
    who: list[str] | None = None,
    errors: dict[str, list[str]] | None = None,
    status: int = 200,
) -> HttpResponse:
    known = selectors.known_roles(team=team, exclude=experience)
    if raw is None:
        raw = dict.fromkeys(FORM_FIELDS, "")
        if experience is not None:
            raw.update(exp_id=experience.exp_id, when=experience.when, what=experience.what)
            who = list(experience.who)
    who = who or []
    checked = _check(_values(raw, who), team=team, existing=experience, known=known)
    choices, other = _role_choices(known, who)
    context = _page_context(
        request,
        team,
        teams,
        "list",
        experience=experience,
        raw=raw,
        role_choices=choices,
        who_other=other,
        known_role_names=[role.name for role in known],
        errors=errors or {},
        warnings=checked.warnings,
        preview="" if errors else checked.yaml,
        serving=experience is not None and selectors.serving_revision_number(experience),
    )
    return render(request, "experiences_app/form.html", context, status=status)


def _save(request: HttpRequest, team: Team, teams: list[Team], experience: Experience | None) -> HttpResponse:
    raw = {name: request.POST.get(name, "") for name in FORM_FIELDS}
    who, _ = _posted_who(request.POST)
    form = ExperienceForm(request.POST)
    if not form.is_valid():
        errors = {name: [str(problem) for problem in problems] for name, problems in form.errors.items()}
        return _render_form(request, team, teams, experience=experience, raw=raw, who=who, errors=errors, status=400)
    values, note = _values(form.cleaned_data, who), form.cleaned_data["note"]
    actor = services.actor_label(user=request.user)
    try:
        if experience is None:
            saved = services.experience_create(team=team, **values, actor=actor, note=note)
            flash.success(
                request, f"Created {saved.exp_id} as a draft: a team admin approves it before it can be selected."
            )
        else:
            before = experience.revision
            fields = {name: values[name] for name in services.CONTENT_FIELDS}
            saved = services.experience_update(experience=experience, data=fields, actor=actor, note=note)
            if saved.revision == before:
                flash.info(request, "Nothing changed, so no revision was added.")
            else:
                flash.success(request, f"Saved revision {saved.revision} of {saved.exp_id}.{_after_edit(saved)}")
    except (InvalidInput, Conflict) as exc:
        errors = exc.fields or {"form": [exc.detail]}
        status = 409 if isinstance(exc, Conflict) else 400
        return _render_form(request, team, teams, experience=experience, raw=raw, who=who, errors=errors, status=status)
    return redirect(_experience_url(saved.exp_id))


def _after_edit(saved: Experience) -> str:
    if saved.status != Experience.Status.DRAFT:
        return ""
    if saved.serving_revision_id is not None:
        served = saved.serving_revision.number if saved.serving_revision else "?"
        return f" It awaits review; until a team admin approves it, selection keeps using approved revision {served}."
    return " It is a draft until a team admin approves it."


@team_page
def experience_new(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    if request.method == "POST":
        return _save(request, team, teams, None)
    return _render_form(request, team, teams, experience=None)


@team_page
def experience_edit(request: HttpRequest, exp_id: str, *, team: Team, teams: list[Team]) -> HttpResponse:
    experience = _team_experience(team, exp_id)
    if request.method == "POST":
        return _save(request, team, teams, experience)
    return _render_form(request, team, teams, experience=experience)


@team_page
@require_POST
def experience_validate(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    """The form's errors, unknown-role warnings and YAML preview as JSON, by the save's own rules;
    `existing` names the experience being edited (its exp_id cannot change)."""
    form = ExperienceForm(request.POST)
    who, _ = _posted_who(request.POST)
    if not form.is_valid():
        return JsonResponse(
            {"valid": False, "errors": form.errors.get_json_data(), "warnings": {}, "file_name": "", "yaml": ""}
        )
    existing = None
    if request.POST.get("existing"):
        existing = _team_experience(team, request.POST["existing"])
    values = _values(form.cleaned_data, who)
    checked = _check(values, team=team, existing=existing, known=selectors.known_roles(team=team, exclude=existing))
    exp_id = existing.exp_id if existing else values["exp_id"]
    return JsonResponse(
        {
            "valid": not checked.errors,
            "errors": {name: [{"message": m} for m in problems] for name, problems in checked.errors.items()},
            "warnings": {name: [{"message": m} for m in problems] for name, problems in checked.warnings.items()},
            "file_name": f"handcrafted_exp_{exp_id}.yaml" if checked.yaml else "",
            "yaml": checked.yaml,
        }
    )


# --- one experience --------------------------------------------------------------------------


def _revision_number(value: str | None, default: int, last: int) -> int:
    if value and value.isascii() and value.isdigit() and len(value) < 10:
        return min(max(int(value), 1), last)
    return default


@team_page
def experience_detail(request: HttpRequest, exp_id: str, *, team: Team, teams: list[Team]) -> HttpResponse:
    experience = _team_experience(team, exp_id)
    revisions = list(selectors.experience_revisions(experience=experience)[:REVISIONS_SHOWN])
    last = max(experience.revision, 1)
    b = _revision_number(request.GET.get("b"), last, last)
    a = _revision_number(request.GET.get("a"), max(b - 1, 1), last)
    try:
        diff = selectors.experience_revision_word_diff(experience=experience, a=a, b=b)
    except NotFound:
        diff = []
    reviews = list(selectors.experience_reviews(experience=experience)[:REVISIONS_SHOWN])
    decisions = {review.revision: review for review in reversed(reviews)}  # the latest per revision
    # The latest decision, when it was a rejection: its comment is for the author, on this page.
    rejection = reviews[0] if reviews and reviews[0].decision == ExperienceReview.Decision.REJECTED else None
    usage = selectors.experience_usage(team=team, exp_ids=[experience.exp_id])[experience.exp_id]
    file_name, content = dump_experience_file(
        ExperienceData(exp_id=experience.exp_id, who=list(experience.who), when=experience.when, what=experience.what)
    )
    known = selectors.known_roles(team=team, exclude=experience)
    context = _page_context(
        request,
        team,
        teams,
        "list",
        experience=experience,
        revisions=revisions,
        revision_rows=[(rev, decisions.get(rev.number)) for rev in revisions],
        rejection=rejection,
        rejection_current=rejection is not None and rejection.revision == experience.revision,
        serving=selectors.serving_revision_number(experience),
        pending=selectors.awaiting_review_while_serving(experience),
        unknown_roles=selectors.unknown_role_warnings(who=experience.who, known=known),
        a=a,
        b=b,
        diff=diff,
        usage=usage,
        file_name=file_name,
        yaml=content.decode(),
    )
    return render(request, "experiences_app/detail.html", context)


@curation_action
def experience_approve(request: HttpRequest, exp_id: str, *, team: Team, teams: list[Team]) -> HttpResponse:
    experience = _team_experience(team, exp_id)
    if experience.status == Experience.Status.APPROVED:
        flash.info(request, f"{experience.exp_id} is already approved.")
    else:
        actor = services.actor_label(user=request.user)
        services.experience_approve(experience=experience, actor=actor, note=request.POST.get("note", "")[:500])
        flash.success(request, f"Approved {experience.exp_id}: it is now a candidate for its roles.")
    return redirect_back(request, _experience_url(experience.exp_id))


@curation_action
def experience_reject(request: HttpRequest, exp_id: str, *, team: Team, teams: list[Team]) -> HttpResponse:
    """Reject the draft's current revision with a comment its author sees on the experience page."""
    experience = _team_experience(team, exp_id)
    actor = services.actor_label(user=request.user)
    try:
        services.experience_reject(experience=experience, actor=actor, comment=request.POST.get("comment", ""))
    except (InvalidInput, Conflict) as exc:
        flash.error(request, f"Not rejected: {exc.detail}")
    else:
        kept = " Its approved revision stays selected." if experience.serving_revision_id else ""
        flash.success(request, f"Rejected revision {experience.revision} of {experience.exp_id}.{kept}")
    return redirect_back(request, _experience_url(experience.exp_id))


@curation_action
def experience_disable(request: HttpRequest, exp_id: str, *, team: Team, teams: list[Team]) -> HttpResponse:
    experience = _team_experience(team, exp_id)
    if experience.status == Experience.Status.DISABLED:
        flash.info(request, f"{experience.exp_id} is already disabled.")
    else:
        actor = services.actor_label(user=request.user)
        services.experience_disable(experience=experience, actor=actor, note=request.POST.get("note", "")[:500])
        flash.success(request, f"Disabled {experience.exp_id}: it is no longer a candidate. Approve it to restore it.")
    return redirect_back(request, _experience_url(experience.exp_id))


# --- review queue ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewItem:
    experience: Experience
    base: ExperienceRevision | None  # the approved revision the draft is compared with (None: a new one)
    diff: list[selectors.FieldDiff]
    last_review: ExperienceReview | None


@team_page
def experience_review(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    """Drafts awaiting a decision, each with its changes against the approved revision marked word
    by word, and approve / reject-with-comment for the team's admins."""
    page = Paginator(selectors.review_queue(team=team), REVIEWS_PER_PAGE).get_page(request.GET.get("page"))
    drafts = list(page)
    bases = selectors.approved_bases(experiences=drafts)
    reviews = selectors.latest_reviews(experiences=drafts)
    items = [
        ReviewItem(
            exp,
            bases.get(exp.pk),
            selectors.content_word_diff(bases[exp.pk], exp) if exp.pk in bases else [],
            reviews.get(exp.pk),
        )
        for exp in drafts
    ]
    context = _page_context(
        request,
        team,
        teams,
        "review",
        page=page,
        items=items,
        rejected_count=selectors.rejected_drafts_count(team=team),
    )
    return render(request, "experiences_app/review.html", context)


# --- try selection -----------------------------------------------------------------------------


class TryForm(forms.Form):
    role = forms.CharField(max_length=MAX_ROLE_CHARS)
    query = forms.CharField(max_length=MAX_QUERY_CHARS, strip=False)
    session = forms.UUIDField(required=False)
    context = forms.CharField(required=False, strip=False, max_length=MAX_CONTEXT_CHARS)
    draft = forms.CharField(required=False, max_length=EXP_ID_MAX_LENGTH)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("session") and (data.get("context") or "").strip():
            self.add_error("context", "Pick a session or write a context, not both.")
        if not (data.get("query") or "").strip() and "query" not in self.errors:
            self.add_error("query", "This field is required.")
        return data


def _trial_experience(team: Team, exp_id: str) -> Experience | None:
    """The experience a trial offers, when `exp_id` names one of the team's; None otherwise."""
    if not exp_id:
        return None
    try:
        return selectors.experience_get(team=team, exp_id=exp_id)
    except NotFound:
        return None


@team_page
def experience_try(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    """GET shows the form; POST runs services.experience_select (it asks the LLM and logs, like the API).

    With a draft chosen (`?draft=<exp_id>`, the experience page's "Try this draft") the run is a
    trial: that draft's text is offered as a candidate and nothing is logged as a selection."""
    posted = request.method == "POST"
    draft_id = (request.POST if posted else request.GET).get("draft", "")
    trial = _trial_experience(team, draft_id)
    initial = {"draft": trial.exp_id, "role": trial.who[0] if trial.who else ""} if trial and not posted else None
    form = TryForm(request.POST if posted else None, initial=initial)
    result, error, status = None, "", 200
    if posted:
        if draft_id and trial is None:
            form.add_error("draft", f"No experience of this team is called {draft_id!r}.")
        if form.is_valid():
            data = form.cleaned_data
            session: Session | None = None
            try:
                if data["session"]:
                    session = memory_selectors.session_get(team=team, session_id=data["session"])
                result = services.experience_select(
                    team=team,
                    role=data["role"].strip(),
                    query=data["query"],
                    context=data["context"],
                    session=session,
                    trial=trial,
                )
            except NotFound:
                form.add_error("session", "No session of this team has that id.")
                status = 400
            except (LLMUnavailable, LLMFailed) as exc:
                error, status = exc.detail, 502
        else:
            status = 400
    sessions = memory_selectors.session_list(team=team).order_by("-created_at")[:SESSIONS_OFFERED]
    chosen = {s["exp_id"] for s in result.selected} if result else set()
    known = selectors.known_roles(team=team)
    role = (form["role"].value() or "").strip()
    context = _page_context(
        request,
        team,
        teams,
        "try",
        form=form,
        result=result,
        chosen=chosen,
        error=error,
        sessions=sessions,
        trial=trial,
        drafts=selectors.experience_list(team=team).exclude(status=Experience.Status.APPROVED)[:SESSIONS_OFFERED],
        roles=known,
        role_warnings=selectors.unknown_role_warnings(who=[role], known=known) if role else [],
        llm_alias=selectors.experience_config_get(team=team).llm_alias,
        parsed=json.dumps([s["exp_id"] for s in result.selected]) if result else "",
        messages_json=json.dumps(result.messages, ensure_ascii=False, indent=2) if result else "",
    )
    return render(request, "experiences_app/try.html", context, status=status)


# --- past selections ---------------------------------------------------------------------------


class SelectionFilterForm(forms.Form):
    role = forms.CharField(required=False, max_length=MAX_ROLE_CHARS)
    picked = forms.CharField(required=False, max_length=EXP_ID_MAX_LENGTH, label="Picked experience")
    since = forms.DateField(required=False, label="From")
    until = forms.DateField(required=False, label="To")

    def filters(self) -> dict[str, Any]:
        """The selector's keyword arguments; an invalid value filters nothing (the form shows why)."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        tz = timezone.get_current_timezone()

        def day_start(day: date | None, offset: int = 0) -> datetime | None:
            return datetime.combine(day + timedelta(days=offset), time.min, tzinfo=tz) if day else None

        return {
            "role": (data.get("role") or "").strip() or None,
            "picked": (data.get("picked") or "").strip() or None,
            "since": day_start(data.get("since")),
            "until": day_start(data.get("until"), 1),  # the whole "to" day
        }


@team_page
def selection_list(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    """Past selections, newest first, filtered by role, picked experience and date on the server."""
    form = SelectionFilterForm(request.GET)
    logs = selectors.selection_log_list(team=team, **form.filters()).select_related("session").defer("messages")
    page = Paginator(logs, SELECTIONS_PER_PAGE).get_page(request.GET.get("page"))
    filtered = any(request.GET.get(name) for name in form.fields)
    context = _page_context(
        request,
        team,
        teams,
        "selections",
        form=form,
        page=page,
        filtered=filtered,
        roles=selectors.selection_log_roles(team=team),
    )
    return render(request, "experiences_app/selections.html", context)


@team_page
def selection_detail(request: HttpRequest, log_id: str, *, team: Team, teams: list[Team]) -> HttpResponse:
    """One selection: what was offered, what the LLM answered, what was picked and the prompt as sent."""
    log = get_or_404(selectors.selection_log_get, team=team, log_id=log_id)
    picked = set(log.selected or [])
    candidates = [c for c in log.candidates or [] if isinstance(c, dict)]
    context = _page_context(
        request,
        team,
        teams,
        "selections",
        log=log,
        candidates=candidates,
        picked=picked,
        existing=set(
            selectors.experience_list(team=team)
            .filter(exp_id__in=[c.get("exp_id") for c in candidates])
            .values_list("exp_id", flat=True)
        ),
    )
    return render(request, "experiences_app/selection.html", context)


@team_page
def selection_log_download(request: HttpRequest, log_id: str, *, team: Team, teams: list[Team]) -> HttpResponse:
    """The prompt log of one selection, `{role}_experience_selection_log_{round}_{post}.json`."""
    log = get_or_404(selectors.selection_log_get, team=team, log_id=log_id)
    log_file = selectors.selection_log_file(log=log)
    response = HttpResponse(log_file.content, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="{log_file.name}"'
    return response


# --- import / export ---------------------------------------------------------------------------


@team_page
def experience_import(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    """Upload a zip and/or handcrafted_exp_*.yaml files; approving what the import writes is for the team's admins."""
    report, error, status = None, "", 200
    dry_run = approve = False
    if request.method == "POST":
        uploads = request.FILES.getlist("files")
        dry_run, approve = request.POST.get("dry_run") == "on", request.POST.get("approve") == "on"
        if approve and not tenancy_selectors.user_is_team_admin(user=request.user, team=team):
            error, status = "Only the team's admins may approve what an import writes.", 403
        elif not uploads:
            error, status = "Choose handcrafted_exp_*.yaml files or a zip of them.", 400
        elif len(uploads) > MAX_UPLOADS:
            error, status = f"At most {MAX_UPLOADS} files at once; put more in a zip.", 400
        else:
            try:
                files = [item for upload in uploads for item in uploaded_experience_files(upload)]
                report = services.experiences_import(
                    team=team,
                    files=files,
                    actor=services.actor_label(user=request.user),
                    dry_run=dry_run,
                    approve=approve,
                )
            except InvalidInput as exc:
                error, status = exc.detail, 400
    counts = selectors.experience_list(team=team).count()
    context = _page_context(
        request,
        team,
        teams,
        "files",
        report=report,
        error=error,
        dry_run=dry_run,
        approve=approve,
        total=counts,
        sections=([(key, report[key]) for key in ("created", "updated", "unchanged", "rejected")] if report else []),
    )
    return render(request, "experiences_app/import.html", context, status=status)


@team_page
def experience_export(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    status = request.GET.get("status") or None
    if status is not None and status not in STATUS_LABELS:
        raise Http404("No such status.")
    archive = write_zip(services.experiences_export(team=team, status=status))
    response = HttpResponse(archive, content_type="application/zip")
    name = f"experiences-{team.name}{'-' + status if status else ''}.zip".replace('"', "")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


# --- settings --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SwitchRow:
    switch: str  # the `use_experience` key the page saves
    role: str  # the role it governs
    on: bool


def _config_switches(team: Team, config: TeamExperienceConfig) -> list[SwitchRow]:
    """One row per governed role: the configuration's switches first (each with the role it governs),
    then every other role configured or named by an experience, under its own name. A role that a
    switch governs shows in that switch's row, whichever spelling is stored."""
    switches = selectors.USE_EXPERIENCE_SWITCHES
    rows = {selectors.role_key(role): SwitchRow(switch, role, True) for switch, role in switches.items()}
    others: dict[str, str] = {}
    for name in (*config.use_experience, *selectors.experience_roles(team=team)):
        role = selectors.switch_role(name)
        if selectors.role_key(role) not in rows:
            others.setdefault(selectors.role_key(role), role)
    for key, role in sorted(others.items(), key=lambda item: item[1].lower()):
        rows[key] = SwitchRow(role, role, True)
    return [
        SwitchRow(row.switch, row.role, selectors.config_uses_experience(config, row.role)) for row in rows.values()
    ]


def _render_config(
    request: HttpRequest,
    team: Team,
    teams: list[Team],
    *,
    template: str | None = None,
    errors: dict[str, list[str]] | None = None,
    status: int = 200,
) -> HttpResponse:
    config = selectors.experience_config_get(team=team)
    context = _page_context(
        request,
        team,
        teams,
        "config",
        config=config,
        switches=_config_switches(team, config),
        template=config.selection_template if template is None else template,
        default_template=DEFAULT_SELECTION_TEMPLATE,
        aliases=[("", "The configured LLM"), (selectors.OFFLINE_ALIAS, "Offline (keyword ranking, no LLM)")],
        errors=errors or {},
    )
    return render(request, "experiences_app/config.html", context, status=status)


@team_page
def experience_config(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    return _render_config(request, team, teams)


@curation_action
def experience_config_save(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    roles = request.POST.getlist("role")
    flags = request.POST.getlist("use")
    use = {role.strip(): flag == "on" for role, flag in zip(roles, flags, strict=False) if role.strip()}
    new_role = request.POST.get("new_role", "").strip()
    if new_role:
        use[new_role[:MAX_ROLE_CHARS]] = request.POST.get("new_use", "on") == "on"
    template = request.POST.get("selection_template", "")
    data = {"use_experience": use, "selection_template": template, "llm_alias": request.POST.get("llm_alias", "")}
    try:
        services.experience_config_update(team=team, data=data, actor=services.actor_label(user=request.user))
    except InvalidInput as exc:
        return _render_config(request, team, teams, template=template, errors=exc.fields, status=400)
    flash.success(request, "Experience settings saved.")
    return redirect("experiences:config")
