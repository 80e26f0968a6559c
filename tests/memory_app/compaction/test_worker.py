"""Compaction with a real Celery worker process on the configured broker and database.

On the embedded defaults that is the filesystem broker and the SQLite test file; in CI's
second run, Redis and PostgreSQL. The worker talks to the scripted LLM server over HTTP.
"""

from __future__ import annotations

import json
import threading

import pytest
from django.conf import settings

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.context import context_build
from memory_app.conversations.models import Session
from memory_app.events.models import MemoryEvent
from memory_app.tasks import compact_session
from tests.conftest import fill, managed_session
from tests.llm_server import Fail, Reply
from tests.worker_process import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SUMMARY = json.dumps(
    {"user_request_summary": "r", "summary": "s", "salient_facts": [], "open_threads": [], "keep_images": []}
)


@pytest.fixture
def worker_env() -> dict[str, str]:
    return {"MEMSITE_COMPACTION_RETRY_BACKOFF": "0.5"}


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
    worker = start_worker(pool="threads")
    wait_for(lambda: run_of(session).status == "done", timeout=60, what="compaction")
    # Both deliveries end (the duplicate finds the run claimed) before anything is counted.
    wait_for(lambda: worker.tasks_finished("compact_session") == 2, timeout=60, what="the duplicate delivery")
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
