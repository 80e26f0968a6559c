"""What the ops pages read: the durable job queues per kind and team, each job's history, detail
and throughput, and the workers that answer a broadcast (with the queues each consumes).

The kinds come from the registry (memory_app.jobs.kinds); `source` is the kind whose rows a
selector reads."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import (
    BooleanField,
    Case,
    CharField,
    Count,
    DateTimeField,
    Exists,
    F,
    IntegerField,
    Min,
    OuterRef,
    Q,
    QuerySet,
    UUIDField,
    Value,
    When,
)
from django.db.models.functions import Substr
from django.utils import timezone

from memory_app.jobs import JobKind, job_kind_get, job_kinds
from memory_app.jobs.models import WorkerHeartbeat
from memory_app.search.models import SearchItem
from memory_app.tenancy.models import Team
from memsite.errors import NotFound


def _finished(source: JobKind) -> Any:
    """When a job ended, as an expression (NULL while it has not)."""
    if source.finished_field:
        return F(source.finished_field)
    done_at, failed_at = source.done_at_field, source.touched_field
    if done_at is None or failed_at is None:  # a kind that records neither: its jobs never show as ended
        return Value(None, output_field=DateTimeField())
    return Case(
        When(status=source.done, then=F(done_at)),
        When(status=source.failed, then=F(failed_at)),
        default=None,
        output_field=DateTimeField(),
    )


def _state(source: JobKind) -> Any:
    """The status in the words every kind shares (running, done), other statuses as they are."""
    return Case(
        When(status=source.active, then=Value("running")),
        When(status=source.done, then=Value("done")),
        default=F("status"),
        output_field=CharField(),
    )


def _status_for(source: JobKind, state: str) -> str:
    return {"running": source.active, "done": source.done}.get(state, state)


@dataclass(frozen=True)
class TeamJobCounts:
    team_id: int
    team_name: str
    pending: int = 0
    running: int = 0
    failed: int = 0
    quarantined: int = 0


@dataclass(frozen=True)
class QueueStats:
    pending: int
    running: int
    failed: int
    failed_recently: int  # failed since the `since` given
    oldest_pending_at: datetime | None  # when the longest-waiting pending job last became pending
    by_team: list[TeamJobCounts]  # teams with any pending, running, failed (or quarantined) job, busiest first
    quarantined: int = 0


def _jobs_of(source: JobKind, team_ids: list[int] | None) -> QuerySet[Any]:
    jobs = source.model._default_manager.all()
    return jobs if team_ids is None else jobs.filter(team_id__in=team_ids)


def job_queue_stats(*, source: JobKind, since: datetime, team_ids: list[int] | None) -> QueueStats:
    """Counts per status (and per team) in one grouped query on the status index.

    A pending job's wait runs from `pending_since`, when it last became pending (queued, or put
    back by a retry), which the sweeper's re-sends do not move: so a stuck queue keeps ageing, and
    a job retried a moment ago is not counted from its creation.
    """
    watched = ["pending", source.active, "failed", *(["quarantined"] if source.quarantines else [])]
    rows = (
        _jobs_of(source, team_ids)
        .filter(status__in=watched)
        .alias(ended=_finished(source))
        .order_by()
        .values("team_id", "team__name", "status")
        .annotate(n=Count("pk"), oldest=Min("pending_since"), recent=Count("pk", filter=Q(ended__gte=since)))
    )
    totals = dict.fromkeys(("pending", "running", "failed", "quarantined"), 0)
    teams: dict[int, dict[str, Any]] = {}
    oldest: datetime | None = None
    recent = 0
    for row in rows:
        state = "running" if row["status"] == source.active else row["status"]
        totals[state] += row["n"]
        team = teams.setdefault(row["team_id"], {"team_id": row["team_id"], "team_name": row["team__name"]})
        team[state] = row["n"]
        if state == "pending" and (oldest is None or row["oldest"] < oldest):
            oldest = row["oldest"]
        if state == "failed":
            recent += row["recent"]
    by_team = sorted(
        (TeamJobCounts(**team) for team in teams.values()),
        key=lambda t: (-(t.pending + t.running), -(t.failed + t.quarantined), t.team_name),
    )
    return QueueStats(
        pending=totals["pending"],
        running=totals["running"],
        failed=totals["failed"],
        failed_recently=recent,
        oldest_pending_at=oldest,
        by_team=by_team,
        quarantined=totals["quarantined"],
    )


def _related(source: JobKind) -> tuple[str, ...]:
    return ("team", *(("session",) if source.per_session else ()), *(("webhook",) if source.redelivered else ()))


def job_failures(*, source: JobKind, limit: int, team_ids: list[int] | None) -> list[Any]:
    """The latest failed jobs with their team and session; `retried` marks those whose
    session (or team, for a job of a whole team) has had a job queued since (a retry, or a
    later automatic run), or that were delivered again. A job retried in place is pending
    again, so it is simply no longer listed."""
    model: Any = source.model
    owner = "session_id" if source.per_session else "team_id"
    retried: Any
    if source.retries_in_place:
        retried = Value(False, output_field=BooleanField())
    elif source.redelivered:
        retried = Exists(model.objects.filter(redelivery_of=OuterRef("pk")))
    else:
        retried = Exists(model.objects.filter(**{owner: OuterRef(owner)}, created_at__gt=OuterRef("created_at")))
    return list(
        _jobs_of(source, team_ids)
        .filter(status="failed")
        .select_related(*_related(source))
        .annotate(retried=retried, ended=_finished(source))
        .order_by(F("ended").desc(nulls_last=True), "-created_at")[:limit]
    )


def job_get(*, source: JobKind, job_id: uuid.UUID | str, team_ids: list[int] | None) -> Any:
    """A job of one of `team_ids` (None: any team); another team's job is not found."""
    try:
        return (
            _jobs_of(source, team_ids)
            .select_related(*_related(source))
            .annotate(ended=_finished(source))
            .get(pk=job_id)
        )
    except (ObjectDoesNotExist, ValueError, TypeError) as exc:
        raise NotFound("Job not found.") from exc


