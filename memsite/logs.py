"""Structured logs: a request id that follows a request into the tasks it causes, and
formatters that never write a secret or a message's content.

The request id lives in a contextvar: the request middleware sets it for the duration of
a request, `before_task_publish` copies it into the headers of every task sent meanwhile,
and `task_prerun` sets it again in the worker, so the task's log lines carry it too.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from memsite.masking import REDACTED, mask_secrets

REQUEST_ID_HEADER = "memsite_request_id"  # the Celery message header carrying it
request_id_var: ContextVar[str | None] = ContextVar("memsite_request_id", default=None)
task_var: ContextVar[tuple[str, str] | None] = ContextVar("memsite_task", default=None)

# An incoming X-Request-ID is kept only when it is a short token; anything else (spaces,
# quotes, newlines that could forge log lines, huge values) is replaced by a fresh id.
_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")

# Keys whose values are secrets: masked wherever they appear in a log record's extras.
_SECRET_KEY = re.compile(
    r"(authorization|api[_-]?key|secret|password|passwd|token|cookie|credential|signature|private[_-]?key)",
    re.IGNORECASE,
)
# Keys whose values are what users and agents wrote: never logged, only their size.
_CONTENT_KEYS = frozenset(
    {
        "content",
        "messages",
        "message_content",
        "text",
        "prompt",
        "query",
        "user_query",
        "context",
        "raw_output",
        "raw_response",
        "summary",
        "body",
        "what",
        "when",
        "input_text",
        "transcript",
    }
)
# Characters that can end a line or drive a terminal: C0 controls, DEL, C1 controls (NEL among
# them) and the Unicode line and paragraph separators. A client who gets one into a message
# (a request path, a header) could otherwise start what looks like a record of its own.
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# The ones json.dumps(ensure_ascii=False) leaves as they are, though str.splitlines() and
# many log viewers break lines on them.
_RAW_IN_JSON = re.compile(r"[\x7f-\x9f\u2028\u2029]")
# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def new_request_id() -> str:
    return uuid.uuid4().hex


def sane_request_id(value: str | None) -> str:
    """The client's id when it is a sane token, else a fresh one."""
    if value and _SANE_REQUEST_ID.match(value):
        return value
    return new_request_id()


def clear_context(**_: Any) -> None:
    """Forget the request or task id: connected to Django's `request_finished` (sent when the
    server closes the response, so even Django's own "Not Found" line, logged after the
    middleware returned, still has the id) and to Celery's `task_postrun`."""
    request_id_var.set(None)
    task_var.set(None)


def escape_control_chars(text: str) -> str:
    """`text` on one line: each control character written as a visible escape (`\\n`, `\\x1b`, `\\u2028`)."""
    return _CONTROL_CHARS.sub(_escape_match, text)


def _escape_match(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    return f"\\x{ord(char):02x}" if ord(char) <= 0xFF else f"\\u{ord(char):04x}"


def _json_escape_match(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def redact(value: Any, key: str = "") -> Any:
    """A JSON-safe copy of an extra's value with secrets masked and content left out."""
    if key and _SECRET_KEY.search(key):
        return REDACTED
    if key.lower() in _CONTENT_KEYS:
        return "[content omitted]"
    if isinstance(value, Mapping):
        return {str(k): redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [redact(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    text = str(value)
    return mask_secrets(text) if len(text) >= 8 else text  # nothing shorter can hold a secret


class ContextFilter(logging.Filter):
    """Put the current request id and task on every record (None outside a request/task)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        task = task_var.get()
        record.task_id, record.task_name = task if task else (None, None)
        return True


class TextFormatter(logging.Formatter):
    """The human-readable format, with secrets masked, one line per record: line breaks in the
    message, the extras or a traceback are escaped, so no client input can forge a line."""

    def __init__(self, fmt: str | None = None, datefmt: str | None = None) -> None:
        super().__init__(fmt or "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s", datefmt)

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "request_id"):
            ContextFilter().filter(record)
        # Masked before escaping: the secret patterns expect the whitespace the text really had.
        return escape_control_chars(mask_secrets(super().format(record)))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request and task ids, and
    the record's extras (redacted). Objects such as an HttpRequest are never dumped."""

    def format(self, record: logging.LogRecord) -> str:
        if not hasattr(record, "request_id"):
            ContextFilter().filter(record)
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": mask_secrets(record.getMessage()),
            "request_id": record.request_id,  # type: ignore[attr-defined]  # set by ContextFilter
            "pid": record.process,
        }
        if record.task_id:  # type: ignore[attr-defined]  # set by ContextFilter
            entry["task_id"] = record.task_id  # type: ignore[attr-defined]  # set by ContextFilter
            entry["task_name"] = record.task_name  # type: ignore[attr-defined]  # set by ContextFilter
        for key, value in vars(record).items():
            if key in _RECORD_FIELDS or key in entry or key in ("task_id", "task_name"):
                continue
            if key in ("request", "response"):  # Django attaches these objects; the path is in the message
                continue
            entry[key] = redact(value, key)
        if record.exc_info:
            entry["exc"] = mask_secrets(self.formatException(record.exc_info))
        elif record.stack_info:
            entry["stack"] = mask_secrets(self.formatStack(record.stack_info))
        # json.dumps escapes C0 controls itself; the rest become \u escapes, which decode to the same text.
        return _RAW_IN_JSON.sub(_json_escape_match, json.dumps(entry, default=str, ensure_ascii=False))


# --- Celery: carry the request id from the publishing process into the task --------------


def on_before_task_publish(headers: dict[str, Any] | None = None, **_: Any) -> None:
    request_id = request_id_var.get()
    if request_id and headers is not None:
        headers.setdefault(REQUEST_ID_HEADER, request_id)


def on_task_prerun(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    request = getattr(task, "request", None)
    request_id = getattr(request, REQUEST_ID_HEADER, None) if request is not None else None
    if request_id is None and request is not None:
        request_id = (getattr(request, "headers", None) or {}).get(REQUEST_ID_HEADER)
    request_id_var.set(sane_request_id(request_id) if request_id else None)
    task_var.set((task_id or "", getattr(task, "name", "")))


on_task_postrun = clear_context
