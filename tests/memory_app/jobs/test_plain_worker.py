"""A worker started as Celery's docs show it (`celery -A memsite worker`, no `--queues`) serves
every queue memsite sends to; one started with `-Q` serves only that queue, and the ops page
flags the queue left with pending jobs and no consumer. Real worker processes on the test's
broker and database, calling the scripted LLM server over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.facts import extraction as fact_extraction
from memory_app.facts.models import FactExtractionRun
from memory_app.jobs import job_kinds
from memory_app.ops import selectors as ops_selectors
from memory_app.search import services as search
from memory_app.webhooks import services as webhooks
from memsite.celery import app as celery_app
from memsite.celery import memsite_queue_names
from tests.conftest import fill, make_tenant, managed_session
from tests.worker_process import ROOT, llm_env, process_env, stop, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


class PlainWorker:
    """`celery -A memsite worker`, with `-Q queues` only when given; its output kept in `lines`."""

    def __init__(self, env: dict[str, str], queues: str | None = None) -> None:
        self.name = f"plain-{uuid.uuid4().hex[:6]}@%h"
        argv = [sys.executable, "-m", "celery", "-A", "memsite", "worker", "--pool", "solo", "-n", self.name]
        argv += ["--without-gossip", "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"]
        if queues:
            argv += ["-Q", queues]
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()
        wait_for(lambda: any("ready." in line for line in self.lines), timeout=60, what="worker start")

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)


@pytest.fixture
def start_plain_worker(llm_server) -> Iterator[Callable[..., PlainWorker]]:
    def answer(body: dict) -> str:
        # The kg session's fact extraction gets facts; the managed session's compaction a summary.
        if "Ada works at Acme" in json.dumps(body):
            return json.dumps({"facts": [{"subject": "Ada", "predicate": "works at", "object": "Acme"}]})
        return json.dumps(
            {"user_request_summary": "r", "summary": "s", "salient_facts": [], "open_threads": [], "keep_images": []}
        )

    llm_server.default = answer
    env = process_env(llm_env(llm_server.base_url))
    started: list[PlainWorker] = []

    def start(queues: str | None = None) -> PlainWorker:
        started.append(PlainWorker(env, queues))
        return started[-1]

    yield start
    for worker in started:
        stop(worker.process)


def test_every_job_kind_sends_to_a_queue_a_plain_worker_consumes() -> None:
    queues = memsite_queue_names()
    consumed = {queue.name for queue in celery_app.conf.task_queues}
    for kind in (compaction.JOB, fact_extraction.JOB, search.JOB, webhooks.JOB):
        assert kind.setting(kind.queue_setting) in consumed
    assert set(queues) == consumed and queues[0] == "celery"
    assert {source.queue for source in job_kinds()} <= consumed


def test_a_worker_started_without_queues_runs_compaction_and_fact_extraction(start_plain_worker) -> None:
    worker = start_plain_worker()
    managed = managed_session()
    fill(managed)  # crosses the threshold: a compaction run is queued on the "compaction" queue
    kg = services.session_create(team=make_tenant(f"kg-{uuid.uuid4().hex[:6]}").team, memory_type="kg")
    services.message_append(session=kg, messages=[{"role": "user", "content": "Ada works at Acme."}])
    fact_extraction.fact_extraction_request(session=kg)  # the "facts" queue

    def finished() -> bool:
        statuses = {
            *CompactionRun.objects.filter(session=managed).values_list("status", flat=True),
            *FactExtractionRun.objects.filter(session=kg, trigger="manual").values_list("status", flat=True),
        }
        return statuses == {"done"}

    wait_for(finished, timeout=90, what="a compaction and a fact extraction to finish")
    run = CompactionRun.objects.get(session=managed)
    extraction = FactExtractionRun.objects.get(session=kg, trigger="manual")
    # Both were claimed by the one plain worker, which says so on the rows.
    assert run.worker.startswith("plain-") and run.worker == extraction.worker
    assert run.worker.split("@")[0] == worker.name.split("@")[0]


def test_the_ops_page_flags_a_queue_with_pending_jobs_and_no_consumer(start_plain_worker, client: Client) -> None:
    worker = start_plain_worker("compaction")
    kg = services.session_create(team=make_tenant(f"kg-{uuid.uuid4().hex[:6]}").team, memory_type="kg")
    FactExtractionRun.objects.create(team=kg.team, session=kg, trigger="manual", from_seq=1, to_seq=1)
    client.force_login(get_user_model().objects.create_user("operator", is_superuser=True))

    def beating() -> bool:
        return bool(ops_selectors.workers_seen(team_ids=None, lost_after=30).consumers_of("compaction"))

    wait_for(beating, timeout=60, what="the worker's first heartbeat")
    response = client.get(reverse("dashboard:ops"))

    queues = {q.source.kind: q for q in response.context["queues"]}
    assert queues["facts"].unserved and not queues["facts"].consumers
    assert len(queues["compaction"].consumers) == 1 and not queues["compaction"].unserved
    assert not queues["search"].unserved  # no pending job: nothing waits
    html = response.content.decode()
    assert 'id="unserved-facts"' in html and "No worker consumes queue <code>facts</code>" in html
    assert 'id="unserved-compaction"' not in html

    # A worker that shuts down says so: the page does not wait for its heartbeats to age.
    stop(worker.process)
    (gone,) = ops_selectors.workers_seen(team_ids=None, lost_after=30).gone
    assert gone.stopped and gone.name.startswith(worker.name.split("@")[0])
