"""A real Celery worker on the embedded filesystem broker (memsite/filesystem_broker.py) meets
message files it cannot read, an empty one and a truncated one, ahead of its jobs: it sets them
aside and runs the jobs, and stays up; a job whose only message was unreadable is sent again by its
sweeper.

The broker is a folder of each test's own, whatever broker this leg configures (Redis in CI's
second leg): the worker is given `CELERY_BROKER_URL=filesystem://` and that folder, and the test
process sends its jobs there through `EmbeddedBrokerDispatcher`.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.utils.module_loading import import_string
from kombu import Connection, Exchange, Queue

from memory_app.compaction.models import CompactionRun
from memory_app.conversations import services
from memory_app.facts import extraction as fact_extraction
from memory_app.facts.models import FactExtractionRun
from memory_app.jobs import JobKind
from memsite.celery import app as celery_app
from memsite.filesystem_broker import DEFAULT_UNREADABLE_GRACE, Transport, folder_options
from tests.conftest import fill, make_tenant, managed_session
from tests.worker_process import Worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EMBEDDED_TRANSPORT = "memsite.filesystem_broker:Transport"


def embedded_broker_connection() -> Connection:
    return celery_app.connection_for_write(
        "filesystem://", transport=EMBEDDED_TRANSPORT, transport_options=folder_options(django_settings.BROKER_DIR)
    )


class EmbeddedBrokerDispatcher:
    """Sends a job's task as memsite's CeleryDispatcher does, to the filesystem broker in
    settings.BROKER_DIR whatever broker settings configure."""

    def send(self, kind: JobKind, job_id: Any, countdown: float) -> None:
        task = import_string(kind.task)
        with embedded_broker_connection() as connection:
            queue = kind.setting(kind.queue_setting)
            task.apply_async(args=(str(job_id),), countdown=countdown, queue=queue, connection=connection)


@pytest.fixture
def embedded_broker(settings, tmp_path: Path) -> Path:
    settings.BROKER_DIR = tmp_path / "broker"
    settings.JOB_DISPATCHER = f"{__name__}.EmbeddedBrokerDispatcher"
    for name in ("queue", "processed", "control"):
        (settings.BROKER_DIR / name).mkdir(parents=True)
    return settings.BROKER_DIR


@pytest.fixture
def worker_env(embedded_broker: Path, llm_server) -> dict[str, str]:
    """The workers `start_worker` starts consume the embedded broker in the test's folder, and the
    scripted LLM answers extraction with a fact and compaction with a summary."""

    def answer(body: dict) -> str:
        if "Ada works at Acme" in json.dumps(body):
            return json.dumps({"facts": [{"subject": "Ada", "predicate": "works at", "object": "Acme"}]})
        return json.dumps(
            {"user_request_summary": "r", "summary": "s", "salient_facts": [], "open_threads": [], "keep_images": []}
        )

    llm_server.default = answer
    return {"CELERY_BROKER_URL": "filesystem://", "MEMSITE_BROKER_DIR": str(embedded_broker)}


def half_of_a_real_message(kind: JobKind, job_id: Any, scratch: Path) -> bytes:
    """The first half of the file the broker holds for this job's task: what a reader of kombu's
    in-place write could find."""
    for name in ("queue", "processed", "control"):
        (scratch / name).mkdir(parents=True)
    queue_name = kind.setting(kind.queue_setting)
    # kombu remembers, per process, the bindings it declared: this new folder needs its own.
    Transport.global_state.clear()
    with Connection("filesystem://", transport=EMBEDDED_TRANSPORT, transport_options=folder_options(scratch)) as conn:
        Queue(queue_name, Exchange(queue_name), routing_key=queue_name)(conn.default_channel).declare()
        import_string(kind.task).apply_async(args=(str(job_id),), queue=queue_name, connection=conn)
    [message] = (scratch / "queue").iterdir()
    whole = message.read_bytes()
    assert json.loads(whole)["headers"]["task"] == kind.task
    return whole[: len(whole) // 2]


def first_in_queue(folder: Path, queue_name: str, content: bytes) -> Path:
    """A message file named to sort before every real one, so the worker meets it first."""
    path = folder / "queue" / f"0_{uuid.uuid4()}.{queue_name}.msg"
    path.write_bytes(content)
    return path


def set_aside(folder: Path) -> set[str]:
    bad = folder / "bad"
    return {path.name for path in bad.iterdir()} if bad.exists() else set()


def test_a_worker_sets_aside_an_empty_and_a_truncated_message_and_runs_the_jobs_behind_them(
    start_worker, embedded_broker: Path, tmp_path: Path
) -> None:
    worker: Worker = start_worker()
    empty = first_in_queue(embedded_broker, "compaction", b"")
    truncated = first_in_queue(
        embedded_broker, "facts", half_of_a_real_message(fact_extraction.JOB, uuid.uuid4(), tmp_path / "scratch")
    )
    # Older than the grace: set aside at once. The empty one is young, so skipped first.
    past = time.time() - DEFAULT_UNREADABLE_GRACE - 1
    os.utime(truncated, (past, past))

    managed = managed_session()
    fill(managed)  # crosses the threshold: a compaction run is queued
    kg = services.session_create(team=make_tenant(f"kg-{uuid.uuid4().hex[:6]}").team, memory_type="kg")
    services.message_append(session=kg, messages=[{"role": "user", "content": "Ada works at Acme."}])
    fact_extraction.fact_extraction_request(session=kg)

    def finished() -> bool:
        statuses = {
            *CompactionRun.objects.filter(session=managed).values_list("status", flat=True),
            *FactExtractionRun.objects.filter(session=kg, trigger="manual").values_list("status", flat=True),
        }
        return statuses == {"done"}

    wait_for(finished, timeout=90, what="a compaction and a fact extraction to finish")
    wait_for(lambda: set_aside(embedded_broker) == {empty.name, truncated.name}, timeout=30, what="both set aside")

    assert worker.process.poll() is None  # still up
    # Run by this worker, so they did go through the embedded broker.
    run = CompactionRun.objects.get(session=managed)
    assert run.worker.split("@")[0] == worker.name.split("@")[0]
    assert not empty.exists() and not truncated.exists()
    assert (embedded_broker / "bad" / truncated.name).stat().st_size > 0  # kept as found
    # The warning is written after the move, and read from the worker's output by another thread.
    wait_for(
        lambda: all(f"{bad.name} cannot be decoded" in "".join(worker.lines) for bad in (empty, truncated)),
        timeout=30,
        what="the worker's warning for each file set aside",
    )
    assert "Unrecoverable error" not in "".join(worker.lines)


def test_a_job_whose_only_message_was_unreadable_is_sent_again_by_its_sweeper(
    start_worker, embedded_broker: Path, tmp_path: Path, settings
) -> None:
    worker: Worker = start_worker()
    kg = services.session_create(team=make_tenant(f"kg-{uuid.uuid4().hex[:6]}").team, memory_type="kg")
    services.message_append(session=kg, messages=[{"role": "user", "content": "Ada works at Acme."}])
    # A pending run whose message reached the broker half-written (and never whole).
    run = FactExtractionRun.objects.create(team=kg.team, session=kg, trigger="manual", from_seq=1, to_seq=1)
    truncated = first_in_queue(
        embedded_broker, "facts", half_of_a_real_message(fact_extraction.JOB, run.pk, tmp_path / "scratch")
    )
    past = time.time() - DEFAULT_UNREADABLE_GRACE - 1
    os.utime(truncated, (past, past))
    wait_for(lambda: truncated.name in set_aside(embedded_broker), timeout=30, what="the message to be set aside")
    run.refresh_from_db()
    assert run.status == "pending"

    settings.FACTS_RESEND_AFTER = 0  # the beat's sweeper, without waiting its two minutes
    assert fact_extraction.fact_extraction_sweep()["resent"] == 1

    wait_for(lambda: FactExtractionRun.objects.get(pk=run.pk).status == "done", timeout=60, what="the resent run")
    assert worker.process.poll() is None
    assert FactExtractionRun.objects.get(pk=run.pk).worker.split("@")[0] == worker.name.split("@")[0]
