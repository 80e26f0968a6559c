"""No queue starves another: a fact extraction queued behind a search-indexing backlog starts
before that backlog is indexed, on the worker layout `make run` starts (the Procfile's `worker`
and `indexer`) and on a plain worker with a single slot serving every queue (index runs yield
between slices). Real worker processes on the test's broker and database; the backlog is
embedded at the offline model's pace, so it outlasts a slice on any machine. The order of
events is asserted, never a duration (bench/queue_fairness.py measures the waits)."""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from functools import partial

import numpy as np
import pytest
from django.db.models import Max

from memory_app.conversations import services
from memory_app.facts import extraction as fact_extraction
from memory_app.facts.models import FactExtractionRun
from memory_app.search.embeddings.base import Purpose
from memory_app.search.embeddings.fake import FakeEmbeddings
from memory_app.search.models import IndexRun, SearchItem
from tests.celery_worker import procfile_worker_argvs
from tests.conftest import make_tenant
from tests.worker_process import ROOT, llm_env, process_env, stop_all, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BACKLOG_SESSIONS = 4
MESSAGES_PER_SESSION = 100  # 400 turns: 2.5 s of embedding at PacedEmbeddings' pace, several slices
TEXTS_PER_SECOND = 160  # the offline model's pace for chat turns on one core (docs/recall.md)
# The workers' index runs yield their slot after this many seconds (the product's default is 5):
# the backlog outlasts two slices in a quarter of the time, so the order of events is the same
# as with the default and a full backlog, without waiting for one.
RUN_SECONDS = "0.5"


class PacedEmbeddings(FakeEmbeddings):
    """The fake's vectors, delivered at the offline model's pace for chat turns: a backlog takes
    as long as a real one on any machine, without loading the model in the test's workers."""

    def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        time.sleep(len(texts) / TEXTS_PER_SECOND)
        return super().embed(texts, purpose=purpose)


def answer(body: dict) -> str:
    return json.dumps({"facts": [{"subject": "Ada", "predicate": "works at", "object": "Acme"}]})


@pytest.fixture
def start_workers(llm_server) -> Iterator[Callable[[dict[str, list[str]]], None]]:
    """Start the given worker commands (process name -> argv) on the test's database and broker,
    embedding at the paced rate; each is ready when this returns, and stopped after the test."""
    llm_server.default = answer
    env = process_env(
        {
            **llm_env(llm_server.base_url),
            "EMBEDDINGS_BACKEND": f"{__name__}.PacedEmbeddings",
            "MEMSITE_SEARCH_RUN_SECONDS": RUN_SECONDS,
        }
    )
    started: list[subprocess.Popen[str]] = []

    def start(commands: dict[str, list[str]]) -> None:
        for name, argv in commands.items():
            process = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            started.append(process)
            lines: list[str] = []
            threading.Thread(target=_drain, args=(process, lines), daemon=True).start()
            wait_for(partial(_said, lines, "ready."), timeout=60, what=f"{name} to start")

    yield start
    stop_all(started)


def _drain(process: subprocess.Popen[str], lines: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        lines.append(line)


def _said(lines: list[str], words: str) -> bool:
    return any(words in line for line in lines)


def queue_backlog() -> int:
    """A team with BACKLOG_SESSIONS conversations to index; its first index run is sent on commit."""
    team = make_tenant(f"backlog-{uuid.uuid4().hex[:6]}").team
    for number in range(BACKLOG_SESSIONS):
        session = services.session_create(team=team)
        turns = [
            {"role": "user" if seq % 2 else "assistant", "content": f"turn {seq} of thread {number}: the plan holds"}
            for seq in range(MESSAGES_PER_SESSION)
        ]
        services.message_append(session=session, messages=turns)
    return team.pk


def extraction_behind(backlog_team: int) -> FactExtractionRun:
    """Once the backlog's first index run is running, queue a fact extraction (another team's)
    and wait until both the extraction and the backlog are done."""
    wait_for(
        lambda: IndexRun.objects.filter(team_id=backlog_team, status=IndexRun.Status.RUNNING).exists(),
        timeout=60,
        what="the backlog's first index run to start",
    )
    kg = services.session_create(team=make_tenant(f"kg-{uuid.uuid4().hex[:6]}").team, memory_type="kg")
    services.message_append(session=kg, messages=[{"role": "user", "content": "Ada works at Acme."}])
    run = fact_extraction.fact_extraction_request(session=kg)
    wait_for(
        lambda: FactExtractionRun.objects.filter(pk=run.pk, status="done").exists(),
        timeout=120,
        what="the fact extraction to finish",
    )
    items = SearchItem.objects.filter(team_id=backlog_team)
    wait_for(
        lambda: (
            items.count() >= BACKLOG_SESSIONS * MESSAGES_PER_SESSION
            and not items.exclude(state=SearchItem.State.INDEXED).exists()
        ),
        timeout=180,
        what="the backlog to be indexed",
    )
    return FactExtractionRun.objects.get(pk=run.pk)


def assert_started_before_the_backlog_was_done(run: FactExtractionRun, backlog_team: int) -> None:
    last_indexed = SearchItem.objects.filter(team_id=backlog_team).aggregate(last=Max("indexed_at"))["last"]
    assert run.started_at is not None and last_indexed is not None
    assert run.started_at < last_indexed, "the extraction waited for the whole indexing backlog"


def test_the_procfile_layout_runs_an_extraction_queued_behind_an_indexing_backlog_before_it_is_done(
    start_workers,
) -> None:
    commands = procfile_worker_argvs(ROOT / "Procfile", name_suffix=f"-{uuid.uuid4().hex[:6]}")
    assert set(commands) == {"worker", "indexer"}
    backlog_team = queue_backlog()
    start_workers(commands)

    run = extraction_behind(backlog_team)

    assert_started_before_the_backlog_was_done(run, backlog_team)
    # The extraction ran on the main worker; the indexer alone served the search queue.
    assert run.worker.startswith("worker-")
    # The runs some worker claimed (a follow-up run may be queued, not yet claimed, by now).
    claimed = IndexRun.objects.filter(team_id=backlog_team, started_at__isnull=False)
    index_workers = set(claimed.values_list("worker", flat=True))
    assert len(index_workers) == 1 and index_workers.pop().startswith("indexer-")


def test_a_single_slot_worker_on_every_queue_runs_the_extraction_between_two_index_slices(start_workers) -> None:
    commands = procfile_worker_argvs(ROOT / "Procfile", name_suffix=f"-{uuid.uuid4().hex[:6]}")
    plain = [word for word in commands["worker"] if word not in ("--exclude-queues", "search")]
    plain = [*plain, "--pool", "solo"]  # one slot, every queue: only the slicing lets it through
    backlog_team = queue_backlog()
    start_workers({"plain": plain})

    run = extraction_behind(backlog_team)

    assert_started_before_the_backlog_was_done(run, backlog_team)
    # The backlog took more than one run: the first one yielded its slot and re-queued the rest.
    assert IndexRun.objects.filter(team_id=backlog_team, status=IndexRun.Status.DONE).count() >= 2
