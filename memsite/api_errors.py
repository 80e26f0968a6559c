"""The one DRF exception handler: every API error is JSON of one shape.

    {"error": "<code>", "detail": "<human sentence>", "fields": {"messages[0].role": ["..."]}}

`fields` maps a dotted/indexed path to the problems found there, so a client can tell
exactly which field of which message was refused.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from memory_client.vocabulary.wire import ErrorBody
from memsite.errors import (
    BudgetExceeded,
    Conflict,
    DomainError,
    IdempotencyKeyReused,
    InvalidInput,
    LLMFailed,
    LLMUnavailable,
    MessageIdReused,
    NotFound,
    NotRecordedYet,
    PayloadTooLarge,
    RetryLater,
    StreamsUnavailable,
    TooManyStreams,
)
from memsite.middleware import DATABASE_ERRORS, database_unavailable_body

_DOMAIN_STATUS: dict[type[DomainError], int] = {
    InvalidInput: status.HTTP_400_BAD_REQUEST,
    NotFound: status.HTTP_404_NOT_FOUND,
    NotRecordedYet: status.HTTP_404_NOT_FOUND,
    Conflict: status.HTTP_409_CONFLICT,
    IdempotencyKeyReused: status.HTTP_422_UNPROCESSABLE_ENTITY,
    MessageIdReused: status.HTTP_422_UNPROCESSABLE_ENTITY,
    LLMFailed: status.HTTP_502_BAD_GATEWAY,
    LLMUnavailable: status.HTTP_503_SERVICE_UNAVAILABLE,
    BudgetExceeded: status.HTTP_429_TOO_MANY_REQUESTS,
    TooManyStreams: status.HTTP_429_TOO_MANY_REQUESTS,
    StreamsUnavailable: status.HTTP_503_SERVICE_UNAVAILABLE,
    PayloadTooLarge: status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
}


def flatten_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """Turn DRF's nested error structure into {"a.b[2].c": ["msg", ...]}."""
    if isinstance(detail, dict):
        flat: dict[str, list[str]] = {}
        for key, value in detail.items():
            if key == "non_field_errors":
                path = prefix or "non_field_errors"
            elif isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
                path = f"{prefix}[{key}]"  # DRF reports list items by index
            else:
                path = f"{prefix}.{key}" if prefix else str(key)
            for sub_path, messages in flatten_errors(value, path).items():
                flat.setdefault(sub_path, []).extend(messages)
        return flat
    if isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            return {prefix or "non_field_errors": [str(item) for item in detail]}
        flat = {}
        for index, item in enumerate(detail):
            if not item:
                continue
            for sub_path, messages in flatten_errors(item, f"{prefix}[{index}]").items():
                flat.setdefault(sub_path, []).extend(messages)
        return flat
    return {prefix or "non_field_errors": [str(detail)]}


def error_body(code: str, detail: str, fields: dict[str, list[str]] | None = None) -> ErrorBody:
    """The API's one error shape; MCP tool errors carry the same (memory_app.mcp)."""
    return {"error": code, "detail": detail, "fields": fields or {}}


def validation_error_body(fields: dict[str, list[str]]) -> ErrorBody:
    return error_body("validation_error", _summary(fields) if fields else "Invalid input.", fields)


def _summary(fields: dict[str, list[str]]) -> str:
    first_path, messages = next(iter(fields.items()))
    more = f" (and {len(fields) - 1} more)" if len(fields) > 1 else ""
    return f"{first_path}: {messages[0]}{more}"


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = _error_response(exc, context)
    request = context.get("request")
    if response is not None and request is not None:
        # Errors are JSON even where the view negotiated YAML or text (?format=yaml, ?format=text).
        request.accepted_renderer = JSONRenderer()
        request.accepted_media_type = JSONRenderer.media_type
    return response


def _error_response(exc: Exception, context: dict[str, Any]) -> Response | None:
    response: Response | None
    if isinstance(exc, DomainError):
        response = Response(error_body(exc.code, exc.detail, exc.fields), status=_DOMAIN_STATUS.get(type(exc), 400))
        if isinstance(exc, RetryLater):
            response["Retry-After"] = str(int(exc.retry_after))
        return response
    if isinstance(exc, DATABASE_ERRORS):
        return Response(
            database_unavailable_body(exc),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(settings.DB_UNAVAILABLE_RETRY_AFTER)},
        )
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body("payload_too_large", str(exc)), status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()

    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = flatten_errors(exc.detail)
        response.data = validation_error_body(fields)
        return response
    if isinstance(exc, exceptions.ParseError):
        response.data = error_body("parse_error", str(exc.detail))
        return response
    if isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        response.data = error_body(str(code), str(exc.detail))
    return response


# Django's own error views, for errors raised before or outside a DRF view (a URL whose id does
# not match its converter, a crash in middleware): JSON of the same shape under /api/, HTML elsewhere.
API_PREFIX = "/api/"


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        return JsonResponse(error_body("not_found", "Not found."), status=status.HTTP_404_NOT_FOUND)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        body = error_body("server_error", "The server failed to answer; the error is logged.")
        return JsonResponse(body, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    return defaults.server_error(request)
