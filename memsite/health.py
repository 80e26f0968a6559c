"""GET /healthz: is the database reachable, is the broker reachable. No auth, no secrets."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from memsite.celery import app as celery_app


def _database_ok() -> tuple[bool, str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "not reachable"
        return False, type(exc).__name__
    return True, connection.vendor


def _broker_ok() -> tuple[bool, str]:
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(
                max_retries=1,
                timeout=settings.BROKER_HEALTH_TIMEOUT,  # type: ignore[arg-type]  # kombu takes float seconds too
            )
            transport = conn.transport_cls
    except Exception as exc:  # connection refused, DNS, timeout...
        return False, type(exc).__name__
    return True, str(transport)


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    db_ok, db_info = _database_ok()
    broker_ok, broker_info = _broker_ok()
    healthy = db_ok and broker_ok
    return JsonResponse(
        {
            "status": "ok" if healthy else "degraded",
            "database": {"ok": db_ok, "info": db_info},
            "broker": {"ok": broker_ok, "info": broker_info},
        },
        status=200 if healthy else 503,
    )
