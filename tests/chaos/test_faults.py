"""Faults against real processes the test starts itself (tests/chaos/stack.py): Redis stopped
under writers, PostgreSQL restarted under load, the broker flushed with jobs queued, and the
API killed between commit and dispatch. The oracle of each: every message acknowledged with a
2xx is stored afterwards exactly once, and every job runs to completion exactly once."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from memory_client.errors import ApiError
from memory_client.transport import HttpApi, new_idempotency_key
from tests.chaos.conftest import record_outcome
from tests.chaos.stack import BlackHole, Stack, wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

WRITERS = 20
THRESHOLD = 450  # tokens: five of the messages below (~100 each) take a session over it
FILLER = " ".join(f"word{n}" for n in range(45))  # about 60 tokens with its tag
JOBS_DONE_TIMEOUT = 300.0  # generous: two busy cores, and Celery's reconnect backoff


class Recorder(httpx.HTTPTransport):
    """Real HTTP; keeps each response's status, error code and Retry-After for the oracle."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, str, str | None]] = []
        self.lock = threading.Lock()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        error = ""
        if response.status_code >= 400:
            response.read()
            try:
                error = str(response.json().get("error", ""))
            except ValueError:
                error = "<not json>"
        with self.lock:
            self.seen.append((response.status_code, error, response.headers.get("Retry-After")))
        return response


def client(stack: Stack, *, retries: int = 0, transport: httpx.BaseTransport | None = None) -> HttpApi:
    return HttpApi(
        base_url=stack.base_url, api_key=stack.api_key, max_retries=retries, timeout=120, transport=transport
    )


def new_session(api: HttpApi, *, managed: bool = True) -> str:
    body: dict = {"system_prompt": "You are a careful agent."}
    if managed:
        # A short summary: one compaction takes the session back under its threshold.
        config = {"threshold_tokens": THRESHOLD, "active_context": {"summarization": {"output_max_tokens": 64}}}
        body |= {"memory_type": "managed_conversation", "memory_config": config}
    return api.request("POST", "sessions/", json_body=body, idempotency_key=new_idempotency_key()).json()["id"]


def message(tag: str, index: int) -> dict:
    return {"role": "user" if index % 2 == 0 else "assistant", "content": f"{tag} {FILLER}."}


class Ledger:
    """What the server acknowledged: message id -> content (a unique tag per logical write)."""

    def __init__(self) -> None:
        self.acked: dict[str, str] = {}
        self.statuses: collections.Counter[int] = collections.Counter()
        self.lock = threading.Lock()

    def add(self, response: httpx.Response, sent: dict) -> None:
        """Record a 2xx answer to `sent` (one message, or a {"messages": [...]} batch, in order)."""
        body = response.json()
        answered = body["messages"] if "messages" in body else [body]
        contents = [m["content"] for m in sent["messages"]] if "messages" in sent else [sent["content"]]
        with self.lock:
            self.statuses[response.status_code] += 1
            for row, content in zip(answered, contents, strict=True):
                self.acked[row["message_id"]] = content


def oracle(stack: Stack, ledger: Ledger) -> tuple[int, int]:
    """(acknowledged ids present exactly once, messages stored more than once by content)."""
    rows = stack.query("SELECT id::text, content #>> '{}' FROM memory_app_message")
    by_id = collections.Counter(row[0] for row in rows)
    by_content = collections.Counter(row[1] for row in rows)
    present = sum(1 for message_id in ledger.acked if by_id[message_id] == 1)
    duplicates = sum(count - 1 for count in by_content.values() if count > 1)
    return present, duplicates


def runs(stack: Stack) -> list[tuple[str, str, int]]:
    return stack.query("SELECT id::text, status, attempts FROM memory_app_compactionrun ORDER BY created_at")


def starts_per_run(stack: Stack) -> collections.Counter[str]:
    rows = stack.query("SELECT data->>'run_id' FROM memory_app_memoryevent WHERE kind = 'compaction_started'")
    return collections.Counter(row[0] for row in rows)


