"""/metrics served by gunicorn with 2 workers (multiprocess mode), including the jobs a real
Celery worker process ran, on the database and broker the tests run on."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from memory_app.compaction.models import CompactionRun
from tests.conftest import fill, make_tenant, managed_session
from tests.memsite.metrics_scrape import METRICS_TOKEN, Samples, parse, total
from tests.worker_process import process_env, start_gunicorn, stop, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SESSION_PATTERN = "/api/v1/sessions/<uuid:session_id>/"


def children(pid: int) -> set[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return {int(child) for child in text.split()}


@dataclass
class Gunicorn:
    process: subprocess.Popen[str]
    url: str
    metrics_dir: Path

    def scrape(self) -> Samples:
        response = httpx.get(f"{self.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=30)
        assert response.status_code == 200, response.text
        return parse(response.text)

    def workers(self) -> set[int]:
        return children(self.process.pid)

    def live_gauge_pids(self) -> set[int]:
        """Processes with a live-gauge sample file: those that answered a request and are not
        yet marked dead by the child_exit hook."""
        return {int(path.stem.rsplit("_", 1)[1]) for path in self.metrics_dir.glob("gauge_liveall_*.db")}


@pytest.fixture
def metrics_dir(tmp_path: Path) -> Path:
    path = tmp_path / "prometheus"
    path.mkdir()
    return path


@pytest.fixture
def worker_env(metrics_dir: Path) -> dict[str, str]:
    """Gunicorn and the Celery worker write their samples to one multiprocess directory."""
    return {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir), "MEMSITE_METRICS_TOKEN": METRICS_TOKEN}


@pytest.fixture
def gunicorn(worker_env: dict[str, str], metrics_dir: Path) -> Iterator[Gunicorn]:
    process, url = start_gunicorn(process_env(worker_env), workers=2)
    yield Gunicorn(process=process, url=url, metrics_dir=metrics_dir)
    stop(process)


def test_requests_answered_by_two_gunicorn_workers_add_up_in_one_scrape(gunicorn):
    tenant = make_tenant(f"g-{uuid.uuid4().hex[:6]}")
    headers = {"Authorization": f"Bearer {tenant.key}"}

    def one_request(_: int) -> int:
        return httpx.get(f"{gunicorn.url}/api/v1/sessions/{uuid.uuid4()}/", headers=headers, timeout=30).status_code

    # Concurrent batches until both workers have answered some (each keeps a sample file).
    sent = 0
    with ThreadPoolExecutor(max_workers=8) as pool:
        while len(gunicorn.live_gauge_pids()) < 2 and sent < 800:
            assert set(pool.map(one_request, range(16))) == {404}
            sent += 16
    workers = gunicorn.workers()
    assert gunicorn.live_gauge_pids() == workers  # both workers served requests

    samples = gunicorn.scrape()
    assert total(samples, "memsite_http_requests_total", endpoint=SESSION_PATTERN, method="GET", status="404") == sent
    assert total(samples, "memsite_http_requests_total") == sent  # nothing else was counted
    assert total(samples, "memsite_http_request_duration_seconds_count", endpoint=SESSION_PATTERN) == sent
    per_worker = {pid: total(samples, "memsite_http_requests_by_process", pid=str(pid)) for pid in workers}
    assert all(count > 0 for count in per_worker.values()), per_worker
    assert sum(per_worker.values()) == sent

    # A worker that dies is marked dead by the child_exit hook: its live gauge goes, its counts stay.
    dead = min(workers)
    os.kill(dead, signal.SIGKILL)
    wait_for(lambda: dead not in gunicorn.live_gauge_pids(), timeout=60, what="child_exit to mark the worker dead")
    samples = gunicorn.scrape()
    assert total(samples, "memsite_http_requests_by_process", pid=str(dead)) == 0
    assert total(samples, "memsite_http_requests_total", endpoint=SESSION_PATTERN) == sent
    assert total(samples, "memsite_http_requests_total", endpoint="/metrics", status="200") == 1


def test_a_job_run_by_a_celery_worker_shows_in_the_metrics_gunicorn_serves(gunicorn, start_worker, llm_server):
    start_worker()
    session = managed_session()
    fill(session)  # crosses the threshold: a compaction is queued and sent to the worker
    run = CompactionRun.objects.filter(session=session)
    wait_for(lambda: run.filter(status="done").exists(), timeout=60, what="the compaction")

    def job_counted() -> bool:
        return total(gunicorn.scrape(), "memsite_jobs_total", kind="compaction") >= 1

    # The sample is written right after the task body returns, a moment after the row says done.
    wait_for(job_counted, timeout=30, what="the job in /metrics")
    samples = gunicorn.scrape()
    assert total(samples, "memsite_jobs_total", kind="compaction", outcome="done") == 1
    assert total(samples, "memsite_job_duration_seconds_count", kind="compaction", outcome="done") == 1
    assert total(samples, "memsite_job_duration_seconds_sum", kind="compaction", outcome="done") > 0
    # The worker's LLM call, with the scripted server's usage fields (11 prompt, 7 completion).
    llm = {"purpose": "summarize", "backend": "openai"}
    assert total(samples, "memsite_llm_tokens_total", **llm, type="prompt") == 11
    assert total(samples, "memsite_llm_tokens_total", **llm, type="completion") == 7
    assert total(samples, "memsite_queue_jobs", queue="compaction", state="pending") == 0
