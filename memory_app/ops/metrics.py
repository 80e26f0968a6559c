"""Every Prometheus metric memsite exposes, and the functions that record them.

prometheus_client runs in multiprocess mode (PROMETHEUS_MULTIPROC_DIR, set in settings):
each gunicorn worker and each Celery worker process writes its samples to files in that
folder, and `/metrics` (memsite/metrics_view.py) sums them, so a scrape sees the requests of
every web worker and the jobs of every Celery process. Queue depth is not recorded here at
all: job state lives in the database, so it is read from there when Prometheus scrapes.

Labels take values from small fixed sets (URL patterns, never raw paths; job kinds; LLM
purposes), so the number of series stays bounded.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec

from django.conf import settings
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from memory_app.jobs import job_kinds
from memory_app.llm.base import LLMPayloadTooLarge, LLMPermanentError, LLMResult, LLMTransientError

log = logging.getLogger(__name__)
P = ParamSpec("P")

# --- HTTP ---------------------------------------------------------------------------------
HTTP_REQUESTS = Counter(
    "memsite_http_requests",
    "HTTP requests answered, by URL pattern, method and status.",
    ["endpoint", "method", "status"],
)
HTTP_REQUEST_SECONDS = Histogram(
    "memsite_http_request_duration_seconds",
    "Time to answer an HTTP request (to the response headers), by URL pattern and method.",
    ["endpoint", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)


@functools.cache
def _requests_by_process() -> Gauge:
    """One series per live web process (multiprocess mode adds the `pid` label and drops it
    when gunicorn reports the worker dead), so an operator sees how load spreads over
    workers. Created on the first request: an unlabelled gauge writes a sample file as soon
    as it exists, and only processes that answer requests should have one."""
    return Gauge(
        "memsite_http_requests_by_process",
        "Requests answered by each live web worker process since it started.",
        multiprocess_mode="liveall",
    )


# --- background jobs (recorded in the Celery worker) --------------------------------------
JOBS = Counter("memsite_jobs", "Background jobs finished, by kind and outcome.", ["kind", "outcome"])
JOB_SECONDS = Histogram(
    "memsite_job_duration_seconds",
    "Wall time of a background job, by kind and outcome.",
    ["kind", "outcome"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0),
)

# --- LLM calls (recorded at the one LLM boundary, memory_app.llm.complete) ----------------
LLM_CALLS = Counter(
    "memsite_llm_calls", "LLM calls, by purpose, backend and outcome.", ["purpose", "backend", "outcome"]
)
LLM_TOKENS = Counter(
    "memsite_llm_tokens", "LLM tokens reported by the backend, by purpose and type.", ["purpose", "backend", "type"]
)
LLM_ERRORS = Counter("memsite_llm_errors", "Failed LLM calls, by purpose and kind.", ["purpose", "backend", "kind"])
LLM_CALL_SECONDS = Histogram(
    "memsite_llm_call_duration_seconds",
    "Wall time of an LLM call, by purpose and backend.",
    ["purpose", "backend"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
)

# --- MCP tool calls (one series per tool; the POST that carried each is in the HTTP series) --
MCP_TOOL_CALLS = Counter(
    "memsite_mcp_tool_calls", "MCP tool calls, by tool and outcome (ok or the error code).", ["tool", "outcome"]
)
MCP_TOOL_SECONDS = Histogram(
    "memsite_mcp_tool_call_duration_seconds",
    "Time to run an MCP tool, by tool.",
    ["tool"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)

_STATUS_OUTCOME = re.compile(r"^[a-z][a-z-]{0,39}$")
_ERROR_CODE = re.compile(r"^[a-z][a-z_]{0,39}$")


def observe_request(*, endpoint: str, method: str, status: int, seconds: float) -> None:
    """Count and time one request; `endpoint` is its URL pattern (memsite.middleware's label)."""
    HTTP_REQUESTS.labels(endpoint, method, str(status)).inc()
    HTTP_REQUEST_SECONDS.labels(endpoint, method).observe(seconds)
    _requests_by_process().inc()


def observe_mcp_call(*, tool: str, outcome: str, seconds: float) -> None:
    # Outcomes are the API's error codes (validation_error, not_found, ...): a bounded set.
    MCP_TOOL_CALLS.labels(tool, outcome if _ERROR_CODE.match(outcome) else "other").inc()
    MCP_TOOL_SECONDS.labels(tool).observe(seconds)


def job_outcome(status: str) -> str:
    """A task's status string as a bounded label: "retry-in-2.5s" -> "retry"."""
    if status.startswith("retry-in-"):
        return "retry"
    return status if _STATUS_OUTCOME.match(status) else "other"


def observe_job(*, kind: str, outcome: str, seconds: float) -> None:
    JOBS.labels(kind, outcome).inc()
    JOB_SECONDS.labels(kind, outcome).observe(seconds)
    log.info("job finished", extra={"job_kind": kind, "outcome": outcome, "duration_ms": int(seconds * 1000)})


def observed_job(kind: str, *, status_is_outcome: bool = True) -> Callable[[Callable[P, str]], Callable[P, str]]:
    """Time a task body and count its outcome: the status string it returns (or "ok" for
    sweepers, whose status is a report), "error" when it raises."""

    def decorate(body: Callable[P, str]) -> Callable[P, str]:
        @functools.wraps(body)
        def run(*args: P.args, **kwargs: P.kwargs) -> str:
            started = time.monotonic()
            outcome = "error"
            try:
                status = body(*args, **kwargs)
                outcome = job_outcome(status) if status_is_outcome else "ok"
                return status
            finally:
                observe_job(kind=kind, outcome=outcome, seconds=time.monotonic() - started)

        return run

    return decorate


def llm_error_kind(error: BaseException) -> str:
    if isinstance(error, LLMTransientError):
        return "transient"
    if isinstance(error, LLMPayloadTooLarge):
        return "payload_too_large"
    if isinstance(error, LLMPermanentError):
        return "permanent"
    return "unexpected"


def observe_llm_call(
    *, purpose: str, backend: str, seconds: float, result: LLMResult | None = None, error: BaseException | None = None
) -> None:
    """Record one LLM call: its tokens when it answered, its kind of failure when not."""
    LLM_CALL_SECONDS.labels(purpose, backend).observe(seconds)
    if error is not None:
        kind = llm_error_kind(error)
        LLM_CALLS.labels(purpose, backend, "error").inc()
        LLM_ERRORS.labels(purpose, backend, kind).inc()
        return
    LLM_CALLS.labels(purpose, backend, "ok").inc()
    if result is not None:
        LLM_TOKENS.labels(purpose, backend, "prompt").inc(result.prompt_tokens)
        LLM_TOKENS.labels(purpose, backend, "completion").inc(result.completion_tokens)


# --- queues: read from the job tables at scrape time ---------------------------------------


class QueueCollector(Collector):
    """Pending/running jobs and the age of the oldest pending one per queue, from the
    database (the job rows are the truth; a broker's own queue length misses lost messages
    and counts duplicates): one query per registered job kind counted in the queue gauges."""

    def collect(self) -> Iterator[Metric]:
        from memory_app.search.models import SearchItem

        jobs = GaugeMetricFamily("memsite_queue_jobs", "Jobs waiting or running, per queue.", labels=["queue", "state"])
        oldest = GaugeMetricFamily(
            "memsite_queue_oldest_pending_age_seconds",
            "Seconds the oldest pending job of a queue has been runnable (0 when none is due).",
            labels=["queue"],
        )
        now = timezone.now()
        for kind in job_kinds():
            if not kind.in_queue_gauges:
                continue
            counts = {"pending": 0, "running": 0}
            first_pending = None
            rows = (
                kind.model._default_manager.filter(status__in=kind.unfinished)
                .order_by()
                .values("status")
                .annotate(n=Count("pk"), first=Min(kind.queued_field))
            )
            for row in rows:
                state = "running" if row["status"] == kind.active else "pending"
                counts[state] = row["n"]
                if state == "pending":
                    first_pending = row["first"]
            for state, value in counts.items():
                jobs.add_metric([kind.queue, state], value)
            # A job waiting out a retry backoff has its queue clock in the future: not yet overdue.
            age = max(0.0, (now - first_pending).total_seconds()) if first_pending else 0.0
            oldest.add_metric([kind.queue], age)
        yield jobs
        yield oldest
        backlog = GaugeMetricFamily(
            "memsite_search_index_backlog",
            "Search index items not embedded yet (pending) or refused by the embedding backend (failed).",
            labels=["state"],
        )
        # Read from the partial index of items not indexed: cheap however large the index is.
        states = {SearchItem.State.PENDING.value: 0, SearchItem.State.FAILED.value: 0}
        not_indexed = SearchItem.objects.exclude(state=SearchItem.State.INDEXED).order_by()
        for row in not_indexed.values("state").annotate(n=Count("pk")):
            states[row["state"]] = row["n"]
        for state, value in states.items():
            backlog.add_metric([state], value)
        yield backlog


def metrics_dir() -> Path:
    path = Path(settings.PROMETHEUS_MULTIPROC_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def render_metrics() -> tuple[bytes, str]:
    """The exposition text: every process's samples summed, plus the queues read now."""
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(metrics_dir()))
    registry.register(QueueCollector())
    return generate_latest(registry), CONTENT_TYPE_LATEST


def mark_process_dead(pid: int) -> None:
    """Drop a dead process's live gauges (gunicorn's child_exit hook calls this)."""
    multiprocess.mark_process_dead(pid, str(metrics_dir()))