def all_runs_finished(stack: Stack) -> bool:
    """Every run ended, however: done, failed, or skipped (a run queued by a later write that found
    nothing worth an LLM call ends `skipped`; waiting for done or failed only would wait forever)."""
    current = runs(stack)
    return bool(current) and all(status not in ("pending", "running") for _, status, _ in current)


def sweeper_resent(stack: Stack) -> int:
    """Runs the compaction sweeper re-sent, from the worker's log of the sweep task's results."""
    assert stack.worker is not None
    total = 0
    for line in stack.worker.output().splitlines():
        if "sweep_compactions" in line and "succeeded" in line and "resent=" in line:
            total += int(line.split("resent=")[1].split(",")[0])
    return total


def in_parallel(count: int, work: Callable[[int], None]) -> None:
    with ThreadPoolExecutor(max_workers=count) as pool:
        for future in [pool.submit(work, index) for index in range(count)]:
            future.result()


def llm_endpoint_statuses(api: HttpApi, session_id: str) -> dict[str, int | None]:
    """The status of each endpoint that causes LLM work (compact returns the session's pending run)."""
    calls = {
        "compact": ("POST", f"sessions/{session_id}/compact/", None),
        "extract-facts": ("POST", f"sessions/{session_id}/extract-facts/", {}),
        "select": ("POST", "experiences/select/", {"role": "planner", "query": "what next?"}),
    }
    statuses: dict[str, int | None] = {}
    for name, (method, path, body) in calls.items():
        try:
            statuses[name] = api.request(method, path, json_body=body).status_code
        except ApiError as exc:
            statuses[name] = exc.status_code
    return statuses


def test_writes_answer_201_while_redis_is_down_and_their_jobs_run_once_it_returns(stack: Stack) -> None:
    started = time.monotonic()
    stack.start_web(workers=3)
    stack.start_worker()
    stack.start_beat()
    api = client(stack)
    sessions = [new_session(api) for _ in range(WRITERS)]
    ledger = Ledger()
    failures: list[str] = []

    def write(phase: str, count: int) -> Callable[[int], None]:
        def run(writer: int) -> None:
            own = client(stack)  # no retries: every write must be answered 201 the first time
            try:
                for index in range(count):
                    body = message(f"{phase}-w{writer}-m{index}", index)
                    try:
                        response = own.request("POST", f"sessions/{sessions[writer]}/messages/", json_body=body)
                    except ApiError as exc:
                        failures.append(f"{phase} w{writer} m{index}: {exc}")
                        continue
                    ledger.add(response, body)
            finally:
                own.close()

        return run

    in_parallel(WRITERS, write("before", 2))  # under the threshold: no job yet
    stack.redis.stop()
    in_parallel(WRITERS, write("down", 6))  # each session crosses its threshold now
    waiting = {row[0] for row in stack.query("SELECT id::text FROM memory_app_compactionrun WHERE status = 'pending'")}
    pending = len(waiting)
    llm_endpoints = llm_endpoint_statuses(api, sessions[0])  # their rate limit is counted in Redis
    stack.redis.start()
    in_parallel(WRITERS, write("after", 2))

    wait_for(lambda: all_runs_finished(stack), timeout=JOBS_DONE_TIMEOUT, what="every compaction to finish")
    present, duplicates = oracle(stack, ledger)
    finished = runs(stack)
    starts = starts_per_run(stack)
    record_outcome(
        "redis stopped while 20 writers append",
        acknowledged=len(ledger.acked),
        present=present,
        duplicates=duplicates,
        writes_201=ledger.statuses[201],
        pending_while_down=pending,
        jobs=len(finished),
        jobs_done=sum(1 for _, status, _ in finished if status == "done"),
        jobs_run_twice=sum(1 for run_id, _, attempts in finished if attempts != 1 or starts[run_id] != 1),
        seconds=round(time.monotonic() - started, 1),
    )
    assert failures == []
    assert ledger.statuses == {201: WRITERS * 10}
    # The LLM-backed endpoints let requests through unthrottled (the budget still bounds them).
    assert llm_endpoints == {"compact": 202, "extract-facts": 202, "select": 200}
    assert pending == WRITERS  # every session's job waited in the database, not in the broker
    assert present == len(ledger.acked) == WRITERS * 10
    assert duplicates == 0
    # The jobs queued during the outage all completed; no job (later ones too) ran twice.
    assert {run_id for run_id, status, _ in finished if status == "done"} >= waiting
    assert all(attempts == 1 and starts[run_id] == 1 for run_id, _, attempts in finished)


