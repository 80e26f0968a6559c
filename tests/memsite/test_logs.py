"""Structured logs: JSON lines with the request id, which follows a request into the worker
that runs the tasks it caused; secrets and message content never reach a log line."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import uuid
from collections.abc import Callable, Iterator

import pytest

from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memsite import logs
from tests.memory_app.compaction.test_compaction import MANAGED, queued_run, summary_reply, turns
from tests.worker_process import wait_for

CONTENT_CANARY = "CANARY-CONTENT-5e1d9b"
SECRET_CANARY = "sk-canary-secret-83fd02a1"


@contextlib.contextmanager
def root_log_output(formatter: logging.Formatter) -> Iterator[io.StringIO]:
    """What the root logger writes meanwhile, at DEBUG, through `formatter`."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    handler.addFilter(logs.ContextFilter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture
def log_lines() -> Iterator[Callable[[], list[str]]]:
    """Every line the root logger writes meanwhile, at DEBUG, through the JSON formatter."""
    with root_log_output(logs.JsonFormatter()) as stream:
        yield lambda: [line for line in stream.getvalue().splitlines() if line]


@pytest.fixture
def text_log() -> Iterator[Callable[[], str]]:
    """Everything the root logger writes meanwhile, at DEBUG, through the text formatter."""
    with root_log_output(logs.TextFormatter()) as stream:
        yield stream.getvalue


def record(msg: str = "hello", *args: object, exc: BaseException | None = None, **extra: object) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc else None
    entry = logging.LogRecord("memsite.test", logging.INFO, __file__, 1, msg, args or None, exc_info)
    entry.__dict__.update(extra)
    return entry


# --- the formatter --------------------------------------------------------------------------


def test_a_json_line_has_time_level_logger_message_and_the_current_request_id():
    logs.request_id_var.set("req-1")
    try:
        line = logs.JsonFormatter().format(record("%s served", "page", duration_ms=12))
    finally:
        logs.clear_context()
    entry = json.loads(line)
    assert "\n" not in line
    assert entry["level"] == "INFO" and entry["logger"] == "memsite.test"
    assert entry["message"] == "page served" and entry["request_id"] == "req-1" and entry["duration_ms"] == 12
    assert entry["ts"].endswith("+00:00")


def test_secret_bearing_extras_are_masked_at_any_depth():
    line = logs.JsonFormatter().format(
        record(
            headers={"Authorization": f"Bearer {SECRET_CANARY}", "Accept": "application/json"},
            llm_api_key=SECRET_CANARY,
            webhook_secret=SECRET_CANARY,
            config={"password": SECRET_CANARY, "nested": [{"X-Api-Key": SECRET_CANARY}]},
        )
    )
    assert SECRET_CANARY not in line
    entry = json.loads(line)
    assert entry["headers"] == {"Authorization": "[redacted]", "Accept": "application/json"}
    assert entry["llm_api_key"] == entry["webhook_secret"] == "[redacted]"
    assert entry["config"] == {"password": "[redacted]", "nested": [{"X-Api-Key": "[redacted]"}]}


def test_message_content_in_extras_is_left_out():
    line = logs.JsonFormatter().format(
        record(content=CONTENT_CANARY, messages=[{"role": "user", "content": CONTENT_CANARY}], query=CONTENT_CANARY)
    )
    assert CONTENT_CANARY not in line
    assert json.loads(line)["messages"] == "[content omitted]"


def test_configured_secrets_and_credentials_are_masked_in_messages_and_tracebacks(settings):
    settings.LLM_API_KEY = SECRET_CANARY
    key = "msk_AbCdEfGh" + "x" * 40
    try:
        raise RuntimeError(f"upstream refused {SECRET_CANARY}")
    except RuntimeError as exc:
        error = exc
    for formatter in (logs.JsonFormatter(), logs.TextFormatter()):
        line = formatter.format(
            record("calling with %s and Bearer %s then %s", SECRET_CANARY, "tok" * 5, key, exc=error)
        )
        assert SECRET_CANARY not in line and "toktoktok" not in line and key not in line
        assert "[redacted]" in line


