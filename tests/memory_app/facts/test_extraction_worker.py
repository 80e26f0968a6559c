"""Fact extraction with a real Celery worker process on the configured broker and database
(the embedded filesystem broker and SQLite, or Redis and PostgreSQL), talking to the
scripted LLM server over HTTP."""

from __future__ import annotations

import json
import re
import threading
import uuid

import pytest
from django.conf import settings

from memory_app.conversations import services
from memory_app.conversations.models import Session
from memory_app.facts import extraction as fact_extraction
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.tasks import extract_facts
from tests.conftest import make_tenant
from tests.llm_server import Reply
from tests.worker_process import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
STATEMENT = re.compile(r"\b([A-Z]\w+) (works at|lives in) ([A-Z]\w+)")


def extract_from_prompt(body: dict) -> str:
    """A scripted extractor: the facts stated in the conversation the prompt carries."""
    conversation = body["messages"][-1]["content"]
    facts = [{"subject": s, "predicate": p, "object": o} for s, p, o in STATEMENT.findall(conversation)]
    return json.dumps({"facts": facts})


@pytest.fixture(autouse=True)
def extracting_llm(llm_server) -> None:
    llm_server.default = extract_from_prompt


@pytest.fixture
def worker_env() -> dict[str, str]:
    return {"MEMSITE_FACTS_DEBOUNCE_SECONDS": "0.5", "MEMSITE_FACTS_RETRY_BACKOFF": "0.5"}


def kg_session() -> Session:
    tenant = make_tenant(f"kg-{uuid.uuid4().hex[:6]}")
    return services.session_create(team=tenant.team, memory_type="kg")


def say(session: Session, *contents: str) -> None:
    services.message_append(session=session, messages=[{"role": "user", "content": c} for c in contents])


def done_runs(session: Session) -> int:
    return FactExtractionRun.objects.filter(session=session, status="done").count()


def test_a_worker_extracts_a_kg_sessions_facts_once_each(start_worker, llm_server, settings):
    settings.FACTS_DEBOUNCE_SECONDS = 2.0  # the countdown the appends send with
    start_worker()
    session = kg_session()
    say(session, "Ada works at Acme.", "Nice weather today.")
    say(session, "Bob lives in Rome.")  # within the debounce: the same run covers it
    wait_for(lambda: done_runs(session) == 1, timeout=60, what="the first extraction")
    run = FactExtractionRun.objects.get(session=session)
    assert (run.trigger, run.from_seq, run.to_seq, run.backend) == ("auto", 1, 3, "openai")

    say(session, "Cleo lives in Oslo.")
    wait_for(lambda: done_runs(session) == 2, timeout=60, what="the second extraction")
    facts = sorted(Fact.objects.filter(session=session).values_list("subject", "predicate", "object", "times_seen"))
    assert facts == [
        ("Ada", "works at", "Acme", 1),
        ("Bob", "lives in", "Rome", 1),
        ("Cleo", "lives in", "Oslo", 1),
    ]
    latest = FactExtractionRun.objects.filter(session=session).order_by("-created_at").first()
    assert (latest.from_seq, latest.to_seq, latest.facts_added) == (4, 4, 1)


def test_a_run_delivered_twice_is_executed_once(start_worker, llm_server):
    session = services.session_create(team=make_tenant("twice").team)
    say(session, "Ada works at Acme.")
    llm_server.script(
        Reply(json.dumps({"facts": [{"subject": "Ada", "predicate": "works at", "object": "Acme"}]}), delay=1.0)
    )
    run = fact_extraction.fact_extraction_request(session=session)  # sent on commit (autocommit: now)
    extract_facts.apply_async(args=[str(run.pk)], queue=settings.FACTS_QUEUE)  # a duplicate delivery
    worker = start_worker(pool="threads")
    wait_for(lambda: done_runs(session) == 1, timeout=60, what="the extraction")
    # Both deliveries end (the duplicate finds the run claimed) before anything is counted.
    wait_for(lambda: worker.tasks_finished("extract_facts") == 2, timeout=60, what="the duplicate delivery")
    assert len(llm_server.requests) == 1
    fact = Fact.objects.get(session=session)
    assert fact.times_seen == 1 and FactExtractionRun.objects.get(pk=run.pk).facts_added == 1


def test_four_worker_processes_extracting_the_same_fact_leave_one_live_fact(start_worker, llm_server):
    session = services.session_create(team=make_tenant("four").team)
    release = threading.Event()
    answer = json.dumps({"facts": [{"subject": "Ada", "predicate": "works at", "object": "Acme"}]})
    llm_server.script(*(Reply(answer, hold=release) for _ in range(4)))
    runs = [
        fact_extraction.fact_extraction_request_text(session=session, text="Ada works at Acme.", role="user")
        for _ in range(4)
    ]
    start_worker(pool="prefork")  # two processes each: four at once
    start_worker(pool="prefork")
    # Every run holds its LLM answer until all four are waiting, so the four writes race.
    wait_for(lambda: len(llm_server.requests) == 4, timeout=60, what="four LLM calls in flight")
    release.set()
    wait_for(
        lambda: FactExtractionRun.objects.filter(pk__in=[r.pk for r in runs], status="done").count() == 4,
        timeout=60,
        what="the four extractions",
    )
    live = Fact.objects.filter(session=session, invalidated_at__isnull=True)
    assert [(f.subject, f.object, f.times_seen) for f in live] == [("Ada", "Acme", 4)]
    assert sum(FactExtractionRun.objects.filter(pk__in=[r.pk for r in runs]).values_list("facts_added", flat=True)) == 1
