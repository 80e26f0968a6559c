"""Hybrid search over the team's memory (POST /api/v1/search/), shared by every memory class.

The server ranks: full-text and vector candidates fused by reciprocal rank, then weighted by
recency and kind; invalidated facts and superseded records come only when asked for. The client
only builds the request and maps a refused one to SearchQueryError.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memory_client.errors import ApiError, SearchQueryError
from memory_client.transport import HttpApi

SEARCH_PATH = "search/"
MAX_LIMIT = 50  # the endpoint's largest `limit`
# The wire names the client spells otherwise (`from` is a Python keyword), so an error names
# the argument the caller wrote.
_ARGUMENT_NAMES = {"from": "since", "to": "until"}


def _timestamp(value: datetime | str) -> str:
    return value.isoformat() if isinstance(value, datetime) else value


def _argument_path(path: str) -> str:
    head, dot, rest = path.partition(".")
    head, bracket, index = head.partition("[")
    return _ARGUMENT_NAMES.get(head, head) + bracket + index + dot + rest


def refused(exc: ApiError) -> ApiError:
    """A 400 as SearchQueryError whose `fields` use the client's argument names; others as they are."""
    if exc.status_code != 400:
        return exc
    fields = {_argument_path(path): problems for path, problems in exc.fields.items()}
    return SearchQueryError(exc.detail, status_code=exc.status_code, error=exc.error, fields=fields)


def search_body(
    query: str,
    *,
    kinds: Sequence[str] | None = None,
    session: str | None = None,
    agent: str | None = None,
    role: str | None = None,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    as_of: datetime | str | None = None,
    include_invalidated: bool = False,
    limit: int = 10,
    explain: bool = False,
) -> dict[str, Any]:
    """The endpoint's JSON body; unset filters are left out (the server's defaults apply)."""
    body: dict[str, Any] = {
        "query": query,
        "include_invalidated": include_invalidated,
        "limit": limit,
        "explain": explain,
    }
    if kinds is not None:
        # A lone string would otherwise go out as a list of its letters.
        body["kinds"] = [kinds] if isinstance(kinds, str) else list(kinds)
    optional = {"session": session, "agent": agent, "role": role}
    body.update({name: value for name, value in optional.items() if value is not None})
    times = {"from": since, "to": until, "as_of": as_of}
    body.update({name: _timestamp(value) for name, value in times.items() if value is not None})
    return body


def search_hits(api: HttpApi, body: dict[str, Any]) -> list[dict[str, Any]]:
    """POST the search; its results, best first. Retried like a GET: a search changes nothing."""
    try:
        response = api.request("POST", SEARCH_PATH, json_body=body, idempotent=True, expect=(200,))
    except ApiError as exc:
        raise refused(exc) from exc
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def unique_in_order(values: Sequence[str | None]) -> list[str]:
    """Each id once, at its best (first) place; hits without one are skipped."""
    seen: dict[str, None] = {}
    for value in values:
        if value is not None:
            seen.setdefault(value, None)
    return list(seen)


def relevant_ids(api: HttpApi, query: str, *, n: int, kinds: Sequence[str], session: str, id_field: str) -> list[str]:
    """The ids (`source[id_field]`) of the session's sources most relevant to `query`, best first.

    Usually more than n, so the caller can skip one deleted or invalidated since it was indexed.
    One long source is several hits (a piece each), so when they crowd out distinct sources the
    search is asked again at the endpoint's largest limit; past that, fewer than n may come back.
    """
    limit = min(MAX_LIMIT, 3 * n)
    while True:
        body = search_body(query, kinds=kinds, session=session, limit=limit)
        hits = search_hits(api, body)
        ids = unique_in_order([hit["source"][id_field] for hit in hits])
        if len(ids) >= n or len(hits) < limit or limit == MAX_LIMIT:
            return ids
        limit = MAX_LIMIT