@pytest.mark.parametrize(
    ("incoming", "kept"),
    [
        ("req-42", True),
        ("9f1c2e0a-7b7d-4c5e-9a57-1f0e6f2b8c11", True),
        ("svc.trace:abc_1", True),
        ("", False),
        ("has space", False),
        ("line\nforged", False),
        ('quote"d', False),
        ("x" * 200, False),
    ],
)
def test_incoming_request_ids_are_kept_only_when_sane(incoming: str, kept: bool):
    result = logs.sane_request_id(incoming)
    if kept:
        assert result == incoming
    else:
        assert result != incoming and len(result) == 32 and int(result, 16) >= 0


# Characters that end a line for some reader: `str.splitlines()`, terminals, editors, log viewers.
LINE_BREAKERS = ["\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
FORGED = "2031-01-01 00:00:00,000 ERROR django.security [-] admin logged in from 1.2.3.4"


@pytest.mark.parametrize("breaker", LINE_BREAKERS, ids=repr)
def test_a_text_record_stays_one_line_whatever_its_message_and_extras_hold(breaker: str):
    formatter = logs.TextFormatter("%(levelname)s %(message)s path=%(path)s")
    line = formatter.format(record("Not Found: %s", f"/x{breaker}{FORGED}", path=f"/x{breaker}{FORGED}"))
    assert len(line.splitlines()) == 1, line
    assert FORGED in line  # still readable, after an escape instead of a line break


def test_the_text_format_escapes_control_characters_visibly():
    line = logs.TextFormatter("%(message)s").format(record("a\nb\rc\td\x00e\x1bf\x7fg\x9bh\u2028i"))
    assert line == "a\\nb\\rc\\td\\x00e\\x1bf\\x7fg\\x9bh\\u2028i"


def test_a_text_record_with_a_traceback_is_one_line_too():
    try:
        raise ValueError(f"bad path /x\n{FORGED}")
    except ValueError as exc:
        error = exc
    line = logs.TextFormatter().format(record("failed", exc=error))
    assert len(line.splitlines()) == 1
    assert "Traceback (most recent call last):\\n" in line and f"\\n{FORGED}" in line


@pytest.mark.parametrize("breaker", LINE_BREAKERS, ids=repr)
def test_a_json_record_is_one_line_that_keeps_the_text_exactly(breaker: str):
    text = f"/x{breaker}{FORGED}"
    line = logs.JsonFormatter().format(record("Not Found: %s", text, path=text))
    assert len(line.splitlines()) == 1, line
    entry = json.loads(line)
    assert entry["message"] == f"Not Found: {text}" and entry["path"] == text


# --- requests -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_request_id_is_returned_and_on_every_log_line_of_the_request(api, log_lines):
    response = api.get(f"/api/v1/sessions/{uuid.uuid4()}/", HTTP_X_REQUEST_ID="req-42")
    assert response.status_code == 404 and response["X-Request-ID"] == "req-42"
    entries = [json.loads(line) for line in log_lines()]
    loggers = {entry["logger"] for entry in entries}
    assert {"memsite.request", "django.request"} <= loggers  # Django's "Not Found" is logged after the middleware
    assert {entry["request_id"] for entry in entries} == {"req-42"}
    access = next(entry for entry in entries if entry["logger"] == "memsite.request")
    assert access["endpoint"] == "/api/v1/sessions/<uuid:session_id>/" and access["status"] == 404
    assert logs.request_id_var.get() is None  # forgotten once the response is closed


@pytest.mark.django_db
def test_an_unsafe_or_missing_request_id_is_replaced_by_a_fresh_one(api):
    forged = api.get("/api/v1/sessions/", HTTP_X_REQUEST_ID="x\nlevel=ERROR forged")
    plain = api.get("/api/v1/sessions/")
    ids = {forged["X-Request-ID"], plain["X-Request-ID"]}
    assert len(ids) == 2 and all(len(i) == 32 for i in ids)


@pytest.mark.django_db
def test_a_request_path_cannot_forge_a_text_log_line(api, text_log):
    path = "/api/v1/sessions/x%0a" + FORGED.replace(" ", "%20") + "%0d%e2%80%a8/"
    response = api.get(path, HTTP_X_REQUEST_ID="req-forge")
    assert response.status_code == 404
    lines = text_log().splitlines()
    assert any("Not Found" in line for line in lines) and any("memsite.request" in line for line in lines)
    assert all("[req-forge]" in line for line in lines), lines  # every line is a whole record of this request


@pytest.mark.django_db
def test_log_lines_never_carry_the_secrets_or_content_a_request_carried(
    api, tenant, log_lines, llm_server, sent_tasks, settings
):
    settings.LLM_API_KEY = SECRET_CANARY
    created = api.post(f"/api/v1/sessions/?api_key={SECRET_CANARY}", MANAGED, format="json")
    session_id = created.json()["id"]
    messages = [*turns(6), {"role": "user", "content": f"my password is {CONTENT_CANARY}"}]
    appended = api.post(f"/api/v1/sessions/{session_id}/messages/", {"messages": messages}, format="json")
    refused = api.post(
        f"/api/v1/sessions/{session_id}/messages/",
        {"messages": [{"role": "wizard", "content": CONTENT_CANARY}]},
        format="json",
        HTTP_X_API_KEY=SECRET_CANARY,
    )
    assert (created.status_code, appended.status_code, refused.status_code) == (201, 201, 400)
    llm_server.script(summary_reply())
    assert compaction.compaction_execute(run_id=str(queued_run(session_id).pk)) == "done"  # an LLM call, in-process

    output = "\n".join(log_lines())
    assert "Bad Request" in output and "/messages/" in output  # the refused request was logged
    assert "HTTP Request: POST" in output  # so was the LLM call
    for leaked in (CONTENT_CANARY, SECRET_CANARY, tenant.key, "question 0", "answer 5"):
        assert leaked not in output, leaked


# --- into the worker ------------------------------------------------------------------------


@pytest.fixture
def worker_env() -> dict[str, str]:
    return {"MEMSITE_LOG_FORMAT": "json", "LLM_API_KEY": SECRET_CANARY}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_request_id_follows_a_request_into_the_worker_that_runs_its_task(api, tenant, start_worker):
    json_worker = start_worker()
    session_id = api.post("/api/v1/sessions/", MANAGED, format="json").json()["id"]
    messages = [*turns(6), {"role": "user", "content": CONTENT_CANARY}]
    response = api.post(
        f"/api/v1/sessions/{session_id}/messages/", {"messages": messages}, format="json", HTTP_X_REQUEST_ID="trace-7c1"
    )
    assert response.status_code == 201 and response["X-Request-ID"] == "trace-7c1"
    run = CompactionRun.objects.filter(session_id=session_id)
    wait_for(lambda: run.filter(status="done").exists(), timeout=60, what="the compaction")

    def task_entries() -> list[dict]:
        entries = [json.loads(line) for line in list(json_worker.lines) if line.startswith("{")]
        return [entry for entry in entries if entry.get("task_name") == "memory_app.tasks.compact_session"]

    def ours() -> list[dict]:
        # Only the execution that ran this run: a broker shared by the whole test session may hand
        # the new worker a message some earlier test left queued, about a run long rolled back.
        entries = task_entries()
        done = {e["task_id"] for e in entries if e["message"] == "job finished" and e.get("outcome") == "done"}
        return [e for e in entries if e["task_id"] in done]

    wait_for(lambda: any("succeeded" in e["message"] for e in ours()), timeout=30, what="the task's log")
    entries = ours()
    assert {entry["request_id"] for entry in entries} == {"trace-7c1"}
    messages_logged = [entry["message"] for entry in entries]
    assert "job finished" in messages_logged  # memsite's own line
    assert any(m.startswith("HTTP Request: POST") for m in messages_logged)  # the LLM call, inside the task
    worker_output = "".join(json_worker.lines)
    for leaked in (CONTENT_CANARY, SECRET_CANARY, tenant.key):
        assert leaked not in worker_output, leaked
