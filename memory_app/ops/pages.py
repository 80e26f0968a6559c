"""The ops page: the job queues of the teams the user administers, failures with retry, the search
index's backlog with its Reindex action, and the workers."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps
from typing import Any

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from memory_app.compaction import services as compaction
from memory_app.dashboard.decorators import get_or_404, non_negative_int
from memory_app.facts import extraction as fact_extraction
from memory_app.ops import selectors as ops_selectors
from memory_app.search import services as search
from memory_app.tenancy import selectors as tenancy_selectors
from memory_app.tenancy.models import Team
from memsite.errors import Conflict

OPS_FAILURES_SHOWN = 20


# Items the embedding backend refused, listed under the search index's backlog.
OPS_INDEX_FAILURES_SHOWN = 20


OPS_REFRESH_SECONDS = 5


OPS_RECENT_WINDOW = timedelta(hours=24)


# The filesystem broker answers a ping in about a second; a broker that is down, never.
OPS_PING_TIMEOUT = 0.5


OPS_PING_DEADLINE = 2.0


# A worker that answered within this many seconds still counts as seen alive.
OPS_WORKER_MEMORY = 30.0


# Each job kind's retry service, by JobSource.kind: (job) -> (new or active job, created).
RETRY_SERVICES: dict[str, Callable[[Any], tuple[Any, bool]]] = {
    "compaction": lambda job: compaction.compaction_retry(run=job),
    # Re-queues the quarantined or failed run itself, over the same input.
    "facts": lambda job: (fact_extraction.fact_extraction_retry(run=job), True),
    "search": lambda job: search.index_retry(run=job),
}


def ops_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Log-in required; calls `view(request, ..., team_ids=)` with the teams whose jobs the user
    administers (None: every team, for a superuser); 403 for a user who administers none."""

    @login_required
    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        team_ids = tenancy_selectors.admin_team_ids_for_user(user=request.user)
        request.admin_team_ids = team_ids  # type: ignore[attr-defined]
        if team_ids == []:
            context = {"what": "The ops page shows and retries the background jobs of the teams you administer."}
            return render(request, "memory_app/team_admin_only.html", context, status=403)
        return view(request, *args, team_ids=team_ids, **kwargs)

    return wrapper


_UNITS = (("d", 86400), ("h", 3600), ("min", 60), ("s", 1))


def short_duration(age: timedelta) -> str:
    """The largest whole unit and the next one: "45 s", "12 min 5 s", "3 h 20 min", "2 d"."""
    seconds = max(int(age.total_seconds()), 0)
    index = next(i for i, (_, size) in enumerate(_UNITS) if seconds >= size or i == len(_UNITS) - 1)
    name, size = _UNITS[index]
    parts = [f"{seconds // size} {name}"]
    if index + 1 < len(_UNITS):
        smaller, smaller_size = _UNITS[index + 1]
        if rest := seconds % size // smaller_size:
            parts.append(f"{rest} {smaller}")
    return " ".join(parts)


@dataclass(frozen=True)
class QueueView:
    source: ops_selectors.JobSource
    stats: ops_selectors.QueueStats
    failures: list[Any]
    oldest_pending_age: timedelta | None
    retryable: bool  # a retry service exists for this kind

    @property
    def oldest_pending_label(self) -> str:
        return short_duration(self.oldest_pending_age) if self.oldest_pending_age is not None else ""


def _ops_status(team_ids: list[int] | None) -> dict[str, Any]:
    now = timezone.now()
    queues = []
    for source in ops_selectors.job_sources():
        stats = ops_selectors.job_queue_stats(source=source, since=now - OPS_RECENT_WINDOW, team_ids=team_ids)
        queues.append(
            QueueView(
                source=source,
                stats=stats,
                failures=ops_selectors.job_failures(source=source, limit=OPS_FAILURES_SHOWN, team_ids=team_ids),
                oldest_pending_age=max(now - stats.oldest_pending_at, timedelta(0))
                if stats.oldest_pending_at
                else None,
                retryable=source.kind in RETRY_SERVICES,
            )
        )
    return {
        "queues": queues,
        "index_backlog": ops_selectors.search_index_backlog(team_ids=team_ids),
        "index_failures": ops_selectors.search_index_failures(team_ids=team_ids, limit=OPS_INDEX_FAILURES_SHOWN),
        "workers": ops_selectors.workers_seen(
            timeout=OPS_PING_TIMEOUT, deadline=OPS_PING_DEADLINE, remember=OPS_WORKER_MEMORY
        ),
        "worker_memory": OPS_WORKER_MEMORY,
        "checked_at": now,
        "refresh_seconds": OPS_REFRESH_SECONDS,
        "all_teams": team_ids is None,
    }


@ops_page
def ops(request: HttpRequest, *, team_ids: list[int] | None) -> HttpResponse:
    return render(request, "memory_app/ops.html", _ops_status(team_ids))


@ops_page
def ops_status(request: HttpRequest, *, team_ids: list[int] | None) -> HttpResponse:
    """The live part of the ops page, re-fetched by static/js/dashboard.js every few seconds."""
    return render(request, "snippets/ops_status.html", _ops_status(team_ids))


@ops_page
@require_POST
def ops_job_retry(request: HttpRequest, kind: str, job_id: uuid.UUID, *, team_ids: list[int] | None) -> HttpResponse:
    source = get_or_404(ops_selectors.job_source_get, kind=kind)
    job = get_or_404(ops_selectors.job_get, source=source, job_id=job_id, team_ids=team_ids)
    retry = RETRY_SERVICES.get(source.kind)
    if retry is None:
        raise Http404("This kind of job cannot be retried.")
    try:
        new_job, created = retry(job)
    except Conflict as exc:
        flash.error(request, exc.detail)
    else:
        if not source.per_session:
            owner = f"team {job.team.name}"
        else:
            owner = f"session {job.session}" if job.session_id else "no session"
        if created and source.retries_in_place:
            flash.success(request, f"{source.label}: job {job.pk} ({owner}) is queued again.")
        elif created:
            flash.success(request, f"{source.label}: queued a new job for {owner} ({new_job.pk}).")
        else:
            flash.info(request, f"{source.label}: {owner} already has a {new_job.status} job.")
    return redirect("dashboard:ops")


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@ops_page
@require_POST
def ops_search_reindex(request: HttpRequest, *, team_ids: list[int] | None) -> HttpResponse:
    """Rebuild one team's search index from its sources (manage.py reindex --team, for a team admin)."""
    team_id = non_negative_int(request.POST.get("team"))
    if team_id is None or (team_ids is not None and team_id not in team_ids):
        raise Http404("Not a team you administer.")
    team = Team.objects.filter(pk=team_id).first()
    if team is None:
        raise Http404("No such team.")
    counts = search.search_reindex(team_id=team.pk)
    changes = []
    if counts["stale"]:
        changes.append(_counted(counts["stale"], "changed piece") + " to embed")
    if counts["reembed"]:
        changes.append(_counted(counts["reembed"], "item") + " made by another model to embed again")
    if counts["sources"]:
        changes.append(f"the messages of {_counted(counts['sources'], 'session')} to read again")
    found = "; ".join(changes) or "nothing had changed"
    flash.success(request, f"Search index of {team.name}: rebuilding ({found}). A worker does the rest.")
    return redirect(reverse("dashboard:ops") + "#search-index")
