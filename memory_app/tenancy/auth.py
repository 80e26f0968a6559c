"""Bearer API keys: a prefix lookup plus a keyed digest, no slow password hasher.

Keys are 256-bit random secrets, so a fast HMAC is as safe as a slow hash (there is no
dictionary to attack) and keeps authentication at one indexed query per request.

Agents send the same key on every turn, so each process remembers a key it has verified, with
its team, for at most `API_KEY_CACHE_SECONDS` (MEMSITE_API_KEY_CACHE_SECONDS, default 5): a
request with a remembered key costs an HMAC and a dictionary lookup instead of a query. That
time is the documented bound on revocation: the process that revokes a key (or changes a key
or a team) forgets it at once, every other process within the bound (docs/scaling.md). Misses
are never remembered, so a new key works everywhere at once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Any

from django.conf import settings
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from memory_app.tenancy.models import ApiKey

KEY_SCHEME = "msk"
PREFIX_LENGTH = len(KEY_SCHEME) + 1 + 8  # "msk_" + 8 random characters


def generate_key() -> str:
    return f"{KEY_SCHEME}_{secrets.token_urlsafe(6)[:8]}{secrets.token_urlsafe(32)}"


def key_prefix(key: str) -> str:
    return key[:PREFIX_LENGTH]


def key_digest(key: str) -> str:
    return hmac.new(settings.API_KEY_HMAC_SECRET.encode(), key.encode(), hashlib.sha256).hexdigest()


# digest of the raw key -> (monotonic time it expires, the verified key with its team).
# Keyed by the full digest, so a hit is itself the digest check.
_verified_keys: dict[str, tuple[float, ApiKey]] = {}
# Keys one process sees are few (its agents'); past this many, expired entries go first.
VERIFIED_KEYS_MAX = 10_000


def find_active_key(raw_key: str) -> ApiKey | None:
    if not raw_key.startswith(f"{KEY_SCHEME}_") or len(raw_key) <= PREFIX_LENGTH:
        return None
    digest = key_digest(raw_key)
    now = time.monotonic()
    remembered = _verified_keys.get(digest)
    if remembered is not None and remembered[0] > now:
        return remembered[1]
    api_key = ApiKey.objects.select_related("team").filter(prefix=key_prefix(raw_key), revoked_at__isnull=True).first()
    if api_key is None or not hmac.compare_digest(api_key.digest, digest):
        _verified_keys.pop(digest, None)
        return None
    _remember(digest, api_key, now)
    return api_key


def _remember(digest: str, api_key: ApiKey, now: float) -> None:
    seconds = settings.API_KEY_CACHE_SECONDS
    if seconds <= 0:
        return
    if len(_verified_keys) >= VERIFIED_KEYS_MAX:
        # A copy: another thread of a threaded server may add a key meanwhile.
        for stale in [d for d, (expires, _) in list(_verified_keys.items()) if expires <= now]:
            _verified_keys.pop(stale, None)
        if len(_verified_keys) >= VERIFIED_KEYS_MAX:
            _verified_keys.clear()
    _verified_keys[digest] = (now + seconds, api_key)


def forget_keys(*, key_id: int | None = None, team_id: int | None = None) -> None:
    """Drop this process's remembered keys: one key, a team's keys, or (no argument) all of them."""
    if key_id is None and team_id is None:
        _verified_keys.clear()
        return
    for digest, (_, api_key) in list(_verified_keys.items()):
        if api_key.pk == key_id or api_key.team_id == team_id:
            _verified_keys.pop(digest, None)


def forget_saved_key(sender: type[ApiKey], instance: ApiKey, **kwargs: Any) -> None:
    """post_save/post_delete of a key: revoked, renamed or re-roled here takes effect here at once."""
    forget_keys(key_id=instance.pk)


def forget_saved_team(sender: type[Any], instance: Any, **kwargs: Any) -> None:
    """post_save/post_delete of a team: its remembered keys carry the team row, so they go too."""
    forget_keys(team_id=instance.pk)


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <key>`; request.auth is the ApiKey, request.user stays anonymous."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[None, ApiKey] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, raw_key = header.partition(" ")
        if scheme.lower() != self.keyword.lower() or not raw_key.strip():
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <key>'.")
        api_key = find_active_key(raw_key.strip())
        if api_key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return (None, api_key)

    def authenticate_header(self, request: Request) -> str:
        return self.keyword
