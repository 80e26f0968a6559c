"""Request middleware: the body size cap, URLs no database can take, an unreachable database
(503), the request id, and request metrics and logs, all answering in the API's JSON error shape."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

from memory_client.vocabulary.wire import ErrorBody
from memsite import logs, metrics_hooks
from memsite.parsers import NUL, NUL_PROBLEM

request_log = logging.getLogger("memsite.request")
log = logging.getLogger(__name__)
# What the database driver raises (wrapped by Django) when the server restarts, refuses
# connections or drops them: transient, so the client is told to retry, not that it erred.
DATABASE_ERRORS = (OperationalError, InterfaceError)
# The endpoint of a request no URL pattern matched (a 404 before any view).
UNMATCHED = "<unmatched>"


class BodySizeLimitMiddleware:
    """Answer 413 in the API's JSON error shape when Content-Length exceeds the cap.

    Django's own DATA_UPLOAD_MAX_MEMORY_SIZE still guards bodies sent without a length;
    the API exception handler maps that error to the same response.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = request.META.get("CONTENT_LENGTH") or "0"
        try:
            size = int(length)
        except ValueError:
            size = 0
        if size > settings.MAX_BODY_BYTES:
            return too_large_response()
        return self.get_response(request)


class NulInUrlMiddleware:
    """Answer 400 before any view runs when the path or a query value holds a NUL character.

    A path segment (an agent name, a round id) or a filter value reaches a query as text, and
    PostgreSQL refuses NUL in text with an error (a 500) where SQLite would simply find nothing;
    refused here, every database answers alike and no query is spent on it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        field = _nul_field(request)
        if field is None:
            return self.get_response(request)
        if not request.path.startswith("/api/"):
            return HttpResponseBadRequest(f"{field}: {NUL_PROBLEM}", content_type="text/plain")
        body: ErrorBody = {
            "error": "validation_error",
            "detail": f"{field}: {NUL_PROBLEM}",
            "fields": {field: [NUL_PROBLEM]},
        }
        return JsonResponse(body, status=400)


def _nul_field(request: HttpRequest) -> str | None:
    """ "path", the first query parameter holding a NUL, or None."""
    if NUL in request.path:
        return "path"
    for name, values in request.GET.lists():
        if NUL in name or any(NUL in value for value in values):
            return name.replace(NUL, "")
    return None


def too_large_response() -> JsonResponse:
    body: ErrorBody = {
        "error": "payload_too_large",
        "detail": f"Request body exceeds the limit of {settings.MAX_BODY_BYTES} bytes.",
        "fields": {},
    }
    return JsonResponse(body, status=413)


def database_unavailable_body(exc: Exception) -> ErrorBody:
    log.warning("database unavailable: %s: %s", type(exc).__name__, str(exc).strip()[:200])
    return {
        "error": "database_unavailable",
        "detail": "The database is unavailable; retry the request shortly.",
        "fields": {},
    }


def database_unavailable_response(exc: Exception) -> JsonResponse:
    response = JsonResponse(database_unavailable_body(exc), status=503)
    response["Retry-After"] = str(settings.DB_UNAVAILABLE_RETRY_AFTER)
    return response


class DatabaseUnavailableMiddleware:
    """A JSON 503 with Retry-After for a database outage in any view (the API's own
    exception handler does the same for DRF views). Django drops the broken connection at
    the end of the request, so the next request reconnects."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, DATABASE_ERRORS):
            return database_unavailable_response(exception)
        return None


class RequestIdMiddleware:
    """Give every request an id: the client's `X-Request-ID` when it is a sane token, else a
    new one. It is on every log line written while the request runs (memsite.logs), in the
    headers of the tasks the request sends, and returned in `X-Request-ID`."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request_id = logs.sane_request_id(request.headers.get("X-Request-ID"))
        request.request_id = request_id  # type: ignore[attr-defined]  # our own attribute on the request
        # Not reset on the way out: Django logs 4xx/5xx answers after the middleware chain
        # returns; `request_finished` clears it (memsite.logs.clear_context).
        logs.request_id_var.set(request_id)
        response = self.get_response(request)
        response["X-Request-ID"] = request_id
        return response


def endpoint_label(request: HttpRequest) -> str:
    """The URL pattern that served the request ("/api/v1/sessions/<uuid:session_id>/"), so
    ids in paths do not become metric labels; requests no pattern matched share one label."""
    match = getattr(request, "resolver_match", None)
    if match is None:
        return UNMATCHED
    return "/" + match.route


class RequestMetricsMiddleware:
    """Time every request and hand it, by the URL pattern that served it, to the request
    observers the domain registered (memsite.metrics_hooks), and write one log line per request
    (method, pattern, path without its query string, status, duration)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.monotonic()
        response = self.get_response(request)
        seconds = time.monotonic() - started
        endpoint = endpoint_label(request)
        metrics_hooks.observe_request(
            endpoint=endpoint, method=request.method or "", status=response.status_code, seconds=seconds
        )
        request_log.info(
            "%s %s %s",
            request.method,
            request.path,
            response.status_code,
            extra={
                "method": request.method,
                "endpoint": endpoint,
                "path": request.path,
                "status": response.status_code,
                "duration_ms": round(seconds * 1000, 1),
            },
        )
        return response


# --- browser-only middleware, skipped by API calls made with a key -----------------------------


def is_api_key_request(request: HttpRequest) -> bool:
    """An API call that authenticates with a Bearer key: it has no cookie session, no CSRF token
    and no flash messages to keep, so the browser's middleware has nothing to do for it.

    A call under /api/ without a Bearer header (the Swagger UI of a logged-in user) still takes
    the whole browser path, so DRF's session authentication and its CSRF check keep working.
    """
    return request.path_info.startswith("/api/") and request.META.get("HTTP_AUTHORIZATION", "").startswith("Bearer ")


class BrowserOnly:
    """Mixin for a Django middleware that only browser requests need (one whose work is all in
    process_request/process_response): an API-key request passes straight through it."""

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_api_key_request(request):
            return self.get_response(request)  # type: ignore[attr-defined]  # the middleware's own
        return super().__call__(request)  # type: ignore[misc]  # the middleware's own


class BrowserSessionMiddleware(BrowserOnly, SessionMiddleware):
    pass


class BrowserAuthenticationMiddleware(BrowserOnly, AuthenticationMiddleware):
    pass


class BrowserMessageMiddleware(BrowserOnly, MessageMiddleware):
    pass