# --- history: every kind's jobs in one list ---------------------------------------------------------

# The orders the history offers, by query value: (label, terms over the union's column names).
HISTORY_SORTS: dict[str, tuple[str, tuple[Any, ...]]] = {
    "-queued": ("newest first", (F("created_at").desc(), F("id").desc())),
    "queued": ("oldest first", (F("created_at").asc(), F("id").asc())),
    "-finished": ("latest finished", (F("finished").desc(nulls_last=True), F("id").desc())),
    "-duration": ("slowest first", (F("took_ms").desc(nulls_last=True), F("id").desc())),
    "-attempts": ("most attempts", (F("attempts").desc(), F("created_at").desc())),
}
HISTORY_STATES = ("pending", "running", "done", "failed", "skipped", "budget_exceeded", "quarantined", "reverted")
ERROR_PREVIEW = 300  # characters of an error a history row shows
# Characters of an error a history row reads: twice the preview, so a secret that starts inside the
# preview is read whole and masked (memory_app.ops.pages) before the preview is cut from it.
ERROR_PREVIEW_READ = ERROR_PREVIEW * 2


def _history_rows(source: JobKind, team_ids: list[int] | None, state: str | None) -> QuerySet[Any]:
    jobs = _jobs_of(source, team_ids)
    if state:
        jobs = jobs.filter(status=_status_for(source, state))
    none_text = Value(None, output_field=CharField())
    session = (
        {"session_ref": F("session_id"), "session_name": F("session__external_id")}
        if source.per_session
        else {"session_ref": Value(None, output_field=UUIDField()), "session_name": none_text}
    )
    duration = F(source.duration_field) if source.duration_field else Value(None, output_field=IntegerField())
    return (
        jobs.order_by()
        .annotate(
            job_kind=Value(source.kind, output_field=CharField()),
            state=_state(source),
            team_name=F("team__name"),
            subject=F(source.subject_field),
            started=F(source.claimed_field),
            finished=_finished(source),
            took_ms=duration,
            error_preview=Substr("error", 1, ERROR_PREVIEW_READ),
            **session,
        )
        .values(
            "id",
            "job_kind",
            "status",
            "state",
            "team_name",
            "session_ref",
            "session_name",
            "subject",
            "attempts",
            "created_at",
            "pending_since",
            "started",
            "finished",
            "took_ms",
            "worker",
            "error_preview",
        )
    )


def job_history(*, team_ids: list[int] | None, kind: str | None, state: str | None, sort: str) -> QuerySet[Any]:
    """Jobs of every kind (or of `kind`), in `state` (or any), in the order `sort` names
    (HISTORY_SORTS): one UNION query the database sorts and a Paginator slices. Rows are dicts."""
    sources = [job_kind_get(kind=kind)] if kind else job_kinds()
    parts = [_history_rows(source, team_ids, state) for source in sources]
    rows = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    _, order = HISTORY_SORTS.get(sort, HISTORY_SORTS["-queued"])
    return rows.order_by(*order)


# --- throughput and latency ------------------------------------------------------------------------


