"""Dashboard pages for facts: the facts table, an entity's graph, one fact with its
provenance, and the extraction runs that wait for a team admin (quarantined or failed).

Every page is scoped to the user's current team (`views.team_page`); the curation actions are
POSTs for the team's admins (`views.team_admin_action`) and call the
same services as the API: facts.fact_update / fact_invalidate and fact_extraction's retry,
accept and discard.
"""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import messages as flash
from django.core.paginator import Paginator
from django.db.models import F, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from memory_app.conversations import selectors
from memory_app.dashboard.decorators import get_or_404, redirect_back, team_admin_action, team_page
from memory_app.facts import extraction as fact_extraction
from memory_app.facts import selectors as fact_selectors
from memory_app.facts import services as facts
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.facts.output import MAX_FIELD_CHARS, MAX_OUTPUT_CHARS
from memory_app.tenancy import selectors as tenancy_selectors
from memory_app.tenancy.models import Team
from memsite.errors import Conflict, InvalidInput

FACTS_PER_PAGE = 50
RUNS_PER_PAGE = 20
RUN_FACTS_SHOWN = 100
# Raw output longer than this is cut in the list (the run's page shows all of it).
RAW_OUTPUT_PREVIEW_CHARS = 4000
MAX_ROLE_CHARS = 200
RUN_STATUS_TABS = (
    ("quarantined", "Quarantined"),
    ("failed", "Failed"),
    ("discarded", "Discarded"),
    ("all", "All runs"),
)
# The page's JS swaps this id for a fact's id to link an edge to its fact.
FACT_URL_PLACEHOLDER = uuid.UUID(int=0)


curation_action = team_admin_action("dashboard:facts")


def _quarantine_count(team: Team) -> int:
    return fact_selectors.fact_extraction_list(team=team, status=FactExtractionRun.Status.QUARANTINED).count()


def _page_context(request: HttpRequest, team: Team, teams: list[Team], tab: str, **extra: Any) -> dict[str, Any]:
    return {
        "team": team,
        "teams": teams,
        "tab": tab,
        "can_curate": tenancy_selectors.user_is_team_admin(user=request.user, team=team),
        "quarantined_count": _quarantine_count(team),
        **extra,
    }


# --- the facts table ------------------------------------------------------------------------------


class FactFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=MAX_FIELD_CHARS, label="Search")
    subject = forms.CharField(required=False, max_length=MAX_FIELD_CHARS)
    predicate = forms.CharField(required=False, max_length=MAX_FIELD_CHARS)
    object = forms.CharField(required=False, max_length=MAX_FIELD_CHARS)
    role = forms.CharField(required=False, max_length=MAX_ROLE_CHARS)
    session = forms.CharField(required=False, max_length=200, label="Session")
    as_of = forms.DateTimeField(
        required=False,
        label="As of",
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}, format="%Y-%m-%dT%H:%M:%S"),
    )
    include_invalidated = forms.BooleanField(required=False, label="Include invalidated")

    FILTER_NAMES = ("q", "subject", "predicate", "object", "role", "session", "as_of", "include_invalidated")

    def filters(self, team: Team) -> dict[str, Any] | None:
        """fact_list arguments from the fields that validated; None when the session named
        is not one of the team's (nothing can match)."""
        self.is_valid()
        data = self.cleaned_data
        text = {name: (data.get(name) or "").strip() or None for name in ("q", "subject", "predicate", "object")}
        found: dict[str, Any] = {
            **text,
            "role": (data.get("role") or "").strip() or None,
            "as_of": data.get("as_of"),
            "include_invalidated": bool(data.get("include_invalidated")),
        }
        wanted = (data.get("session") or "").strip()
        if wanted:
            session = selectors.session_named(team=team, name=wanted)
            if session is None:
                self.add_error("session", "No session of this team has that id or external id.")
                return None
            found["session"] = session
        return found


def _for_display(found: QuerySet[Fact]) -> QuerySet[Fact]:
    """The columns the table shows: the session's name and the source message's seq."""
    return found.select_related("session").annotate(source_seq=F("source_message__seq"))


