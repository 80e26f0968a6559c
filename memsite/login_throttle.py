"""Throttling of failed logins, for the dashboard's login page and the admin's alike.

Two counts live in Django's cache (Redis when REDIS_URL is set, else files under var/), so every
web process shares them: failures per username from one client address, and failures per
address. A count is forgotten once LOGIN_LOCKOUT_SECONDS pass without a failure. Once either
reaches its limit, a login POST from that address (for that username, or for any) is answered
429 with Retry-After for LOGIN_LOCKOUT_SECONDS, without checking the password. A successful
login clears its username's count. When the cache cannot be reached, logins go through
unthrottled, with a warning: a broken cache must not lock everyone out.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.models import AnonymousUser
from django.core.cache import cache
from django.http import HttpRequest, HttpResponseBase, HttpResponseRedirect

log = logging.getLogger(__name__)

# The throttled view answers with the kind of response the login view does: HttpResponse for the
# admin site's login, HttpResponseBase for a class-based view's as_view().
ResponseT = TypeVar("ResponseT", bound=HttpResponseBase)
ViewFunction = Callable[..., ResponseT]


@dataclass(frozen=True)
class FailureCount:
    """One count of failed logins in the cache, and the limit that locks it."""

    key: str
    limit: int
    of_what: str  # for the log line of a lock

    @property
    def lock_key(self) -> str:
        return f"{self.key}-locked-until"


class LoginCounts(NamedTuple):
    """The two counts a login POST adds to."""

    username: FailureCount  # its username, from its address
    address: FailureCount  # its address, whatever the username


def failure_counts(request: HttpRequest) -> LoginCounts:
    address = client_address(request)
    username = request.POST.get("username", "").strip().casefold()
    return LoginCounts(
        username=FailureCount(
            f"memsite-login-failures-user-{_digest(username, address)}",
            settings.LOGIN_MAX_FAILURES,
            f"for one username from {address}",
        ),
        address=FailureCount(
            f"memsite-login-failures-address-{_digest(address)}",
            settings.LOGIN_MAX_FAILURES_PER_IP,
            f"from {address}",
        ),
    )


def client_address(request: HttpRequest) -> str:
    # REMOTE_ADDR only: X-Forwarded-For is whatever the client wants it to be.
    return request.META.get("REMOTE_ADDR", "")


def _digest(*parts: str) -> str:
    # Usernames are free text: hashed, a cache key has no spaces, control characters or length issues.
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def seconds_locked(counts: Iterable[FailureCount]) -> int:
    """How long the longest lock on these counts still lasts; 0 when none holds."""
    try:
        locked_until = cache.get_many([count.lock_key for count in counts]).values()
    except Exception as exc:  # each cache backend raises its own errors (redis-py's, OSError...)
        log.warning("login not throttled, the cache cannot be read: %s: %s", type(exc).__name__, exc)
        return 0
    now = time.time()
    return max([0, *(math.ceil(until - now) for until in locked_until)])


def record_failure(counts: Iterable[FailureCount]) -> None:
    window = settings.LOGIN_LOCKOUT_SECONDS
    try:
        for count in counts:
            if _increment(count.key, window) >= count.limit:
                cache.set(count.lock_key, time.time() + window, timeout=window)
                log.warning("logins refused for %d s: %d failed logins %s", window, count.limit, count.of_what)
    except Exception as exc:  # see seconds_locked
        log.warning("failed login not counted, the cache cannot be written: %s: %s", type(exc).__name__, exc)


def _increment(key: str, window: int) -> int:
    """Add one failure to the count at `key`, and keep the count for `window` seconds more."""
    cache.add(key, 0, timeout=window)
    try:
        count = cache.incr(key)  # atomic in Redis: concurrent guesses are all counted
    except ValueError:  # the count expired between add and incr
        count = 1
        cache.set(key, count, timeout=window)
    # The file cache's incr rewrites the entry with the default timeout; set the real one again.
    cache.touch(key, timeout=window)
    return count


def forget_failures(count: FailureCount) -> None:
    try:
        cache.delete(count.key)
    except Exception as exc:  # see seconds_locked
        log.warning("failed logins not cleared, the cache cannot be written: %s: %s", type(exc).__name__, exc)


def throttle_failed_logins(login_view: ViewFunction[ResponseT]) -> ViewFunction[ResponseT]:
    """`login_view`, with its failed POSTs counted and refused (429) over the limits."""

    @functools.wraps(login_view)
    def throttled_login_view(request: HttpRequest, *args: object, **kwargs: object) -> ResponseT:
        if request.method != "POST":
            return login_view(request, *args, **kwargs)
        counts = failure_counts(request)
        wait = seconds_locked(counts)
        if wait > 0:
            return refusal(login_view, request, wait, *args, **kwargs)
        response = login_view(request, *args, **kwargs)
        # A login view answers a valid login with a redirect, and anything else with the form again.
        if isinstance(response, HttpResponseRedirect):
            forget_failures(counts.username)
        else:
            record_failure(counts)
        return response

    return throttled_login_view


def refusal(
    login_view: ViewFunction[ResponseT], request: HttpRequest, wait: int, *args: object, **kwargs: object
) -> ResponseT:
    """The login page with its empty form and a message, as 429: the view renders the same
    template it would for a visitor's GET, so the admin keeps its look and the dashboard its own."""
    messages.error(request, f"Too many failed logins. Try again in {_minutes(wait)}.")
    form_request = copy.copy(request)  # the original still says POST to the middleware that logs it
    form_request.method = "GET"
    form_request.user = AnonymousUser()  # else the admin redirects a logged-in staff member instead
    response = login_view(form_request, *args, **kwargs)
    response.status_code = 429
    response["Retry-After"] = str(wait)
    return response


def _minutes(seconds: int) -> str:
    minutes = math.ceil(seconds / 60)
    return "1 minute" if minutes == 1 else f"{minutes} minutes"