@dataclass(frozen=True)
class Bucket:
    start: datetime
    done: int = 0
    failed: int = 0  # ended in any other way (failed, skipped, quarantined...)

    @property
    def total(self) -> int:
        return self.done + self.failed


@dataclass(frozen=True)
class Throughput:
    source: JobKind
    buckets: list[Bucket]
    finished: int  # jobs that ended in the window, in any status
    p50_ms: int | None  # of the last attempt's duration of those jobs
    p95_ms: int | None
    timed: int  # how many of them have a duration


def percentile(sorted_values: list[int], fraction: float) -> int | None:
    """The nearest-rank percentile: the smallest value at least `fraction` of them do not exceed."""
    if not sorted_values:
        return None
    return sorted_values[max(math.ceil(fraction * len(sorted_values)) - 1, 0)]


def job_throughput(
    *, source: JobKind, team_ids: list[int] | None, now: datetime, bucket: timedelta, buckets: int
) -> Throughput:
    """Jobs of `source` that ended in the last `buckets` x `bucket`, counted per bucket (done or
    not), with the p50 and p95 of their durations: one query over the ended ones' timestamps."""
    since = now - bucket * buckets
    duration = F(source.duration_field) if source.duration_field else Value(None, output_field=IntegerField())
    rows = (
        _jobs_of(source, team_ids)
        .alias(ended=_finished(source))
        .filter(ended__gt=since, ended__lte=now)
        .annotate(ended_at=F("ended"), took=duration, began=F(source.claimed_field))
        .values_list("ended_at", "status", "took", "began")
    )
    counts = [[0, 0] for _ in range(buckets)]
    durations: list[int] = []
    for ended, status, took, began in rows:
        index = min(int((ended - since) / bucket), buckets - 1)
        counts[index][0 if status == source.done else 1] += 1
        if took is None and began is not None:  # a kind that keeps no duration: claim to end
            took = int((ended - began).total_seconds() * 1000)
        if took is not None:
            durations.append(max(int(took), 0))
    durations.sort()
    return Throughput(
        source=source,
        buckets=[Bucket(start=since + bucket * i, done=d, failed=f) for i, (d, f) in enumerate(counts)],
        finished=sum(d + f for d, f in counts),
        p50_ms=percentile(durations, 0.5),
        p95_ms=percentile(durations, 0.95),
        timed=len(durations),
    )


# --- the search index's backlog ---------------------------------------------------------------------


@dataclass(frozen=True)
class TeamIndexCounts:
    """A team's indexed items per state."""

    team_id: int
    team_name: str
    pending: int = 0
    indexed: int = 0
    failed: int = 0


@dataclass(frozen=True)
class IndexBacklog:
    pending: int
    indexed: int
    failed: int
    by_team: list[TeamIndexCounts]  # most pending first, then most failed


def search_index_backlog(*, team_ids: list[int] | None) -> IndexBacklog:
    """Items per team and state, for every team at once, in one grouped query. A team admin's
    teams are all listed, with or without items: each row has a Reindex button."""
    items = SearchItem.objects.all() if team_ids is None else SearchItem.objects.filter(team_id__in=team_ids)
    rows = items.order_by().values("team_id", "team__name", "state").annotate(n=Count("pk"))
    teams: dict[int, dict[str, Any]] = {}
    if team_ids is not None:
        for pk, name in Team.objects.filter(pk__in=team_ids).values_list("pk", "name"):
            teams[pk] = {"team_id": pk, "team_name": name}
    for row in rows:
        team = teams.setdefault(row["team_id"], {"team_id": row["team_id"], "team_name": row["team__name"]})
        team[row["state"]] = row["n"]
    by_team = sorted(
        (TeamIndexCounts(**team) for team in teams.values()), key=lambda t: (-t.pending, -t.failed, t.team_name)
    )
    return IndexBacklog(
        pending=sum(t.pending for t in by_team),
        indexed=sum(t.indexed for t in by_team),
        failed=sum(t.failed for t in by_team),
        by_team=by_team,
    )


def search_index_failures(*, team_ids: list[int] | None, limit: int) -> list[SearchItem]:
    """The latest items the embedding backend refused (on the backlog's partial index), with their team."""
    items = SearchItem.objects.filter(state=SearchItem.State.FAILED)
    if team_ids is not None:
        items = items.filter(team_id__in=team_ids)
    fields = (
        "id",
        "team__name",
        "kind",
        "source_key",
        "chunk",
        "session_id",
        "seq",
        "error",
        "occurred_at",
        "indexed_at",
    )
    return list(items.select_related("team").only(*fields).order_by("-pk")[:limit])


