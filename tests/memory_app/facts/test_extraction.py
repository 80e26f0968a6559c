"""Fact extraction as a durable job, run in-process against the scripted LLM server
(a real worker runs it in test_fact_extraction_worker)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import connection

from memory_app.conversations.models import Message, Session
from memory_app.events.models import MemoryEvent
from memory_app.facts import extraction as fact_extraction
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.jobs.dispatchers import Sent
from memory_app.tenancy.models import ApiKey
from tests.conftest import make_tenant
from tests.job_dispatch import Sends
from tests.llm_server import Fail, Garbage, Reply

pytestmark = pytest.mark.django_db(transaction=True)

RUN_KEYS = {
    "id",
    "session",
    "status",
    "trigger",
    "from_seq",
    "to_seq",
    "input_text",
    "raw_output",
    "error",
    "attempts",
    "backend",
    "model",
    "facts_added",
    "facts_seen",
    "facts_invalidated",
    "queued_at",
    "started_at",
    "finished_at",
    "duration_ms",
    "created_at",
}
FACTS = {
    "facts": [
        {"subject": "user", "predicate": "lives in", "object": "Oslo", "confidence": 0.9, "replaces": True},
        {"subject": "Ada", "predicate": "works at", "object": "Acme"},
    ]
}


def facts_reply(data: dict | list | None = None) -> Reply:
    return Reply(json.dumps(FACTS if data is None else data))


@pytest.fixture
def fact_tasks(job_outbox: list[Sent]) -> Sends:
    """Record extraction tasks instead of sending them to a broker."""
    return Sends(job_outbox, fact_extraction.JOB)


@pytest.fixture
def admin(tenant):
    return make_tenant(tenant.team.name, role=ApiKey.Role.ADMIN).client


def new_session(api, memory_type: str = "kg") -> str:
    response = api.post("/api/v1/sessions/", {"memory_type": memory_type}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def append(api, session_id, *contents: str, role: str = "user") -> list[dict]:
    messages = [{"role": role, "content": content} for content in contents]
    response = api.post(f"/api/v1/sessions/{session_id}/messages/", {"messages": messages}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["messages"]


def extract(api, session_id, **body) -> dict:
    response = api.post(f"/api/v1/sessions/{session_id}/extract-facts/", body, format="json")
    assert response.status_code == 202, response.content
    return response.json()


def execute(run_id) -> str:
    return fact_extraction.fact_extraction_execute(run_id=str(run_id))


def run_json(api, run_id) -> dict:
    response = api.get(f"/api/v1/fact-extractions/{run_id}/")
    assert response.status_code == 200, response.content
    return response.json()


# --- queueing ------------------------------------------------------------------------------


def test_appends_to_a_kg_session_queue_one_debounced_run(api, fact_tasks, settings):
    settings.FACTS_DEBOUNCE_SECONDS = 3.0
    session_id = new_session(api)
    append(api, session_id, "I live in Oslo.")
    append(api, session_id, "Ada works at Acme.", "More text.")
    runs = list(FactExtractionRun.objects.filter(session_id=session_id))
    assert len(runs) == 1 and runs[0].trigger == "auto" and runs[0].status == "pending"
    assert runs[0].to_seq is None  # the range is taken when a worker claims it
    assert fact_tasks == [(str(runs[0].pk), 3.0)]

    plain = new_session(api, memory_type="conversation_history")
    append(api, plain, "I live in Oslo.")
    assert not FactExtractionRun.objects.filter(session_id=plain).exists()


def test_a_run_extracts_its_messages_facts_once_each_with_provenance(api, llm_server, fact_tasks):
    llm_server.script(facts_reply())
    session_id = new_session(api)
    first = append(api, session_id, "I live in Oslo now.")
    second = append(api, session_id, "Ada works at Acme.", role="assistant")
    (run_id, _), *_ = fact_tasks
    assert execute(run_id) == "done"

    run = run_json(api, run_id)
    assert set(run) == RUN_KEYS
    assert (run["status"], run["from_seq"], run["to_seq"], run["attempts"]) == ("done", 1, 2, 1)
    assert (run["facts_added"], run["facts_seen"], run["backend"], run["model"]) == (2, 0, "openai", "scripted-model")
    assert json.loads(run["raw_output"]) == FACTS
    prompt = json.dumps(llm_server.requests[0]["messages"])
    assert "I live in Oslo now." in prompt and "Ada works at Acme." in prompt

    by_subject = {f["subject"]: f for f in api.get("/api/v1/facts/", {"session": session_id}).json()["results"]}
    assert by_subject["user"]["source_message"] == first[0]["message_id"] and by_subject["user"]["role"] == "user"
    assert by_subject["Ada"]["source_message"] == second[0]["message_id"]
    assert by_subject["Ada"]["role"] == "assistant"
    assert by_subject["Ada"]["extractor"] == "openai:scripted-model" and by_subject["Ada"]["extraction_run"] == run_id
    assert by_subject["user"]["confidence"] == 0.9
    event = MemoryEvent.objects.get(kind=MemoryEvent.Kind.FACTS_EXTRACTED)
    assert event.data["facts_added"] == 2 and event.data["run_id"] == run_id

    assert execute(run_id) == "already-claimed"  # the same run delivered twice adds nothing
    assert Fact.objects.count() == 2 and set(Fact.objects.values_list("times_seen", flat=True)) == {1}
    assert len(llm_server.requests) == 1


def test_the_next_automatic_run_covers_only_the_new_messages(api, llm_server, fact_tasks):
    session_id = new_session(api)
    append(api, session_id, "one", "two")
    execute(fact_tasks[0][0])
    append(api, session_id, "three")
    assert len(fact_tasks) == 2
    llm_server.script(facts_reply({"facts": []}))
    assert execute(fact_tasks[1][0]) == "done"
    run = FactExtractionRun.objects.get(pk=fact_tasks[1][0])
    assert (run.from_seq, run.to_seq) == (3, 3)
    prompt = json.dumps(llm_server.requests[-1]["messages"])
    assert "three" in prompt and "two" not in prompt


def test_a_run_over_too_many_messages_leaves_the_rest_to_a_follow_up(api, llm_server, fact_tasks, settings):
    settings.FACTS_MAX_MESSAGES_PER_RUN = 2
    session_id = new_session(api, memory_type="conversation_history")
    append(api, session_id, "m1", "m2", "m3", "m4", "m5")
    run = extract(api, session_id)
    assert (run["trigger"], run["from_seq"], run["to_seq"]) == ("manual", 1, 5)
    llm_server.script(facts_reply({"facts": []}), facts_reply({"facts": []}), facts_reply({"facts": []}))
    for index in range(3):
        assert execute(fact_tasks[index][0]) == "done"
    ranges = sorted(FactExtractionRun.objects.values_list("from_seq", "to_seq"))
    assert ranges == [(1, 2), (3, 4), (5, 5)]
    assert len(fact_tasks) == 3


def test_extracting_a_given_text(api, llm_server, fact_tasks):
    session_id = new_session(api, memory_type="conversation_history")
    llm_server.script(facts_reply({"facts": [{"subject": "Paris", "predicate": "is capital of", "object": "France"}]}))
    run = extract(api, session_id, text="Paris is the capital of France", role="planner")
    assert (run["trigger"], run["input_text"], run["from_seq"]) == ("text", "Paris is the capital of France", None)
    execute(run["id"])
    fact = Fact.objects.get()
    assert (fact.role, fact.source_message_id, str(fact.session_id)) == ("planner", None, session_id)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "x", "from_seq": 1}, "text"),
        ({"text": "   "}, "text"),
        ({"text": 42}, "text"),
        ({"from_seq": 0}, "from_seq"),
        ({"from_seq": "1"}, "from_seq"),
        ({"from_seq": 3, "to_seq": 2}, "to_seq"),
        ({"from_seq": 9}, "from_seq"),
        ({"text": "x", "role": 7}, "role"),
    ],
)
def test_a_bad_extraction_request_is_400_naming_the_field(api, fact_tasks, body, field):
    session_id = new_session(api, memory_type="conversation_history")
    append(api, session_id, "one", "two")
    response = api.post(f"/api/v1/sessions/{session_id}/extract-facts/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"]
    assert not FactExtractionRun.objects.exists()


def test_extracting_an_empty_session_is_400(api, fact_tasks):
    session_id = new_session(api, memory_type="conversation_history")
    assert api.post(f"/api/v1/sessions/{session_id}/extract-facts/", {}, format="json").status_code == 400


# --- malformed answers --------------------------------------------------------------------

MALFORMED = {
    "truncated JSON": '{"facts": [{"subject": "Ada", "predicate": "works at", "obj',
    "prose": "Sure! Ada works at Acme and lives in Oslo.",
    "10k triples": json.dumps([{"subject": f"s{i}", "predicate": "p", "object": "o"} for i in range(10_000)]),
    "5 MB string": json.dumps([{"subject": "x" * 5_000_000, "predicate": "p", "object": "o"}]),
    "wrong types": json.dumps(
        [{"subject": "Ada", "predicate": "works at", "object": "Acme"}, {"subject": 1, "predicate": "p", "object": "o"}]
    ),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_answer_quarantines_the_run_with_its_raw_output(api, llm_server, fact_tasks, name):
    session_id = new_session(api)
    append(api, session_id, "Ada works at Acme.", "I live in Oslo.")
    llm_server.script(Reply(MALFORMED[name]))
    assert execute(fact_tasks[0][0]) == "quarantined"
    run = run_json(api, fact_tasks[0][0])
    assert run["status"] == "quarantined" and run["raw_output"] == MALFORMED[name]
    assert run["error"] and (run["from_seq"], run["to_seq"]) == (1, 2)
    assert Fact.objects.count() == 0  # not even the valid first triple of "wrong types"
    assert MemoryEvent.objects.filter(kind=MemoryEvent.Kind.FACT_EXTRACTION_QUARANTINED).count() == 1


def test_retry_after_fixing_the_server_succeeds(api, admin, llm_server, fact_tasks):
    session_id = new_session(api)
    append(api, session_id, "I live in Oslo.")
    llm_server.script(Reply("no facts here, sorry"))
    run_id = fact_tasks[0][0]
    assert execute(run_id) == "quarantined"
    assert api.post(f"/api/v1/fact-extractions/{run_id}/retry/").status_code == 403
    response = admin.post(f"/api/v1/fact-extractions/{run_id}/retry/")
    assert response.status_code == 202 and response.json()["status"] == "pending"
    assert fact_tasks[-1][0] == run_id

    llm_server.script(facts_reply())
    assert execute(run_id) == "done"
    run = run_json(api, run_id)
    assert run["facts_added"] == 2 and run["error"] == "" and (run["from_seq"], run["to_seq"]) == (1, 1)
    assert admin.post(f"/api/v1/fact-extractions/{run_id}/retry/").status_code == 409


def test_staff_accept_an_edited_output(api, admin, llm_server, fact_tasks):
    session_id = new_session(api)
    message = append(api, session_id, "Ada works at Acme.")[0]
    llm_server.script(Reply('[{"subject": "Ada", "predicate": "works at", "object": "Acme"'))
    run_id = fact_tasks[0][0]
    execute(run_id)
    url = f"/api/v1/fact-extractions/{run_id}/accept/"
    fixed = '[{"subject": "Ada", "predicate": "works at", "object": "Acme"}]'
    assert api.post(url, {"output": fixed}, format="json").status_code == 403
    still_bad = admin.post(url, {"output": "[{"}, format="json")
    assert still_bad.status_code == 400 and "output" in still_bad.json()["fields"]
    assert admin.post(url, {"output": 5}, format="json").status_code == 400

    accepted = admin.post(url, {"output": fixed}, format="json")
    assert accepted.status_code == 200, accepted.content
    assert (accepted.json()["status"], accepted.json()["raw_output"], accepted.json()["facts_added"]) == (
        "done",
        fixed,
        1,
    )
    fact = Fact.objects.get()
    assert (fact.extractor, str(fact.source_message_id), str(fact.extraction_run_id)) == (
        "manual",
        message["message_id"],
        run_id,
    )
    assert admin.post(url, {"output": fixed}, format="json").status_code == 409


def test_staff_discard_a_quarantined_run(api, admin, llm_server, fact_tasks):
    session_id = new_session(api)
    append(api, session_id, "x")
    llm_server.script(Reply("nothing"))
    run_id = fact_tasks[0][0]
    execute(run_id)
    assert api.post(f"/api/v1/fact-extractions/{run_id}/discard/").status_code == 403
    assert admin.post(f"/api/v1/fact-extractions/{run_id}/discard/").json()["status"] == "discarded"
    assert admin.post(f"/api/v1/fact-extractions/{run_id}/discard/").status_code == 409
    listed = api.get("/api/v1/fact-extractions/", {"status": "discarded", "session": session_id}).json()
    assert [r["id"] for r in listed["results"]] == [run_id] and listed["count"] == 1
    assert api.get("/api/v1/fact-extractions/", {"status": "bogus"}).status_code == 400


# --- LLM failures -------------------------------------------------------------------------------


def test_a_rate_limited_call_is_retried_after_retry_after(api, llm_server, fact_tasks):
    session_id = new_session(api)
    append(api, session_id, "I live in Oslo.")
    llm_server.script(Fail(429, {"Retry-After": "7"}), Garbage(), facts_reply())
    run_id = fact_tasks[0][0]
    assert execute(run_id) == "retry-in-7s"
    assert fact_tasks[-1] == (run_id, 7.0)
    run = FactExtractionRun.objects.get(pk=run_id)
    assert run.status == "pending" and "429" in run.error
    assert execute(run_id).startswith("retry-in-")  # a garbage HTTP body is transient too
    assert execute(run_id) == "done"
    assert FactExtractionRun.objects.get(pk=run_id).attempts == 3 and Fact.objects.count() == 2


def test_a_refused_request_fails_the_run_and_transient_errors_give_up(api, llm_server, fact_tasks, settings):
    session_id = new_session(api)
    append(api, session_id, "I live in Oslo.")
    llm_server.script(Fail(400))
    assert execute(fact_tasks[0][0]) == "failed"
    assert MemoryEvent.objects.filter(kind=MemoryEvent.Kind.FACT_EXTRACTION_FAILED).count() == 1

    settings.FACTS_MAX_ATTEMPTS = 2
    run = extract(api, session_id)
    llm_server.script(Fail(500), Fail(503))
    assert execute(run["id"]).startswith("retry-in-")
    assert execute(run["id"]) == "failed"
    assert "gave up after 2 attempts" in FactExtractionRun.objects.get(pk=run["id"]).error
    assert Fact.objects.count() == 0


# --- contradictions and concurrency ----------------------------------------------------------


def test_an_extracted_replacement_invalidates_the_old_value(api, llm_server, fact_tasks):
    session_id = new_session(api, memory_type="conversation_history")
    llm_server.script(
        facts_reply({"facts": [{"subject": "Ada", "predicate": "drinks", "object": "tea"}]}),
        facts_reply({"facts": [{"subject": "Ada", "predicate": "drinks", "object": "coffee", "replaces": True}]}),
    )
    execute(extract(api, session_id, text="Ada drinks tea")["id"])
    second = extract(api, session_id, text="Ada drinks coffee now")
    execute(second["id"])
    assert run_json(api, second["id"])["facts_invalidated"] == 1
    live = api.get("/api/v1/facts/", {"subject": "ada"}).json()["results"]
    assert [f["object"] for f in live] == ["coffee"]
    tea = Fact.objects.get(object="tea")
    assert tea.invalidated_by.object == "coffee"


def test_four_workers_extracting_the_same_fact_at_once_leave_one_live_fact(api, llm_server, fact_tasks):
    session_id = new_session(api, memory_type="conversation_history")
    triple = {"facts": [{"subject": "Ada", "predicate": "works at", "object": "Acme"}]}
    release = threading.Event()
    llm_server.script(*(Reply(json.dumps(triple), hold=release) for _ in range(4)))
    run_ids = [extract(api, session_id, text=f"Ada works at Acme ({i})")["id"] for i in range(4)]
    outcomes: list[str] = []

    def worker(run_id: str) -> None:
        try:
            outcomes.append(execute(run_id))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(run_id,)) for run_id in run_ids]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(llm_server.requests) < 4:  # all four are past their claim, waiting on the LLM
        assert time.monotonic() < deadline
        time.sleep(0.05)
    release.set()
    for thread in threads:
        thread.join(timeout=60)

    assert outcomes == ["done"] * 4
    live = Fact.objects.filter(invalidated_at__isnull=True)
    assert live.count() == 1 and Fact.objects.count() == 1
    assert live.get().times_seen == 4
    runs = FactExtractionRun.objects.filter(pk__in=run_ids)
    assert sorted(runs.values_list("facts_added", flat=True)) == [0, 0, 0, 1]
    assert sum(runs.values_list("facts_seen", flat=True)) == 3


# --- the sweeper ----------------------------------------------------------------------------------


def test_the_sweeper_resends_lost_runs_requeues_dead_workers_and_covers_lost_appends(
    api, llm_server, fact_tasks, settings
):
    session_id = new_session(api)
    append(api, session_id, "one")
    pending_id = fact_tasks[0][0]
    settings.FACTS_RESEND_AFTER = 1
    FactExtractionRun.objects.filter(pk=pending_id).update(queued_at="2000-01-01T00:00:00Z")
    stuck = extract(api, session_id)
    FactExtractionRun.objects.filter(pk=stuck["id"]).update(
        status="running", attempts=1, started_at="2000-01-01T00:00:00Z"
    )
    fact_tasks.clear()
    counts = fact_extraction.fact_extraction_sweep()
    assert counts["resent"] == 1 and counts["requeued"] == 1 and counts["failed"] == 0
    assert {run_id for run_id, _ in fact_tasks} == {pending_id, stuck["id"]}
    assert FactExtractionRun.objects.get(pk=stuck["id"]).status == "pending"

    # An append whose run was never recorded (the process died after committing the message).
    FactExtractionRun.objects.all().delete()
    Message.objects.create(session_id=session_id, seq=2, role="user", content="two")
    Session.objects.filter(pk=session_id).update(last_seq=2)
    fact_tasks.clear()
    assert fact_extraction.fact_extraction_sweep()["queued"] == 1
    assert fact_extraction.fact_extraction_sweep()["queued"] == 0  # one waiting run is enough
    llm_server.script(facts_reply({"facts": []}))
    assert execute(fact_tasks[0][0]) == "done"
    run = FactExtractionRun.objects.get(pk=fact_tasks[0][0])
    assert (run.from_seq, run.to_seq) == (1, 2)
    assert fact_extraction.fact_extraction_sweep()["queued"] == 0


def test_the_offline_backend_extracts_simple_facts(api, fact_tasks, settings):
    settings.LLM_BASE_URL = ""  # no server configured: the embedded extractive backend
    session_id = new_session(api)
    append(api, session_id, "My name is Ada. I live in Paris.")
    assert execute(fact_tasks[0][0]) == "done"
    run = FactExtractionRun.objects.get(pk=fact_tasks[0][0])
    assert (run.backend, run.model) == ("extractive", "extractive-v1") and run.facts_added >= 2
    found = {(f.subject_norm, f.predicate_norm, f.object_norm) for f in Fact.objects.all()}
    assert ("user", "lives in", "paris") in found
    assert all(f.extractor == "extractive:extractive-v1" for f in Fact.objects.all())