@team_page
def fact_list(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    form = FactFilterForm(request.GET)
    filters = form.filters(team)
    found = fact_selectors.fact_list(team=team, **filters) if filters is not None else Fact.objects.none()
    page = Paginator(_for_display(found), FACTS_PER_PAGE).get_page(request.GET.get("page"))
    filtered = any(request.GET.get(name) for name in FactFilterForm.FILTER_NAMES)
    return render(
        request,
        "memory_app/fact_list.html",
        _page_context(request, team, teams, "table", form=form, page=page, filtered=filtered),
    )


# --- one fact: provenance, history, and the admins' edits ---------------------------------------------


class FactEditForm(forms.Form):
    subject = forms.CharField(max_length=MAX_FIELD_CHARS, strip=False)
    predicate = forms.CharField(max_length=MAX_FIELD_CHARS, strip=False)
    object = forms.CharField(max_length=MAX_FIELD_CHARS, strip=False)
    role = forms.CharField(max_length=MAX_ROLE_CHARS)
    confidence = forms.FloatField(required=False, min_value=0.0, max_value=1.0)


def _team_fact(team: Team, fact_id: uuid.UUID) -> Fact:
    return get_or_404(fact_selectors.fact_get, team=team, fact_id=fact_id)


def _fact_url(fact_id: Any) -> str:
    return reverse("dashboard:fact", args=[fact_id])


def _render_fact(
    request: HttpRequest, team: Team, teams: list[Team], fact_id: uuid.UUID, *, form: FactEditForm | None, status: int
) -> HttpResponse:
    try:
        fact = _for_display(Fact.objects.filter(team=team)).select_related("extraction_run").get(pk=fact_id)
    except Fact.DoesNotExist as exc:
        raise Http404("Fact not found.") from exc
    if form is None:
        form = FactEditForm(initial={name: getattr(fact, name) for name in FactEditForm.base_fields})
    replaced = list(Fact.objects.filter(team=team, invalidated_by=fact).order_by("-invalidated_at"))
    context = _page_context(request, team, teams, "table", fact=fact, form=form, replaced=replaced)
    return render(request, "memory_app/fact_detail.html", context, status=status)


@team_page
def fact_detail(request: HttpRequest, fact_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    return _render_fact(request, team, teams, fact_id, form=None, status=200)


@curation_action
def fact_edit(request: HttpRequest, fact_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    fact = _team_fact(team, fact_id)
    form = FactEditForm(request.POST)
    if not form.is_valid():
        return _render_fact(request, team, teams, fact_id, form=form, status=400)
    try:
        facts.fact_update(fact=fact, data=form.cleaned_data)
    except (Conflict, InvalidInput) as exc:
        form.add_error(None, exc.detail)
        return _render_fact(request, team, teams, fact_id, form=form, status=409 if isinstance(exc, Conflict) else 400)
    flash.success(request, "Fact saved.")
    return redirect(_fact_url(fact.pk))


@curation_action
def fact_invalidate(request: HttpRequest, fact_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    fact = _team_fact(team, fact_id)
    facts.fact_invalidate(fact=fact)
    flash.success(request, f"Invalidated “{fact}”. It stays in the history and can be restored.")
    return redirect_back(request, _fact_url(fact.pk))


@curation_action
def fact_restore(request: HttpRequest, fact_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    fact = _team_fact(team, fact_id)
    try:
        facts.fact_update(fact=fact, data={"invalidated": False})
    except Conflict as exc:
        flash.error(request, exc.detail)
    else:
        flash.success(request, f"Restored “{fact}”.")
    return redirect_back(request, _fact_url(fact.pk))


# --- the graph ----------------------------------------------------------------------------------------


class GraphForm(forms.Form):
    entity = forms.CharField(required=False, max_length=MAX_FIELD_CHARS)
    depth = forms.TypedChoiceField(choices=[(n, str(n)) for n in (1, 2, 3)], coerce=int, required=False)

    def query(self) -> tuple[str, int]:
        self.is_valid()
        data = self.cleaned_data
        return (data.get("entity") or "").strip(), data.get("depth") or 1


def _graph_data(team: Team, entity: str, depth: int) -> dict[str, Any]:
    """fact_graph's answer (the API's graph endpoint reads the same selector), as JSON."""
    if not entity:
        return {"entity": "", "depth": depth, "nodes": [], "edges": [], "truncated": False}
    graph = fact_selectors.fact_graph(team=team, entity=entity, depth=depth)
    labels = {node["id"]: node["label"] for node in graph.nodes}
    return {
        "entity": entity,
        "depth": depth,
        "nodes": graph.nodes,
        # Each edge also carries its ends as written, for the table under the drawing.
        "edges": [
            {**edge, "source_label": labels[edge["source"]], "target_label": labels[edge["target"]]}
            for edge in graph.edges
        ],
        "truncated": graph.truncated,
    }


@team_page
def fact_graph(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    form = GraphForm(request.GET)
    entity, depth = form.query()
    if not entity and "entity" not in request.GET:
        # Start somewhere useful: the subject of the newest live fact.
        entity = fact_selectors.fact_list(team=team).values_list("subject", flat=True).first() or ""
    data = _graph_data(team, entity, depth)
    context = _page_context(
        request,
        team,
        teams,
        "graph",
        form=form,
        graph=data,
        entity=entity,
        depth=depth,
        fact_url_template=_fact_url(FACT_URL_PLACEHOLDER),
        fact_url_placeholder=str(FACT_URL_PLACEHOLDER),
    )
    return render(request, "memory_app/fact_graph.html", context)


@team_page
def fact_graph_data(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    """The neighbourhood as JSON, fetched by static/js/fact_graph.js when a node is clicked."""
    form = GraphForm(request.GET)
    if not form.is_valid():
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
    entity, depth = form.query()
    return JsonResponse(_graph_data(team, entity, depth))


# --- extraction runs waiting for an admin---------------------------------------------------------------


class AcceptForm(forms.Form):
    output = forms.CharField(
        max_length=MAX_OUTPUT_CHARS, strip=False, widget=forms.Textarea(attrs={"rows": 8, "spellcheck": "false"})
    )


def _team_run(team: Team, run_id: uuid.UUID) -> FactExtractionRun:
    return get_or_404(fact_selectors.fact_extraction_get, team=team, run_id=run_id)


def _run_url(run_id: Any) -> str:
    return reverse("dashboard:fact_extraction", args=[run_id])


@team_page
def fact_extraction_list(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    status = request.GET.get("status") or "quarantined"
    if status not in dict(RUN_STATUS_TABS):
        raise Http404("No such status.")
    runs = fact_selectors.fact_extraction_list(team=team, status=None if status == "all" else status)
    page = Paginator(runs.select_related("session"), RUNS_PER_PAGE).get_page(request.GET.get("page"))
    context = _page_context(
        request,
        team,
        teams,
        "quarantine",
        page=page,
        status=status,
        status_tabs=RUN_STATUS_TABS,
        preview_chars=RAW_OUTPUT_PREVIEW_CHARS,
        max_output_chars=MAX_OUTPUT_CHARS,
    )
    return render(request, "memory_app/fact_extraction_list.html", context)


def _render_run(
    request: HttpRequest,
    team: Team,
    teams: list[Team],
    run: FactExtractionRun,
    *,
    edited: str | None = None,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    produced = list(run.facts.select_related("session").annotate(source_seq=F("source_message__seq"))[:RUN_FACTS_SHOWN])
    context = _page_context(
        request,
        team,
        teams,
        "quarantine",
        run=run,
        produced=produced,
        more_produced=len(produced) == RUN_FACTS_SHOWN,
        edited=edited,
        accept_error=error,
        max_output_chars=MAX_OUTPUT_CHARS,
    )
    return render(request, "memory_app/fact_extraction_detail.html", context, status=status)


@team_page
def fact_extraction_detail(request: HttpRequest, run_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    return _render_run(request, team, teams, _team_run(team, run_id))


@curation_action
def fact_extraction_retry(request: HttpRequest, run_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    run = _team_run(team, run_id)
    try:
        fact_extraction.fact_extraction_retry(run=run)
    except Conflict as exc:
        flash.error(request, exc.detail)
    else:
        flash.success(request, "Extraction queued again: a worker will run it over the same input shortly.")
    return redirect_back(request, _run_url(run.pk))


@curation_action
def fact_extraction_discard(request: HttpRequest, run_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    run = _team_run(team, run_id)
    try:
        fact_extraction.fact_extraction_discard(run=run)
    except Conflict as exc:
        flash.error(request, exc.detail)
    else:
        flash.success(request, "Extraction discarded: it stays listed, and wrote no facts.")
    return redirect_back(request, _run_url(run.pk))


@curation_action
def fact_extraction_accept(request: HttpRequest, run_id: uuid.UUID, *, team: Team, teams: list[Team]) -> HttpResponse:
    """Apply the edited output; when it still does not parse, show it again with the reason."""
    run = _team_run(team, run_id)
    form = AcceptForm(request.POST)
    if not form.is_valid():
        error = "; ".join(str(message) for messages in form.errors.values() for message in messages)
        return _render_run(request, team, teams, run, edited=request.POST.get("output", ""), error=error, status=400)
    try:
        accepted = fact_extraction.fact_extraction_accept(run=run, output=form.cleaned_data["output"])
    except InvalidInput as exc:
        return _render_run(request, team, teams, run, edited=form.cleaned_data["output"], error=exc.detail, status=400)
    except Conflict as exc:
        flash.error(request, exc.detail)
        return redirect(_run_url(run.pk))
    added, seen = accepted.facts_added, accepted.facts_seen
    flash.success(
        request,
        f"Accepted: {added} fact{'s' if added != 1 else ''} added, {seen} seen again"
        + (f", {accepted.facts_invalidated} replaced" if accepted.facts_invalidated else "")
        + ".",
    )
    return redirect(_run_url(run.pk))
