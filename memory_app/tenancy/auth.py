"""Bearer API keys: a prefix lookup plus a keyed digest, no slow password hasher.

Keys are 256-bit random secrets, so a fast HMAC is as safe as a slow hash (there is no
dictionary to attack) and keeps authentication at one indexed query per request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

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


def find_active_key(raw_key: str) -> ApiKey | None:
    if not raw_key.startswith(f"{KEY_SCHEME}_") or len(raw_key) <= PREFIX_LENGTH:
        return None
    api_key = ApiKey.objects.select_related("team").filter(prefix=key_prefix(raw_key), revoked_at__isnull=True).first()
    if api_key is None or not hmac.compare_digest(api_key.digest, key_digest(raw_key)):
        return None
    return api_key


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
