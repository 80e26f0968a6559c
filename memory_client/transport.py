"""HTTP to the memsite API: explicit timeouts, error mapping, and retries only where they are safe.

Retry policy (why each case is safe):
- Any request whose connection could not be opened (connect error/timeout, pool timeout) is
  retried: the server never saw it.
- GETs, and POSTs of messages, are also retried after a timeout, a dropped connection, 429
  and 5xx: a GET changes nothing, and every message the client sends carries a client-chosen
  `message_id`, so the server answers a repeated append with the stored messages (200)
  instead of storing them twice.
- Writes sent with an `Idempotency-Key` (message appends and session creation: one new
  uuid4 per logical write, the same key on every retry of it) are retried like GETs: the
  server stores each keyed write's answer in the write's own transaction and replays it
  for a repeat, so a write whose response was lost (a dropped connection, a 503 while the
  database restarted) happens exactly once.
- PATCH, DELETE and reset are NOT retried once the request may have reached the server.
  A DELETE that succeeded but lost its response would come back 404 and report "not
  found"; a PATCH could overwrite what another agent wrote in between. Their outcome is
  unknown, and the caller gets the error to decide.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
import uuid
from typing import Any

import httpx

from memory_client.errors import ApiError, AuthenticationError, ConflictError, MessageError, NotFoundError

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
DEFAULT_RETRIES = 2
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_BACKOFF_SECONDS = 0.25
_MAX_RETRY_AFTER = 10.0
IDEMPOTENCY_HEADER = "Idempotency-Key"


def new_idempotency_key() -> str:
    """A fresh key for one logical write; reuse it for every retry of that write."""
    return str(uuid.uuid4())


def _error_from(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):  # a proxy's HTML page, or Django's own 404 for a malformed URL
        body = {"detail": response.text[:200] or response.reason_phrase}
    kind = {401: AuthenticationError, 403: AuthenticationError, 404: NotFoundError, 409: ConflictError}.get(
        response.status_code, ApiError
    )
    return kind(
        str(body.get("detail", "")),
        status_code=response.status_code,
        error=str(body.get("error", "")),
        fields=body.get("fields") or {},
    )


def _delay(attempt: int, response: httpx.Response | None) -> float:
    retry_after = response.headers.get("Retry-After") if response is not None else None
    if retry_after and retry_after.replace(".", "", 1).isdigit():
        return min(float(retry_after), _MAX_RETRY_AFTER)
    # Jitter spreads the retries of many agents hitting the same hiccup; not security-relevant.
    return min(_BACKOFF_SECONDS * 2**attempt * (1 + random.random()), _MAX_RETRY_AFTER)  # noqa: S311


class HttpApi:
    """One authenticated httpx.Client for the /api/v1/ root."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_RETRIES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        base_url = base_url or os.environ.get("MEMSITE_URL")
        api_key = api_key or os.environ.get("MEMSITE_API_KEY")
        if not base_url:
            raise ValueError("No server URL: pass base_url= or set MEMSITE_URL (e.g. http://127.0.0.1:8000).")
        if not api_key:
            raise ValueError("No API key: pass api_key= or set MEMSITE_API_KEY.")
        root = base_url.rstrip("/")
        if not root.endswith("/api/v1"):
            root += "/api/v1"
        self.max_retries = max_retries
        self._client = httpx.Client(
            base_url=root + "/",
            headers={"Authorization": f"Bearer {api_key}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._client.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: dict[str, Any] | None = None,
        idempotent: bool = False,
        idempotency_key: str | None = None,
        expect: tuple[int, ...] = (200, 201, 204),
    ) -> httpx.Response:
        """Send one request; return the response if its status is in `expect`, else raise ApiError.

        With `idempotency_key` (see new_idempotency_key) the request carries that
        Idempotency-Key header on every attempt and is retried like an idempotent one.
        """
        content = None
        headers = {}
        if idempotency_key is not None:
            headers[IDEMPOTENCY_HEADER] = idempotency_key
            idempotent = True
        if json_body is not None:
            try:
                content = json.dumps(json_body, ensure_ascii=False, allow_nan=False).encode()
            except (TypeError, ValueError) as exc:
                raise MessageError(f"Not JSON-serializable: {exc}") from exc
            headers["Content-Type"] = "application/json"
        attempt = 0
        while True:
            response: httpx.Response | None = None
            try:
                response = self._client.request(method, path, content=content, params=params, headers=headers)
            except _NEVER_SENT as exc:
                if attempt >= self.max_retries:
                    raise ApiError(f"{method} {path}: {exc!r}", status_code=None, error="unreachable") from exc
            except httpx.TransportError as exc:
                if not idempotent or attempt >= self.max_retries:
                    raise ApiError(f"{method} {path}: {exc!r}", status_code=None, error="transport") from exc
            else:
                if response.status_code in expect:
                    return response
                if not idempotent or response.status_code not in _RETRY_STATUSES or attempt >= self.max_retries:
                    raise _error_from(response)
            delay = _delay(attempt, response)
            logger.warning("memsite %s %s failed (attempt %d); retrying in %.2fs", method, path, attempt + 1, delay)
            time.sleep(delay)
            attempt += 1

    def get(self, path: str, **params: Any) -> Any:
        query = {key: value for key, value in params.items() if value is not None}
        return self.request("GET", path, params=query, idempotent=True).json()
