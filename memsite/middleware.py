"""Reject oversize request bodies before anything reads them."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse


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


def too_large_response() -> JsonResponse:
    return JsonResponse(
        {
            "error": "payload_too_large",
            "detail": f"Request body exceeds the limit of {settings.MAX_BODY_BYTES} bytes.",
            "fields": {},
        },
        status=413,
    )
