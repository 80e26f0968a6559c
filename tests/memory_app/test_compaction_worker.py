"""Compaction with a real Celery worker process on the configured broker and database.

On the embedded defaults that is the filesystem broker and the SQLite test file; in CI's
second run, Redis and PostgreSQL. The worker talks to the scripted LLM server over HTTP.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from memory_app import compaction, services
from memory_app.models import CompactionRun, MemoryEvent, Session
from memory_app.selectors import context_build
from memory_app.tasks import compact_session
from tests.conftest import make_tenant
from tests.llm_server import Fail, Reply

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
SUMMARY = json.dumps(
    {"user_request_summary": "r", "summary": "s", "salient_facts": [], "open_threads": [], "keep_images": []}
)


def database_env() -> dict[str, str]:
    """Point a child process at the test database this test runs on."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"SQLITE_PATH": db["NAME"], "DATABASE_URL": ""}
    user = db["USER"] or "postgres"
    return {"DATABASE_URL": f"postgres://{user}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"}


class Worker:
    def __init__(self, env: dict[str, str], pool: str) -> None:
        self.name = f"test-{uuid.uuid4().hex[:8]}@%h"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "memsite",
                "worker",
                "--pool",
                pool,
                "--concurrency",
                "2",
                "--queues",
                f"celery,{settings.COMPACTION_QUEUE},{settings.FACTS_QUEUE}",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "INFO",
                "-n",
                self.name,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()
        wait_for(lambda: any("ready." in line for line in self.lines), timeout=60, what="worker start")

    def _drain(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for(condition: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def start_worker(llm_server) -> Iterator[Callable[..., Worker]]:
    env = {
        **os.environ,
        **database_env(),
        "MEMSITE_VAR_DIR": str(settings.VAR_DIR),
        "LLM_BASE_URL": llm_server.base_url,
        "LLM_API_KEY": "sk-test-secret",
        "LLM_MODEL": "scripted-model",
        "LLM_TIMEOUT": "30",
        "MEMSITE_COMPACTION_RETRY_BACKOFF": "0.5",
    }
    workers: list[Worker] = []

    def start(pool: str = "solo") -> Worker:
        workers.append(Worker(env, pool))
        return workers[-1]

    yield start
    for worker in workers:
        worker.stop()


def managed_session(threshold: int = 300) -> Session:
    tenant = make_tenant(f"w-{uuid.uuid4().hex[:6]}")
    return services.session_create(
        team=tenant.team,
        system_prompt="You are a planner.",
        memory_type="managed_conversation",
        memory_config={"threshold_tokens": threshold},
    )


def fill(session: Session, turns: int = 6) -> None:
    for i in range(turns):
        services.message_append(
            session=session,
            messages=[
                {"role": "user", "content": f"question {i} " + "word " * 30},
                {"role": "assistant", "content": f"answer {i} " + "text " * 30},
            ],
        )


def run_of(session: Session) -> CompactionRun:
    return CompactionRun.objects.filter(session=session).order_by("created_at").first()


def test_a_worker_compacts_a_session_pushed_over_its_threshold(start_worker, llm_server):
    start_worker()
    session = managed_session()
    fill(session)  # crossing the threshold queues the run and sends the task on commit
    wait_for(lambda: run_of(session) is not None and run_of(session).status == "done", timeout=60, what="compaction")
    run = run_of(session)
    assert run.trigger == "threshold" and run.backend == "openai"
    assert run.post_tokens <= 300 * 0.6 < run.pre_tokens
    served = context_build(session=Session.objects.get(pk=session.pk))
    assert served.token_count <= 300
    assert served.messages[-1]["content"].startswith("answer 5")


def test_a_worker_killed_mid_run_is_recovered_with_one_summary(start_worker, llm_server, settings):
    release = threading.Event()
    llm_server.script(Reply(SUMMARY, hold=release))
    first = start_worker()
    session = managed_session()
    fill(session)
    wait_for(lambda: len(llm_server.requests) == 1, timeout=60, what="the LLM call")
    assert run_of(session).status == "running"

    first.kill()  # SIGKILL in the middle of the LLM call
    release.set()
    settings.COMPACTION_RUNNING_DEADLINE = 0
    assert compaction.compaction_sweep()["requeued"] == 1
    start_worker()
    wait_for(lambda: run_of(session).status == "done", timeout=60, what="recovery")

    runs = list(CompactionRun.objects.filter(session=session))
    assert len(runs) == 1 and runs[0].attempts == 2
    completed = MemoryEvent.objects.filter(session=session, kind=MemoryEvent.Kind.COMPACTION_COMPLETED)
    assert completed.count() == 1


def test_two_compactions_of_one_session_at_once_make_one_summary(start_worker, llm_server):
    session = managed_session(threshold=10**9)
    fill(session)
    run, created = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    again, created_again = compaction.compaction_request(session=session, trigger=CompactionRun.Trigger.MANUAL)
    assert created and not created_again and again.pk == run.pk
    llm_server.script(Reply(SUMMARY, delay=1.0))
    compact_session.apply_async(args=[str(run.pk)], queue=settings.COMPACTION_QUEUE)  # a duplicate delivery
    start_worker(pool="threads")
    wait_for(lambda: run_of(session).status == "done", timeout=60, what="compaction")
    time.sleep(2)  # let the duplicate finish too
    assert CompactionRun.objects.filter(session=session, status="done").count() == 1
    assert len(llm_server.requests) == 1


def test_the_worker_retries_a_rate_limited_call_after_retry_after(start_worker, llm_server):
    llm_server.script(Fail(429, {"Retry-After": "1"}), Reply(SUMMARY))
    start_worker()
    session = managed_session()
    fill(session)
    wait_for(lambda: run_of(session) is not None and run_of(session).status == "done", timeout=60, what="retry")
    run = run_of(session)
    assert run.attempts == 2
    assert len(llm_server.requests) == 2
