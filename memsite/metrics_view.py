"""GET /metrics: the Prometheus exposition, for staff sessions or the scrape token only."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from memory_client.vocabulary.wire import ErrorBody
from memsite import metrics_hooks


def _error(status: int, error: str, detail: str) -> JsonResponse:
    body: ErrorBody = {"error": error, "detail": detail, "fields": {}}
    response = JsonResponse(body, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


def _bearer(request: HttpRequest) -> str | None:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    token = _bearer(request)
    if token is not None:
        expected = settings.METRICS_TOKEN
        # compare_digest keeps the comparison's time independent of how much of the token matches.
        if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
            return _error(403, "permission_denied", "The metrics token is not valid.")
    elif not request.user.is_authenticated:
        return _error(401, "not_authenticated", "Send the metrics token as a Bearer credential or log in as staff.")
    elif not request.user.is_staff:
        return _error(403, "permission_denied", "Only staff may read the metrics.")
    body, content_type = metrics_hooks.render_exposition()
    return HttpResponse(body, content_type=content_type)
