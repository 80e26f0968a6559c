"""What the ops page reads: the durable job queues per kind and team, and the workers that answer a ping."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import BooleanField, Count, Exists, F, Min, OuterRef, Q, QuerySet, Value

from memory_app.compaction.models import CompactionRun
from memory_app.facts.models import FactExtractionRun
from memory_app.search.models import IndexRun, SearchItem
from memory_app.tenancy.models import Team
from memsite.errors import NotFound

JobModel = type[CompactionRun] | type[FactExtractionRun] | type[IndexRun]


@dataclass(frozen=True)
class JobSource:
    """A kind of durable background job the ops page watches.

    Its model has a team and (unless `per_session` is False) a nullable session foreign key,
    `status` with the values pending, running, done and failed, `error`, `attempts`, `trigger`,
    `created_at` and `finished_at` (CompactionRun's shape, which FactExtractionRun shares).
    """

    kind: str  # url-safe key
    label: str
    queue: str  # the Celery queue its tasks are sent to
    model: JobModel
    # Jobs whose output was unusable and wait for staff (fact extraction's "quarantined").
    quarantines: bool = False
    # Its retry service re-queues the failed job itself rather than queueing a new one,
    # so a failed job is never "retried" while it is still listed as failed.
    retries_in_place: bool = False
    # A job of a whole team (the search index's) has no session: a later job of the team retried it.
    per_session: bool = True


def job_sources() -> list[JobSource]:
    """Every job kind, in the order the ops page shows them. A new kind adds one entry."""
    return [
        JobSource(kind="compaction", label="Context compaction", queue=settings.COMPACTION_QUEUE, model=CompactionRun),
        JobSource(
            kind="facts",
            label="Fact extraction",
            queue=settings.FACTS_QUEUE,
            model=FactExtractionRun,
            quarantines=True,
            retries_in_place=True,
        ),
        JobSource(
            kind="search", label="Search indexing", queue=settings.SEARCH_QUEUE, model=IndexRun, per_session=False
        ),
    ]


def job_source_get(*, kind: str) -> JobSource:
    for source in job_sources():
        if source.kind == kind:
            return source
    raise NotFound("No such job kind.")


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
    oldest_pending_at: datetime | None
    by_team: list[TeamJobCounts]  # teams with any pending, running, failed (or quarantined) job, busiest first
    quarantined: int = 0


_WATCHED_STATUSES = ("pending", "running", "failed")


def _jobs_of(source: JobSource, team_ids: list[int] | None) -> QuerySet[Any]:
    jobs = source.model.objects.all()
    return jobs if team_ids is None else jobs.filter(team_id__in=team_ids)


def job_queue_stats(*, source: JobSource, since: datetime, team_ids: list[int] | None) -> QueueStats:
    """Counts per status (and per team) in one grouped query on the status index.

    The age of the oldest pending job runs from its creation: the sweeper moves
    `queued_at` forward each time it re-sends a job, which would hide a stuck queue.
    """
    watched = (*_WATCHED_STATUSES, "quarantined") if source.quarantines else _WATCHED_STATUSES
    rows = (
        _jobs_of(source, team_ids)
        .filter(status__in=watched)
        .order_by()
        .values("team_id", "team__name", "status")
        .annotate(n=Count("pk"), oldest=Min("created_at"), recent=Count("pk", filter=Q(finished_at__gte=since)))
    )
    totals = dict.fromkeys(watched, 0)
    teams: dict[int, dict[str, Any]] = {}
    oldest: datetime | None = None
    recent = 0
    for row in rows:
        totals[row["status"]] += row["n"]
        team = teams.setdefault(row["team_id"], {"team_id": row["team_id"], "team_name": row["team__name"]})
        team[row["status"]] = row["n"]
        if row["status"] == "pending" and (oldest is None or row["oldest"] < oldest):
            oldest = row["oldest"]
        if row["status"] == "failed":
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
        quarantined=totals.get("quarantined", 0),
    )


def job_failures(*, source: JobSource, limit: int, team_ids: list[int] | None) -> list[Any]:
    """The latest failed jobs with their team and session; `retried` marks those whose
    session (or team, for a job of a whole team) has had a job queued since (a retry, or a
    later automatic run). A job retried in place is pending again, so it is simply no longer listed."""
    model: Any = source.model
    owner = "session_id" if source.per_session else "team_id"
    if source.retries_in_place:
        retried: Any = Value(False, output_field=BooleanField())
    else:
        retried = Exists(model.objects.filter(**{owner: OuterRef(owner)}, created_at__gt=OuterRef("created_at")))
    return list(
        _jobs_of(source, team_ids)
        .filter(status="failed")
        .select_related(*(("team", "session") if source.per_session else ("team",)))
        .annotate(retried=retried)
        .order_by(F("finished_at").desc(nulls_last=True), "-created_at")[:limit]
    )


def job_get(*, source: JobSource, job_id: uuid.UUID | str, team_ids: list[int] | None) -> Any:
    """A job of one of `team_ids` (None: any team); another team's job is not found."""
    try:
        return (
            _jobs_of(source, team_ids)
            .select_related("team", *(("session",) if source.per_session else ()))
            .get(pk=job_id)
        )
    except (source.model.DoesNotExist, ValueError, TypeError) as exc:
        raise NotFound("Job not found.") from exc


# --- the search index's backlog ---------------------------------------------------------------------


@dataclass(frozen=True)
class TeamIndexCounts:
    """A team's indexed items per state (memory_app.search.selectors.index_status's counts)."""

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
    """Items per team and state in one grouped query (index_status's counts, for every team at
    once). A team admin's teams are all listed, with or without items: each row has a Reindex button."""
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
class WorkerSeen:
    name: str
    seconds_ago: int  # since its latest answer; 0 = it answered the ping just made


@dataclass(frozen=True)
class WorkersSeen:
    known: bool  # False: no answer lately, so nothing can be said (not even "none")
    workers: list[WorkerSeen]
    detail: str = ""  # why the ping just made got no answer, if it got none

    @property
    def names(self) -> list[str]:
        return [worker.name for worker in self.workers]


# One ping at a time per process: a ping stuck on an unreachable broker must not pile up
# threads while the ops page keeps polling.
_PING_IN_FLIGHT = threading.Lock()


# Worker name -> time.monotonic() of its latest answer, in this process. A broadcast reply
# can miss a short window (the filesystem broker polls once a second), so a worker counts
# as alive for a while after its last answer instead of flickering to "unknown".
_WORKERS_LAST_ANSWER: dict[str, float] = {}


def forget_workers() -> None:
    """Drop every remembered answer, so the next `workers_seen` knows only who answers then
    (tests start from no worker; a process otherwise keeps the memory for its lifetime)."""
    _WORKERS_LAST_ANSWER.clear()


def _ping_workers(timeout: float, deadline: float) -> str:
    """Ping in a daemon thread and record who answers; "" or why nobody did.

    A broker that is down makes kombu retry its connection for seconds: the caller waits
    `deadline` at most, and an answer that comes later still counts for the next call.
    """
    from memsite.celery import app as celery_app

    if not _PING_IN_FLIGHT.acquire(blocking=False):
        return "the previous ping has not returned yet"
    outcome: dict[str, Any] = {}

    def ping() -> None:
        try:
            replies = celery_app.control.ping(timeout=timeout)
            assert replies is not None  # ping broadcasts with reply=True: a list, maybe empty
            answered = time.monotonic()
            names = [name for reply in replies if isinstance(reply, dict) for name in reply]
            _WORKERS_LAST_ANSWER.update(dict.fromkeys(names, answered))
            outcome["names"] = names
        except Exception as exc:  # broker unreachable, broadcast unsupported...
            outcome["error"] = f"{type(exc).__name__}: {exc}"[:200]
        finally:
            _PING_IN_FLIGHT.release()

    thread = threading.Thread(target=ping, name="ops-worker-ping", daemon=True)
    thread.start()
    thread.join(deadline)
    if "error" in outcome:
        return f"the ping failed ({outcome['error']})"
    if "names" not in outcome:
        return f"the broker did not answer within {deadline:g} s"
    return "" if outcome["names"] else f"no worker answered the ping within {timeout:g} s"


def workers_seen(*, timeout: float = 0.5, deadline: float = 2.0, remember: float = 30.0) -> WorkersSeen:
    """Workers that answered a broadcast ping (celery's control ping) in the last `remember` s."""
    detail = _ping_workers(timeout, deadline)
    now = time.monotonic()
    for name, answered in list(_WORKERS_LAST_ANSWER.items()):
        if now - answered > remember:
            _WORKERS_LAST_ANSWER.pop(name, None)
    workers = sorted(
        (WorkerSeen(name=name, seconds_ago=int(now - answered)) for name, answered in _WORKERS_LAST_ANSWER.items()),
        key=lambda worker: worker.name,
    )
    return WorkersSeen(known=bool(workers), workers=workers, detail=detail)
