"""Per-key rate limit of the endpoints that cause LLM work (issue 7, cost control).

DRF's throttle keeps each key's request times in Django's cache: Redis when REDIS_URL is
set, else a file cache under var/ (see CACHES), so every web worker process sees the same
history. The key's prefix identifies it: unique, and not a secret.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from memory_app.models import ApiKey

if TYPE_CHECKING:
    from rest_framework.views import APIView


class LLMEndpointThrottle(SimpleRateThrottle):
    """`MEMSITE_LLM_RATE_LIMIT` requests per key; over it: 429 with Retry-After."""

    scope = "llm"
    cache_format = "memsite-throttle-%(scope)s-%(ident)s"

    def get_rate(self) -> str:
        return settings.LLM_RATE_LIMIT

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        api_key = request.auth
        if not isinstance(api_key, ApiKey):
            return None  # unauthenticated requests are refused before any LLM work
        return self.cache_format % {"scope": self.scope, "ident": api_key.prefix}
