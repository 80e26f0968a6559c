"""The ops pages, for the teams the user administers: the queues (with the workers consuming each,
throughput and latency, failures with retry and the search index's backlog), the history of every
job, and one job's detail (arguments, attempts, timings, error and traceback, worker)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from memory_app import jobs
from memory_app.dashboard.decorators import get_or_404, non_negative_int, redirect_back
from memory_app.ops import selectors as ops_selectors
from memory_app.ops.charts import WINDOWS, Chart, Window, throughput_chart
from memory_app.search import services as search
from memory_app.tenancy import selectors as tenancy_selectors
from memory_app.tenancy.models import Team
from memsite.errors import Conflict
from memsite.masking import mask_secrets

OPS_FAILURES_SHOWN = 20


# Items the embedding backend refused, listed under the search index's backlog.
OPS_INDEX_FAILURES_SHOWN = 20


OPS_REFRESH_SECONDS = 5


OPS_RECENT_WINDOW = timedelta(hours=24)


OPS_JOBS_PER_PAGE = 25


# A retry this late past its due time is flagged overdue: no worker took it when it was due
# (the filesystem broker polls each second; a busy queue adds its wait).
OPS_RETRY_GRACE_SECONDS = 30


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


def milliseconds(ms: int | None) -> str:
    """A duration in milliseconds as people read it: "850 ms", "4.2 s", "3 min 5 s"."""
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return short_duration(timedelta(milliseconds=ms))


@dataclass(frozen=True)
class QueueView:
    source: jobs.JobKind
    stats: ops_selectors.QueueStats
    failures: list[Any]
    oldest_pending_age: timedelta | None
    retryable: bool  # the kind has a retry service
    consumers: list[str]  # workers that said they consume its queue
    throughput: ops_selectors.Throughput
    chart: Chart

    @property
    def oldest_pending_label(self) -> str:
        return short_duration(self.oldest_pending_age) if self.oldest_pending_age is not None else ""

    @property
    def unserved(self) -> bool:
        """Jobs wait and no worker that answered consumes the queue: they will wait forever."""
        return self.stats.pending > 0 and not self.consumers

    @property
    def p50_label(self) -> str:
        return milliseconds(self.throughput.p50_ms)

    @property
    def p95_label(self) -> str:
        return milliseconds(self.throughput.p95_ms)


def worker_lost_after() -> float:
    """Seconds without a heartbeat after which the ops page counts a worker as lost."""
    return float(settings.WORKER_HEARTBEAT_SECONDS * settings.WORKER_LOST_AFTER_BEATS)


def _window(request: HttpRequest) -> Window:
    return WINDOWS.get(request.GET.get("window", ""), WINDOWS["hour"])


def _ops_status(team_ids: list[int] | None, window: Window) -> dict[str, Any]:
    now = timezone.now()
    workers = ops_selectors.workers_seen(team_ids=team_ids, lost_after=worker_lost_after(), now=now)
    queues = []
    for source in jobs.job_kinds():
        stats = ops_selectors.job_queue_stats(source=source, since=now - OPS_RECENT_WINDOW, team_ids=team_ids)
        throughput = ops_selectors.job_throughput(
            source=source, team_ids=team_ids, now=now, bucket=window.bucket, buckets=window.buckets
        )
        queues.append(
            QueueView(
                source=source,
                stats=stats,
                failures=ops_selectors.job_failures(source=source, limit=OPS_FAILURES_SHOWN, team_ids=team_ids),
                oldest_pending_age=max(now - stats.oldest_pending_at, timedelta(0))
                if stats.oldest_pending_at
                else None,
                retryable=source.retry_service is not None,
                consumers=workers.consumers_of(source.queue),
                throughput=throughput,
                chart=throughput_chart(throughput, window),
            )
        )
    return {
        "queues": queues,
        "unserved": [q for q in queues if q.unserved],
        "index_backlog": ops_selectors.search_index_backlog(team_ids=team_ids),
        "index_failures": ops_selectors.search_index_failures(team_ids=team_ids, limit=OPS_INDEX_FAILURES_SHOWN),
        "workers": workers,
        "checked_at": now,
        "refresh_seconds": OPS_REFRESH_SECONDS,
        "all_teams": team_ids is None,
        "window": window,
        "windows": WINDOWS.values(),
    }


@ops_page
def ops(request: HttpRequest, *, team_ids: list[int] | None) -> HttpResponse:
    return render(request, "memory_app/ops.html", _ops_status(team_ids, _window(request)))


@ops_page
def ops_status(request: HttpRequest, *, team_ids: list[int] | None) -> HttpResponse:
    """The live part of the ops page, re-fetched by static/js/dashboard.js every few seconds."""
    return render(request, "snippets/ops_status.html", _ops_status(team_ids, _window(request)))


# --- the history of every job, and one job -----------------------------------------------------------


def _history_row(row: dict[str, Any], kinds: dict[str, str]) -> dict[str, Any]:
    """A history row with its kind's label, its duration (claim to end when the kind keeps none) in
    words, and the start of its error with secrets masked (rows stored before masking hold them)."""
    took = row["took_ms"]
    if took is None and row["started"] and row["finished"]:
        took = max(int((row["finished"] - row["started"]).total_seconds() * 1000), 0)
    preview = mask_secrets(row["error_preview"] or "")[: ops_selectors.ERROR_PREVIEW]
    return {
        **row,
        "kind_label": kinds[row["job_kind"]],
        "took_ms": took,
        "took_label": milliseconds(took),
        "error_preview": preview,
    }


@ops_page
def ops_jobs(request: HttpRequest, *, team_ids: list[int] | None) -> HttpResponse:
    """Every job of every kind, from the database: filtered by kind and state, sorted, paginated."""
    kinds = {source.kind: source.label for source in jobs.job_kinds()}
    kind = request.GET.get("kind", "")
    kind = kind if kind in kinds else ""
    state = request.GET.get("state", "")
    state = state if state in ops_selectors.HISTORY_STATES else ""
    sort = request.GET.get("sort", "")
    sort = sort if sort in ops_selectors.HISTORY_SORTS else "-queued"
    rows = ops_selectors.job_history(team_ids=team_ids, kind=kind or None, state=state or None, sort=sort)
    page = Paginator(rows, OPS_JOBS_PER_PAGE).get_page(request.GET.get("page"))
    context = {
        "page": page,
        "rows": [_history_row(row, kinds) for row in page.object_list],
        "kinds": kinds,
        "kind": kind,
        "states": [(key, key.replace("_", " ")) for key in ops_selectors.HISTORY_STATES],
        "state": state,
        "sorts": {key: label for key, (label, _) in ops_selectors.HISTORY_SORTS.items()},
        "sort": sort,
        "sort_label": ops_selectors.HISTORY_SORTS[sort][0],
        "all_teams": team_ids is None,
    }
    return render(request, "memory_app/ops/jobs.html", context)


def _argument(job: Any, name: str) -> tuple[str, Any, bool]:
    """(label, value, whether the value is JSON text to show as code)."""
    label = str(job._meta.get_field(name).verbose_name)
    value = getattr(job, name)
    if isinstance(value, dict | list):
        return label, json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True), True
    return label, value, False


@ops_page
def ops_job(request: HttpRequest, kind: str, job_id: uuid.UUID, *, team_ids: list[int] | None) -> HttpResponse:
    """One job: what it was asked to do, its attempts and timings, its error and traceback, the
    worker that ran its latest attempt, and a retry button where its kind has one."""
    source = get_or_404(jobs.job_kind_get, kind=kind)
    job = get_or_404(ops_selectors.job_get, source=source, job_id=job_id, team_ids=team_ids)
    started = getattr(job, source.claimed_field)
    duration = getattr(job, source.duration_field) if source.duration_field else None
    if duration is None and started and job.ended:
        duration = max(int((job.ended - started).total_seconds() * 1000), 0)
    # Put back after a failed attempt, the job is pending again: the claim shown is the attempt
    # before, and the next one is due at the time the retry set (its queued field).
    waiting_to_retry = job.status == source.pending and bool(started) and started < job.pending_since
    next_attempt = getattr(job, source.queued_field) if waiting_to_retry else None
    overdue = (
        short_duration(timezone.now() - next_attempt)
        if next_attempt and timezone.now() - next_attempt > timedelta(seconds=OPS_RETRY_GRACE_SECONDS)
        else ""
    )
    context = {
        "source": source,
        "job": job,
        "task_call": f'{source.task}("{job.pk}")',
        "arguments": [_argument(job, name) for name in source.argument_fields],
        "max_attempts": source.max_attempts,
        "started": started,
        "waited": short_duration(started - job.pending_since) if started and started >= job.pending_since else "",
        "waiting_to_retry": waiting_to_retry,
        "next_attempt": next_attempt,
        "overdue": overdue,
        "duration_label": milliseconds(duration),
        "state": "running" if job.status == source.active else ("done" if job.status == source.done else job.status),
        "retryable": source.retry_service is not None and job.status in ("failed", "quarantined"),
        "all_teams": team_ids is None,
    }
    return render(request, "memory_app/ops/job.html", context)


@ops_page
@require_POST
def ops_job_retry(request: HttpRequest, kind: str, job_id: uuid.UUID, *, team_ids: list[int] | None) -> HttpResponse:
    source = get_or_404(jobs.job_kind_get, kind=kind)
    job = get_or_404(ops_selectors.job_get, source=source, job_id=job_id, team_ids=team_ids)
    try:
        new_job, created = get_or_404(jobs.job_retry, kind=source, job=job)
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
    return redirect_back(request, reverse("dashboard:ops"))


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
