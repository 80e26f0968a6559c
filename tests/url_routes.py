"""Every route of the URL resolver, with a concrete path a test can request.

One walker for the tests that must cover every route (tenant isolation, deny by default,
key roles): a route added to any urls.py shows up here, so those tests fail until they
classify it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.resolvers import RegexPattern, RoutePattern

# Plausible values per URL kwarg: a well-formed value gets past the converters (and URL
# regexes), so the request reaches the view and its own checks.
SAMPLE_KWARGS: dict[str, str] = {
    "session_id": "5f0e3f34-7a52-4a8c-9a39-6d1b1e2f0a11",
    "message_id": "0b8d4c8e-2f4e-4a3b-8f0e-7c2d9a1b3c44",
    "run_id": "1c7e2a90-3b5d-4f6e-8a9b-0c1d2e3f4a55",
    "fact_id": "2d8f3b01-4c6e-4a7f-9b0c-1d2e3f4a5b66",
    "extraction_id": "3e9a4c12-5d7f-4b80-8c1d-2e3f4a5b6c77",
    "selection_id": "4fab5d23-6e80-4c91-9d2e-3f4a5b6c7d88",
    "log_id": "5abc6e34-7f91-4da2-8e3f-4a5b6c7d8e99",
    "job_id": "6bcd7f45-80a2-4eb3-9f4a-5b6c7d8e9faa",
    "exp_id": "some-experience",
    "agent": "developer",
    "attempt_id": "attempt-001",
    "round_id": "round-1",
    "kind": "compaction",
    "webhook_id": "7cde8056-91b3-4fc4-8a5b-6c7d8e9fabbb",
    "delivery_id": "8def9167-a2c4-40d5-9b6c-7d8e9fabccc0",
    "serve_id": "1",  # a served context (the usage ledger's ContextServe)
    "context_id": "0190f5a2-7b3c-7d4e-8f5a-6b7c8d9e0f11",  # a served context, as its answer names it
    "file_id": "1",  # a memory file (its dashboard page)
    # admin
    "object_id": "1",
    "content_type_id": "1",
    "app_label": "memory_app",
    "url": "nowhere/",
    "id": "1",
}
_CONVERTER = re.compile(r"<(?:(?P<converter>\w+):)?(?P<name>\w+)>")
_GROUP = re.compile(r"\(\?P<(?P<name>\w+)>(?P<body>[^()]*)\)")
_LITERAL_ALTERNATIVE = re.compile(r"^[\w-]+(?:\|[\w-]+)*$")


@dataclass(frozen=True)
class Route:
    name: str  # the namespaced name ("dashboard:session", "admin:index"), or the pattern if unnamed
    pattern: str  # the full pattern as written, e.g. "api/v1/sessions/<uuid:session_id>/"
    path: str  # a concrete path with SAMPLE_KWARGS filled in, e.g. "/api/v1/sessions/5f0e.../"
    callback: Callable[..., Any]

    @property
    def view_class(self) -> type | None:
        return getattr(self.callback, "cls", None) or getattr(self.callback, "view_class", None)

    @property
    def is_api(self) -> bool:
        """Answered to API keys, never to a browser session: the REST API and the MCP endpoint."""
        return self.pattern.startswith(("api/", "mcp"))


def _sample(name: str) -> str:
    if name not in SAMPLE_KWARGS:
        raise KeyError(f"tests/url_routes.py: add a sample value for the URL kwarg {name!r}")
    return SAMPLE_KWARGS[name]


def _fill_route(part: str, values: dict[str, str]) -> str:
    return _CONVERTER.sub(lambda m: values.get(m.group("name")) or _sample(m.group("name")), part)


def _fill_regex(part: str, values: dict[str, str]) -> str:
    def group(match: re.Match[str]) -> str:
        name, body = match.group("name"), match.group("body")
        if name in values:
            return values[name]
        if _LITERAL_ALTERNATIVE.match(body):  # the admin's "(?P<app_label>auth|memory_app|...)"
            return body.split("|")[0]
        return _sample(name)

    return _GROUP.sub(group, part).lstrip("^").rstrip("$").replace("\\", "")


def _fill(part: Any, values: dict[str, str]) -> str:
    if isinstance(part, RoutePattern):
        return _fill_route(str(part), values)
    if isinstance(part, RegexPattern):
        return _fill_regex(str(part), values)
    raise TypeError(f"unknown URL pattern type {type(part).__name__}")


def _walk(
    patterns: Iterable[URLPattern | URLResolver], prefix: str, path: str, namespace: str, values: dict[str, str]
) -> Iterable[Route]:
    for pattern in patterns:
        written = prefix + str(pattern.pattern)
        filled = path + _fill(pattern.pattern, values)
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from _walk(pattern.url_patterns, written, filled, inner, values)
        elif isinstance(pattern, URLPattern):
            name = f"{namespace}{pattern.name}" if pattern.name else written
            yield Route(name=name, pattern=written, path="/" + filled, callback=pattern.callback)


def all_routes(**values: str) -> list[Route]:
    """Every route, in resolver order; `values` override SAMPLE_KWARGS (e.g. a real session id)."""
    return list(_walk(get_resolver().url_patterns, "", "", "", values))


def api_routes() -> dict[str, str]:
    """{name: "api/v1/..." pattern} for every named route under api/v1/."""
    return {route.name: route.pattern for route in all_routes() if route.pattern.startswith("api/v1/")}


def resolves_to_itself(route: Route) -> bool:
    """The sample path reaches this route's view (not an earlier pattern that also matches)."""
    return resolve(route.path).func is route.callback