def test_a_postgres_restart_answers_json_503_and_keyed_retries_store_every_message_once(stack: Stack) -> None:
    started = time.monotonic()
    stack.start_web(workers=3)
    stack.start_worker()
    stack.start_beat()
    setup = client(stack)
    sessions = [new_session(setup, managed=False) for _ in range(WRITERS)]
    recorder = Recorder()
    ledger = Ledger()
    failures: list[str] = []
    restarted = threading.Event()
    after_restart: collections.Counter[int] = collections.Counter()

    def writer(index: int) -> None:
        # The memory_client transport: one Idempotency-Key per logical write, reused by its
        # retries (503s honour Retry-After); no message_id, so only the key can deduplicate.
        own = client(stack, retries=60, transport=recorder)
        try:
            number = 0
            while after_restart[index] < 5 and number < 400:
                body = {"role": "user", "content": f"pg-w{index}-m{number}"}
                try:
                    response = own.request(
                        "POST",
                        f"sessions/{sessions[index]}/messages/",
                        json_body=body,
                        idempotency_key=new_idempotency_key(),
                    )
                except ApiError as exc:
                    failures.append(f"w{index} m{number}: {exc}")
                else:
                    ledger.add(response, body)
                    if restarted.is_set():
                        after_restart[index] += 1
                number += 1
        finally:
            own.close()

    threads = [threading.Thread(target=writer, args=(index,)) for index in range(WRITERS)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(ledger.acked) >= 100, timeout=120, what="100 writes before the restart")
        stack.cluster.restart()
        restarted.set()
    finally:
        restarted.set()
        for thread in threads:
            thread.join(timeout=300)

    present, duplicates = oracle(stack, ledger)
    unavailable = [seen for seen in recorder.seen if seen[0] == 503]
    server_errors = collections.Counter(status for status, _, _ in recorder.seen if status >= 500)
    replayed = sum(1 for status, _, _ in recorder.seen if status == 201) - len(ledger.acked)
    record_outcome(
        "postgres restarted under load",
        acknowledged=len(ledger.acked),
        present=present,
        duplicates=duplicates,
        json_503=len(unavailable),
        other_5xx=sum(count for status, count in server_errors.items() if status != 503),
        seconds=round(time.monotonic() - started, 1),
    )
    assert failures == []
    assert all(not thread.is_alive() for thread in threads)
    assert unavailable, "no request met the restart"
    assert all(error == "database_unavailable" and retry_after == "1" for _, error, retry_after in unavailable)
    assert set(server_errors) == {503}
    assert all(count >= 5 for count in after_restart.values()) and len(after_restart) == WRITERS
    assert present == len(ledger.acked)
    assert duplicates == 0
    assert replayed >= 0


