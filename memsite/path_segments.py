"""Ids that become one URL segment (`.../rounds/{id}/`, `.../attempts/{id}/`).

A segment "." or "..", also written percent-encoded ("%2E", "%2e."), is resolved away by HTTP
clients (RFC 3986 dot segments, after decoding unreserved characters): `rounds/%2E/posts/` is
sent as `rounds/posts/`, another route. An object with such an id could be created but never
addressed again, so the services refuse these ids and the OpenAPI schema's path patterns
exclude them.
"""

from __future__ import annotations

# "." or "..", each dot literal or percent-encoded.
DOT_SEGMENT = r"(?:\.|%2[eE]){1,2}"
