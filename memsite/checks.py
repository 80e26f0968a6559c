"""System checks for dangerous setting combinations (run by `manage.py check` and at start-up).

Plain functions: memory_app's AppConfig.ready() registers them with the domain's own checks,
so importing this module changes nothing."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error
from django.utils.module_loading import import_string

from memsite.url_policy import UnsafeURL, check_outbound_url


def _model_server_url(setting: str, check_id: str) -> list[CheckMessage]:
    """A model server's URL is the operator's choice, so a private or loopback server is fine;
    a `file:` URL, a link-local address or a cloud metadata host never is. The name is not
    resolved here: start-up must not depend on DNS."""
    url = getattr(settings, setting, "")
    if not url:
        return []
    try:
        check_outbound_url(url, allow_private=True, resolve=False, field=setting)
    except UnsafeURL as exc:
        return [
            Error(
                f"{setting} is refused: {exc.fields[setting][0]}",
                hint=f"Point {setting} at an http(s) OpenAI-compatible server.",
                id=check_id,
            )
        ]
    return []


def check_llm_base_url(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return _model_server_url("LLM_BASE_URL", "memsite.E001")


def check_embeddings_base_url(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    return _model_server_url("EMBEDDINGS_BASE_URL", "memsite.E003")


def check_job_dispatcher(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Sending a job logs and swallows every error (the row is durable), so a mistyped
    JOB_DISPATCHER would only show as warnings while no job ever runs: refuse it at start-up."""
    path = getattr(settings, "JOB_DISPATCHER", "")
    try:
        dispatcher = import_string(path)
    except ImportError as exc:
        problem = f"cannot be imported ({exc})"
    else:
        if isinstance(dispatcher, type) and callable(getattr(dispatcher, "send", None)):
            return []
        problem = "is not a class with a send(kind, job_id, countdown) method"
    return [
        Error(
            f"JOB_DISPATCHER {path!r} {problem}",
            hint="Name a class in memory_app.jobs.dispatchers, e.g. memory_app.jobs.dispatchers.CeleryDispatcher.",
            id="memsite.E002",
        )
    ]