@dataclass(frozen=True)
class RunningJob:
    """A job a worker has claimed and not finished: what one of its slots is doing."""

    kind: str  # the job kind's key, for its detail page's URL
    label: str
    job_id: Any
    team_name: str
    session_id: Any  # None for a job of a whole team (the search index) or of no session (a webhook)
    seconds: int  # since the worker claimed it


@dataclass(frozen=True)
class WorkerSeen:
    name: str
    seconds_ago: int  # since its latest heartbeat
    queues: tuple[str, ...] = ()  # the queues it says it consumes
    concurrency: int = 0  # its slots
    pid: int = 0
    started_at: datetime | None = None
    alive: bool = True  # beat within the lost-after window and did not stop
    stopped: bool = False  # shut down cleanly
    running: tuple[RunningJob, ...] = ()

    @property
    def idle_slots(self) -> int:
        return max(self.concurrency - len(self.running), 0)


@dataclass(frozen=True)
class WorkersSeen:
    """Every worker's own heartbeats: the one account of worker liveness the ops page shows."""

    workers: list[WorkerSeen]  # alive ones first, then those stopped or lost in the last day
    lost_after: float = 30.0  # seconds without a heartbeat after which a worker counts as lost

    @property
    def alive(self) -> list[WorkerSeen]:
        return [worker for worker in self.workers if worker.alive]

    @property
    def gone(self) -> list[WorkerSeen]:
        return [worker for worker in self.workers if not worker.alive]

    @property
    def names(self) -> list[str]:
        return [worker.name for worker in self.alive]

    @property
    def latest_seconds_ago(self) -> int | None:
        return min((worker.seconds_ago for worker in self.alive), default=None)

    def consumers_of(self, queue: str) -> list[str]:
        return [worker.name for worker in self.alive if queue in worker.queues]

    @property
    def summary(self) -> str:
        n = len(self.alive)
        if not n:
            return f"No worker has sent a heartbeat in the last {self.lost_after:g} s."
        busy = sum(len(worker.running) for worker in self.alive)
        slots = sum(worker.concurrency for worker in self.alive)
        return f"{n} worker{'' if n == 1 else 's'} alive, {busy} of {slots} slot{'' if slots == 1 else 's'} busy."


def workers_seen(*, team_ids: list[int] | None, lost_after: float, now: datetime | None = None) -> WorkersSeen:
    """Workers from their own heartbeat rows (memory_app.jobs.heartbeat), each with the jobs it
    has claimed and not finished. A worker whose slots are all busy keeps beating: a thread of its
    main process writes the row, not the busy pool. An operator of some teams sees those teams'
    jobs in the slots; every worker is listed, as every team's jobs share them."""
    now = now or timezone.now()
    rows = list(WorkerHeartbeat.objects.order_by("name"))
    running = _running_jobs([row.name for row in rows], team_ids=team_ids, now=now)
    workers = [
        WorkerSeen(
            name=row.name,
            seconds_ago=max(int((now - row.beat_at).total_seconds()), 0),
            queues=tuple(row.queues),
            concurrency=row.concurrency,
            pid=row.pid,
            started_at=row.started_at,
            alive=row.stopped_at is None and (now - row.beat_at).total_seconds() <= lost_after,
            stopped=row.stopped_at is not None,
            running=tuple(running.get(row.name, ())),
        )
        for row in rows
    ]
    workers.sort(key=lambda worker: (not worker.alive, worker.name))
    return WorkersSeen(workers=workers, lost_after=lost_after)


def _running_jobs(names: list[str], *, team_ids: list[int] | None, now: datetime) -> dict[str, list[RunningJob]]:
    """Worker name -> its claimed, unfinished jobs of every kind, longest running first."""
    out: dict[str, list[RunningJob]] = {}
    if not names:
        return out
    for source in job_kinds():
        has_session = any(f.name == "session" for f in source.model._meta.get_fields())
        fields = ["pk", "worker", source.claimed_field, "team__name", *(["session_id"] if has_session else [])]
        claimed = _jobs_of(source, team_ids).filter(status=source.active, worker__in=names).values(*fields)
        for row in claimed:
            since = row[source.claimed_field]
            out.setdefault(row["worker"], []).append(
                RunningJob(
                    kind=source.kind,
                    label=source.label,
                    job_id=row["pk"],
                    team_name=row["team__name"],
                    session_id=row.get("session_id"),
                    seconds=max(int((now - since).total_seconds()), 0) if since else 0,
                )
            )
    for jobs_of_worker in out.values():
        jobs_of_worker.sort(key=lambda job: -job.seconds)
    return out
