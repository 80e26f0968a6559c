"""Run one REST operation inside an MCP request: the same view, serializers, services and errors.

A tool is a REST call the server makes to itself without the network: the request is built
from the tool's arguments and handed to the view its URL resolves to, authenticated as the key
the MCP request already proved. So a tool cannot validate, scope, throttle, count or answer
differently from its endpoint: there is one path per operation, and every test of the REST
endpoint covers the tool too.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpRequest
from django.urls import Resolver404, resolve

from memory_app.tenancy.models import ApiKey
from memory_client.vocabulary.wire import ErrorBody

# Headers of the MCP request the inner request keeps: who is calling and how to trace it.
_FORWARDED_META = ("HTTP_HOST", "SERVER_NAME", "SERVER_PORT", "REMOTE_ADDR", "HTTP_USER_AGENT", "wsgi.url_scheme")


@dataclass(frozen=True)
class ApiAnswer:
    status: int
    body: Any
    endpoint: str  # the URL pattern that answered, for metrics and logs
    seconds: float

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def call_api(
    outer: HttpRequest,
    *,
    api_key: ApiKey,
    method: str,
    path: str,
    query: dict[str, Any] | None = None,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> ApiAnswer:
    """Answer `method path` as the REST API would for `api_key`, without leaving the process."""
    started = time.monotonic()
    data = b"" if body is None else json.dumps(body).encode()
    environ: dict[str, Any] = {key: outer.META[key] for key in _FORWARDED_META if key in outer.META}
    environ.update(
        {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "SCRIPT_NAME": "",
            "QUERY_STRING": urlencode({k: v for k, v in (query or {}).items() if v is not None}, doseq=True),
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(data)),
            "wsgi.input": io.BytesIO(data),
            "HTTP_X_REQUEST_ID": getattr(outer, "request_id", ""),
        }
    )
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    inner = WSGIRequest(environ)
    # DRF's Request honours these (rest_framework/request.py, ForcedAuthentication): the MCP
    # request's key was already looked up and checked, so the view is not asked to do it again.
    inner._force_auth_user = None  # type: ignore[attr-defined]
    inner._force_auth_token = api_key  # type: ignore[attr-defined]
    try:
        match = resolve(path)
    except Resolver404:  # a tool only builds paths of its own endpoint; an id that fits no pattern
        return ApiAnswer(404, _not_found(), "<unmatched>", time.monotonic() - started)
    inner.resolver_match = match
    response = match.func(inner, *match.args, **match.kwargs)
    if hasattr(response, "render"):
        response.render()
    content = getattr(response, "content", b"")
    try:
        parsed = json.loads(content) if content else None
    except ValueError:
        parsed = {"text": content.decode(errors="replace")}
    return ApiAnswer(response.status_code, parsed, "/" + match.route, time.monotonic() - started)


def _not_found() -> ErrorBody:
    return {"error": "not_found", "detail": "Not found.", "fields": {}}
