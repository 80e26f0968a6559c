"""The API side of Idempotency-Key (memory_app.idempotency.services): wrap a write view's body."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.idempotency import services as idempotency
from memory_app.tenancy.models import Team

REPLAYED_HEADER = "Idempotent-Replayed"
KEY_PARAMETER = OpenApiParameter(
    name=idempotency.HEADER,
    type=str,
    location=OpenApiParameter.HEADER,
    required=False,
    description="Any unique string (a UUID): re-sending the write with the same key replays the first answer.",
)


def _replay(stored: idempotency.StoredResponse) -> Response:
    return Response(stored.body, status=stored.status_code, headers={REPLAYED_HEADER: "true"})


def idempotent_write(
    request: Request,
    *,
    team: Team,
    write: Callable[[], Response],
    session_of: Callable[[Response], Any],
) -> Response:
    """Run `write()`; with an Idempotency-Key header, at most once per team and key.

    The answer of a successful write is stored in the write's transaction (`session_of`
    names the session it belongs to, so deleting the session deletes the copy); a repeat
    gets it back with `Idempotent-Replayed: true`. Errors are not stored: a repeat of a
    refused request is simply tried again.
    """
    raw_key = request.headers.get(idempotency.HEADER)
    if raw_key is None:
        return write()
    key = idempotency.validate_key(raw_key)
    assert request.method is not None  # None only on an HttpRequest built by hand, never in a view
    fingerprint = idempotency.request_fingerprint(method=request.method, path=request.path, data=request.data)
    stored = idempotency.idempotency_lookup(team=team, key=key, fingerprint=fingerprint)
    if stored is not None:
        return _replay(stored)
    try:
        with transaction.atomic():
            response = write()
            if 200 <= response.status_code < 300:
                idempotency.idempotency_record(
                    team=team,
                    key=key,
                    fingerprint=fingerprint,
                    session_id=session_of(response),
                    status_code=response.status_code,
                    body=response.data,
                )
    except IntegrityError:
        # A concurrent request with the same key committed first: ours rolled back whole.
        stored = idempotency.idempotency_lookup(team=team, key=key, fingerprint=fingerprint)
        if stored is None:
            raise
        return _replay(stored)
    return response
