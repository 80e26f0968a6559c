"""The bench's WSGI entry point: the limit floor's paths go to the plain callable, everything
else to the product's Django application, exactly as `memsite.wsgi` serves it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bench import limit_floor
from memsite.wsgi import application as django_application


def application(environ: dict[str, Any], start_response: limit_floor.StartResponse) -> Iterable[bytes]:
    if environ.get("PATH_INFO", "").startswith(limit_floor.PREFIX):
        return limit_floor.application(environ, start_response)
    return django_application(environ, start_response)
