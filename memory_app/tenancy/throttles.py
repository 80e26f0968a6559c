"""Per-key rate limit of the endpoints that cause LLM work (cost control).

DRF's throttle keeps each key's request times in Django's cache: Redis when REDIS_URL is
set, else a file cache under var/ (see CACHES), so every web worker process sees the same
history. The key's prefix identifies it: unique, and not a secret.

When the cache cannot be reached (Redis down), the throttle lets the request through and logs
a warning: a write never fails because the broker's Redis is down, and the team's daily LLM
token budget, kept in the database, still bounds what the unthrottled requests can spend.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from django.conf import settings
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from memory_app.tenancy.models import ApiKey

if TYPE_CHECKING:
    from rest_framework.views import APIView

log = logging.getLogger(__name__)


class LLMEndpointThrottle(SimpleRateThrottle):
    """`MEMSITE_LLM_RATE_LIMIT` requests per key; over it: 429 with Retry-After."""

    scope = "llm"
    cache_format = "memsite-throttle-%(scope)s-%(ident)s"

    def get_rate(self) -> str:
        return settings.LLM_RATE_LIMIT

    def allow_request(self, request: Request, view: APIView) -> bool:
        try:
            return super().allow_request(request, view)
        except (RedisError, OSError) as exc:  # Redis unreachable, or the file cache's folder unusable
            log.warning("rate limit not applied, the cache is unreachable: %s: %s", type(exc).__name__, exc)
            return True

    def get_cache_key(self, request: Request, view: APIView) -> str | None:
        api_key = request.auth
        if not isinstance(api_key, ApiKey):
            return None  # unauthenticated requests are refused before any LLM work
        return self.cache_format % {"scope": self.scope, "ident": api_key.prefix}
