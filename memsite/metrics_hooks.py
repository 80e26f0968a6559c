"""Where the domain plugs its metrics into the project: the request middleware reports every
request to the observers registered here, and /metrics serves the exposition registered here.

The domain registers both from its AppConfig.ready(), so the project package needs no import of
domain code (its URLconf aside) to count requests or to answer a scrape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from django.core.exceptions import ImproperlyConfigured


class RequestObserver(Protocol):
    def __call__(self, *, endpoint: str, method: str, status: int, seconds: float) -> None: ...


# Renders a whole scrape answer: the body and its content type.
Exposition = Callable[[], tuple[bytes, str]]


@dataclass
class _Registered:
    request_observers: list[RequestObserver] = field(default_factory=list)
    exposition: Exposition | None = None


_registered = _Registered()


def add_request_observer(observer: RequestObserver) -> None:
    """Report every request to `observer`; adding the same one again (a second ready()) changes nothing."""
    if observer not in _registered.request_observers:
        _registered.request_observers.append(observer)


def set_exposition(exposition: Exposition) -> None:
    _registered.exposition = exposition


def observe_request(*, endpoint: str, method: str, status: int, seconds: float) -> None:
    for observer in _registered.request_observers:
        observer(endpoint=endpoint, method=method, status=status, seconds=seconds)


def render_exposition() -> tuple[bytes, str]:
    if _registered.exposition is None:
        # Only a broken start-up gets here: the domain's AppConfig always registers one.
        raise ImproperlyConfigured("No metrics exposition is registered (memory_app's AppConfig.ready() sets it).")
    return _registered.exposition()