def test_the_sweeper_resends_every_job_after_the_broker_is_flushed(stack: Stack) -> None:
    started = time.monotonic()
    stack.start_web()
    api = client(stack)
    ledger = Ledger()
    jobs = 10
    for number in range(jobs):
        session = new_session(api)
        batch = {"messages": [message(f"flush-s{number}-m{index}", index) for index in range(8)]}
        ledger.add(api.request("POST", f"sessions/{session}/messages/", json_body=batch), batch)
    flushed = {row[0] for row in runs(stack)}
    queued = int(stack.redis.cli("LLEN", "compaction") or 0)
    stack.redis.cli("FLUSHDB")
    left = int(stack.redis.cli("LLEN", "compaction") or 0)

    stack.start_worker()
    stack.start_beat()
    wait_for(lambda: all_runs_finished(stack), timeout=JOBS_DONE_TIMEOUT, what="every compaction to finish")
    present, duplicates = oracle(stack, ledger)
    finished = runs(stack)
    starts = starts_per_run(stack)
    record_outcome(
        "broker flushed with jobs queued",
        acknowledged=len(ledger.acked),
        present=present,
        duplicates=duplicates,
        queued_before_flush=queued,
        jobs=len(finished),
        jobs_done=sum(1 for _, status, _ in finished if status == "done"),
        resent_by_sweeper=sweeper_resent(stack),
        seconds=round(time.monotonic() - started, 1),
    )
    assert (queued, left) == (jobs, 0)
    # Every flushed job completed (a session still over its threshold may get a later one);
    # no job ran twice.
    assert len(flushed) == jobs
    assert {run_id for run_id, status, _ in finished if status == "done"} >= flushed
    assert all(attempts == 1 and starts[run_id] == 1 for run_id, _, attempts in finished)
    assert sweeper_resent(stack) >= jobs
    assert present == len(ledger.acked) == jobs * 8
    assert duplicates == 0


def test_the_sweeper_dispatches_a_job_whose_api_process_died_after_commit(stack: Stack) -> None:
    started = time.monotonic()
    stack.start_worker()
    stack.start_beat()
    hole = BlackHole()  # the web's broker: accepts, never answers, so the send after commit hangs
    try:
        stack.start_web(workers=1, CELERY_BROKER_URL=hole.url, MEMSITE_BROKER_SEND_TIMEOUT="300")
        api = client(stack)
        session = new_session(api)
        key = new_idempotency_key()
        batch = {"messages": [message(f"kill-m{index}", index) for index in range(8)]}
        outcome: list[object] = []

        def send() -> None:
            try:
                outcome.append(
                    api.request("POST", f"sessions/{session}/messages/", json_body=batch, idempotency_key=key)
                )
            except ApiError as exc:
                outcome.append(exc)

        thread = threading.Thread(target=send)
        thread.start()

        def committed_and_dispatching() -> bool:
            pending = stack.query("SELECT count(*) FROM memory_app_compactionrun WHERE status = 'pending'")[0][0]
            return pending == 1 and len(hole.held) > 0 and thread.is_alive()

        wait_for(committed_and_dispatching, timeout=120, what="the append to commit and hang in the task send")
        stack.web.kill()
        thread.join(timeout=60)
    finally:
        hole.close()
    assert len(outcome) == 1 and isinstance(outcome[0], ApiError)  # no answer: the client cannot know
    stored_before_retry = stack.query("SELECT count(*) FROM memory_app_message")[0][0]

    wait_for(lambda: all_runs_finished(stack), timeout=JOBS_DONE_TIMEOUT, what="the sweeper to dispatch the job")
    # The client retries the write with its key against a restarted API: the stored answer comes back.
    stack.start_web(workers=1)
    retry = client(stack, retries=5)
    response = retry.request("POST", f"sessions/{session}/messages/", json_body=batch, idempotency_key=key)
    ledger = Ledger()
    ledger.add(response, batch)
    present, duplicates = oracle(stack, ledger)
    finished = runs(stack)
    record_outcome(
        "api killed between commit and dispatch",
        acknowledged=len(ledger.acked),
        present=present,
        duplicates=duplicates,
        jobs=len(finished),
        jobs_done=sum(1 for _, status, _ in finished if status == "done"),
        resent_by_sweeper=sweeper_resent(stack),
        replayed=response.headers.get("Idempotent-Replayed") == "true",
        seconds=round(time.monotonic() - started, 1),
    )
    assert stored_before_retry == 8
    assert (response.status_code, response.headers.get("Idempotent-Replayed")) == (201, "true")
    assert finished[0][1:] == ("done", 1)
    assert all(attempts == 1 for _, _, attempts in finished)
    assert sweeper_resent(stack) >= 1
    assert present == len(ledger.acked) == 8
    assert duplicates == 0
