"""What the server shows of secrets, in one place: `mask_secrets` for any text that may quote one
(log lines, and what workers store and pages show: job errors and tracebacks, raw LLM output, a
webhook receiver's answer), and `mask_url` for a URL shown to someone who may not see its tokens.

An outside server can echo what it was sent: an LLM proxy's 401 body quoting the key, a driver's
error quoting the database URL. So masking covers the values configured here, whatever the text
around them, and the shapes secrets take in free text (bearer credentials, memsite API keys,
webhook signing secrets, the user-information part of a URL).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from django.conf import settings

REDACTED = "[redacted]"

# Settings whose whole value is a secret. tests/memsite/test_masking.py fails when a setting named
# like a secret (…KEY, …SECRET, …TOKEN, …PASSWORD) is missing here.
SECRET_SETTINGS = (
    "SECRET_KEY",
    "API_KEY_HMAC_SECRET",
    "LLM_API_KEY",
    "EMBEDDINGS_API_KEY",
    "METRICS_TOKEN",
    "EMAIL_HOST_PASSWORD",
)
# Settings holding URLs of services the server logs in to: the password inside is a secret.
SERVICE_URL_SETTINGS = (
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "CELERY_RESULT_BACKEND",
    "LLM_BASE_URL",
    "EMBEDDINGS_BASE_URL",
)
# Shorter values would mask ordinary words ("sk-1" inside "task-1"); real secrets are longer.
MIN_SECRET_LENGTH = 8

_CREDENTIAL = r"[A-Za-z0-9._~+/=-]{8,}"
# Secret-looking substrings of free text: an Authorization value ("Bearer …" always; "Basic …" and
# "Token …" only when the value looks random, with a digit or a case change, so that "token
# accounting" or "basic understanding" in an LLM's answer stay readable), memsite API keys
# (msk_…) and webhook signing secrets (whsec_…; the hint shown for one, "whsec_" and 5 characters,
# is too short to match).
_SECRET_TEXT = re.compile(
    rf"\b(?:((?i:bearer))\s+{_CREDENTIAL}"
    rf"|((?i:basic|token))\s+(?=\S*?(?:[0-9]|[a-z][A-Z]|[A-Z][a-z]*[A-Z])){_CREDENTIAL}"
    r"|(?:msk|whsec)_[A-Za-z0-9_-]{8,})"
)
# The user-information part of a URL ("scheme://user:password@"), up to the last "@" before the
# path: a password may itself hold an "@" and URL parsers still accept it. The scheme's length is
# bounded, else a long run like "a.a.a.a..." in a printed variable takes quadratic time.
_URL_USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]{0,31}://)[^\s/]+@", re.IGNORECASE)


def mask_url_credentials(text: str, *, mask: str = REDACTED) -> str:
    """`text` with the user and password of every URL in it replaced by `mask`."""
    return _URL_USERINFO.sub(rf"\1{mask}@", text)


def _url_passwords(url: str) -> Iterable[str]:
    """The password of `url` as written and percent-decoded (a driver may quote either); a broker
    setting can list several URLs separated by ";"."""
    for one in url.split(";"):
        try:
            password = urlsplit(one.strip()).password
        except ValueError:
            continue
        if password:
            yield password
            yield unquote(password)


@lru_cache(maxsize=16)
def _secrets_among(values: tuple[str, ...], urls: tuple[str, ...]) -> tuple[str, ...]:
    """The secrets to mask, longest first (so one holding another is masked whole)."""
    found = set(values)
    for url in urls:
        found.update(_url_passwords(url))
    return tuple(sorted((s for s in found if len(s) >= MIN_SECRET_LENGTH), key=len, reverse=True))


def configured_secrets() -> tuple[str, ...]:
    """Every secret of this deployment's configuration, read at each call (so a changed setting,
    or a test's override, applies at once; the derivation is cached per configuration)."""
    values = [str(getattr(settings, name, "") or "") for name in SECRET_SETTINGS]
    values += [str(key) for key in getattr(settings, "SECRET_KEY_FALLBACKS", ()) or ()]
    values += [str(db.get("PASSWORD") or "") for db in getattr(settings, "DATABASES", {}).values()]
    urls = tuple(str(getattr(settings, name, "") or "") for name in SERVICE_URL_SETTINGS)
    return _secrets_among(tuple(values), urls)


def mask_secrets(text: str) -> str:
    """`text` with every configured secret, every URL's credentials and every secret-shaped
    substring replaced by REDACTED: the one function logs, stored worker output and the pages and
    API answers that show it go through."""
    for secret in configured_secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _SECRET_TEXT.sub(_mask_match, mask_url_credentials(text))


def mask_secrets_in(value: Any) -> Any:
    """`value` with mask_secrets applied to every text in it, at any depth of a JSON value."""
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, dict):
        return {key: mask_secrets_in(item) for key, item in value.items()}
    if isinstance(value, list):
        return [mask_secrets_in(item) for item in value]
    return value


def _mask_match(match: re.Match[str]) -> str:
    keyword = match.group(1) or match.group(2)
    return f"{keyword} {REDACTED}" if keyword else REDACTED


def mask_url(url: str) -> str:
    """`url` as someone who may not see its tokens is shown it: scheme, host, port and path kept;
    the user-information, each query value (a bare query item whole) and any fragment masked. A
    URL that cannot be parsed is masked whole."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return REDACTED
    if ":" in host:
        host = f"[{host}]"  # an IPv6 address, bracketed again
    netloc = f"{REDACTED}@" if "@" in parts.netloc else ""
    netloc += host + (f":{port}" if port is not None else "")
    query = "&".join(_masked_query_item(item) for item in parts.query.split("&")) if parts.query else ""
    fragment = REDACTED if parts.fragment else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))


def _masked_query_item(item: str) -> str:
    name, equals, _ = item.partition("=")
    return f"{name}={REDACTED}" if equals else REDACTED
