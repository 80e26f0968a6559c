"""Content-Security-Policy for every HTML page: our own scripts, styles and images only.

Stored messages are written by agents, so a page must never run or fetch what they wrote:
Django's autoescaping keeps their text inert, and this policy is the second wall should a
template ever slip. It also stops the pages from fetching agent-supplied http(s) image URLs,
which would tell an agent who reads a conversation and when; the session page lifts that for
one response when the reader asks to see remote images (`allow_remote_images`).
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"
REMOTE_IMAGE_SOURCES = ("https:", "http:")

POLICY: dict[str, tuple[str, ...]] = {
    "default-src": ("'self'",),
    "script-src": ("'self'",),
    "style-src": ("'self'",),
    # Style *attributes* only, never <style> elements: the templates set server-computed widths
    # (gauges, bars) and hues (role tags) as numbers, and agent text is autoescaped so it cannot
    # open an attribute. An attribute styles its own element only (no selectors to probe the page
    # with), and any url() in it is still held to img-src, font-src and the rest.
    "style-src-attr": ("'unsafe-inline'",),
    "img-src": ("'self'", "data:"),
    "connect-src": ("'self'",),
    "object-src": ("'none'",),
    "base-uri": ("'none'",),
    "frame-ancestors": ("'none'",),
    "form-action": ("'self'",),
}

# Set on a response by allow_remote_images; read by the middleware on the way out.
_REMOTE_IMAGES = "memsite_csp_remote_images"


def allow_remote_images(response: HttpResponse) -> HttpResponse:
    """Let this one response load http(s) images: the reader asked to see remote images."""
    setattr(response, _REMOTE_IMAGES, True)
    return response


def policy(*, remote_images: bool = False) -> str:
    directives = dict(POLICY)
    if remote_images:
        directives["img-src"] = POLICY["img-src"] + REMOTE_IMAGE_SOURCES
    return "; ".join(" ".join((name, *sources)) for name, sources in directives.items())


def _is_html(response: HttpResponse) -> bool:
    return response.get("Content-Type", "").split(";")[0].strip().lower() == "text/html"


class ContentSecurityPolicyMiddleware:
    """Sets the policy on every HTML response, whichever view or middleware answered."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if _is_html(response):
            response[HEADER] = policy(remote_images=getattr(response, _REMOTE_IMAGES, False))
        return response
