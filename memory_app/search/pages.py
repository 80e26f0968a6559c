"""The search page: the team's best matches, the same search as POST /api/v1/search/, each hit
linked to the page of its source (memory_app/search/panels.py builds the links).

The search page reads its query string with the API's own serializer, so a filter the API refuses
is refused here too, with the same message next to the field. Snippets come from fusion.snippet,
which marks matched words as **word**: the text is escaped first and only then are the marks
turned into <mark>, so stored text never reaches the page as HTML.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from memory_app.conversations import selectors as conversations
from memory_app.dashboard.decorators import team_page
from memory_app.search import selectors
from memory_app.search import serializers as ss
from memory_app.search.models import SearchKind
from memory_app.search.panels import KIND_BADGES, SourceLink, source_links
from memory_app.tenancy.models import Team
from memsite.errors import NotFound

SEARCH_RESULTS = 20
SEARCH_MORE_RESULTS = ss.SEARCH_MAX_LIMIT
# A search of every kind also shows the best of each kind its top results left out, this many
# each: a team's few curated experiences or facts must not drown in thousands of messages that
# share the query's words.
OTHER_KINDS_SHOWN = 2

# The page's field names, and the API's for the same thing (the serializer checks them).
FORM_TO_API = {"q": "query", "kind": "kinds"}
API_TO_FORM = {api: form for form, api in FORM_TO_API.items()}
TEXT_FILTERS = ("session", "agent", "role", "from", "to")
# What a kind is called on the page (the facets and the badges).
KIND_LABELS: dict[str, str] = {
    SearchKind.MESSAGE: "Messages",
    SearchKind.SUMMARY: "Summaries",
    SearchKind.FACT: "Facts",
    SearchKind.RECORD: "Agent records",
    SearchKind.EXPERIENCE: "Experiences",
    SearchKind.SHARED_MEMORY: "Shared memory",
    SearchKind.ATTACHMENT: "Attachments",
    SearchKind.MEMORY_FILE: "Memory files",
}

_MARKED = re.compile(r"\*\*(.+?)\*\*")


def highlight(snippet: str) -> SafeString:
    """The snippet as HTML: escaped, then each **word** fusion marked as <mark>word</mark>."""
    return mark_safe(_MARKED.sub(r"<mark>\1</mark>", str(escape(snippet))))  # noqa: S308 - escaped just above


# --- the search page --------------------------------------------------------------------------


# Agents worth naming beside a hit: a message's or summary's is its session's (already linked).
AGENT_SHOWN_KINDS = frozenset(
    {SearchKind.FACT, SearchKind.EXPERIENCE, SearchKind.SHARED_MEMORY, SearchKind.MEMORY_FILE}
)


def _number(value: float | None, digits: int = 3) -> str:
    """Scores span orders of magnitude (bm25 on SQLite, ts_rank on PostgreSQL): significant digits, not places."""
    return "" if value is None else f"{value:.{digits}g}"


def explain_view(explain: Mapping[str, Any]) -> dict[str, Any]:
    """Hit.explain's numbers, as the score breakdown shows them."""
    return {
        "lexical_rank": explain.get("lexical_rank"),
        "lexical_score": _number(explain.get("lexical_score")),
        "vector_rank": explain.get("vector_rank"),
        "vector_similarity": _number(explain.get("vector_similarity")),
        "lexical_share": _number(explain.get("lexical_share")),
        "coverage": _number(explain.get("coverage")),
        "best_coverage": _number(explain.get("best_coverage")),
        "similarity_gap": _number(explain.get("similarity_gap")),
        "substance": _number(explain.get("substance")),
        "speaker_named": bool(explain.get("speaker_named")),
        "in_time": bool(explain.get("in_time")),
        "holds_identifiers": bool(explain.get("holds_identifiers")),
        "relevance": _number(explain.get("relevance"), 4),
        "recency_factor": _number(explain.get("recency_factor")),
        "kind_weight": _number(explain.get("kind_weight")),
        "fused_score": _number(explain.get("fused_score"), 4),
        "live": bool(explain.get("live", True)),
    }


@dataclass(frozen=True)
class HitView:
    kind: str
    badge: str
    snippet: SafeString
    link: SourceLink
    occurred_at: datetime
    invalidated_at: datetime | None
    agent: str
    role: str
    score: float
    explain: dict[str, Any]
    item_id: int


@dataclass
class SearchForm:
    """The page's fields as typed, and the errors next to them (field name -> messages)."""

    values: dict[str, str] = field(default_factory=dict)
    kinds: list[str] = field(default_factory=list)
    include_invalidated: bool = False
    explain: bool = False
    errors: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_query(cls, query: QueryDict) -> SearchForm:
        return cls(
            values={name: query.get(name, "").strip() for name in ("q", *TEXT_FILTERS)},
            kinds=[kind for kind in query.getlist("kind") if kind],
            include_invalidated=_checked(query.get("include_invalidated")),
            explain=_checked(query.get("explain")),
        )

    @property
    def submitted(self) -> bool:
        return bool(self.values.get("q") or any(self.values.get(name) for name in TEXT_FILTERS) or self.kinds)

    @property
    def filtered(self) -> bool:
        return bool(any(self.values.get(name) for name in TEXT_FILTERS) or self.kinds or self.include_invalidated)

    def add_error(self, name: str, message: str) -> None:
        self.errors.setdefault(name, []).append(message)

    def facets(self) -> list[dict[str, Any]]:
        return [
            {"value": value, "label": KIND_LABELS.get(value, label), "checked": value in self.kinds}
            for value, label in SearchKind.choices
        ]


def _checked(value: str | None) -> bool:
    return (value or "").lower() in ("1", "true", "on", "yes")


def _flatten(errors: Any) -> list[str]:
    """A serializer's messages for one field (a list field's are per position) as plain strings."""
    if isinstance(errors, Mapping):
        return [message for value in errors.values() for message in _flatten(value)]
    if isinstance(errors, list | tuple):
        return [message for value in errors for message in _flatten(value)]
    return [str(errors)]


def _team_session_id(team: Team, name: str) -> str | None:
    """The id of the team's session with this id, or else this external id."""
    try:
        return str(conversations.session_get(team=team, session_id=uuid.UUID(name)).pk)
    except (ValueError, NotFound):
        found = conversations.session_list(team=team, external_id=name).values_list("pk", flat=True).first()
        return str(found) if found else None


def validated_search(form: SearchForm, *, team: Team, limit: int) -> dict[str, Any] | None:
    """The API's validated input for what the form holds; None (with `form.errors` set) when
    the API would refuse it."""
    data: dict[str, Any] = {
        "query": form.values.get("q", ""),
        "include_invalidated": form.include_invalidated,
        "explain": form.explain,
        "limit": limit,
    }
    if form.kinds:
        data["kinds"] = form.kinds
    for name in TEXT_FILTERS:
        if form.values.get(name):
            data[name] = form.values[name]
    if data.get("session"):
        session_id = _team_session_id(team, data["session"])
        if session_id is None:
            form.add_error("session", "No session of this team has that id or external id.")
        data["session"] = session_id or str(uuid.UUID(int=0))
    serializer = ss.SearchInputSerializer(data=data)
    if not serializer.is_valid():
        for name, messages in serializer.errors.items():
            for message in _flatten(messages):
                form.add_error(API_TO_FORM.get(name, name), message)
    return None if form.errors else dict(serializer.validated_data)


def hit_views(*, team: Team, hits: Sequence[selectors.Hit]) -> list[HitView]:
    links = source_links(team=team, items=[hit.item for hit in hits])
    return [
        HitView(
            kind=hit.item.kind,
            badge=KIND_BADGES.get(hit.item.kind, hit.item.kind),
            snippet=highlight(hit.snippet),
            link=link,
            occurred_at=hit.item.occurred_at,
            invalidated_at=hit.item.invalidated_at,
            agent=hit.item.agent if hit.item.kind in AGENT_SHOWN_KINDS and hit.item.agent != hit.item.role else "",
            role=hit.item.role if hit.item.role != hit.item.kind else "",
            score=hit.scored.fused_score,
            explain=explain_view(hit.explain()),
            item_id=hit.item.pk,
        )
        for hit, link in zip(hits, links, strict=True)
    ]


def other_kinds_hits(
    *, team: Team, data: Mapping[str, Any], shown: Sequence[selectors.Hit]
) -> list[tuple[str, list[HitView]]]:
    """For a search of every kind: (kind label, its best hits) of each kind the top results left
    out, from one more search over those kinds alone."""
    missing = [kind for kind in SearchKind.values if kind not in {hit.item.kind for hit in shown}]
    if data.get("kinds") or not missing:
        return []
    filters = selectors.filters_from({**data, "kinds": missing}, team_id=team.pk)
    found = selectors.search(filters=filters, query=data["query"], limit=OTHER_KINDS_SHOWN * len(missing)).hits
    best: dict[str, list[selectors.Hit]] = {}
    for hit in found:
        kept = best.setdefault(hit.item.kind, [])
        if len(kept) < OTHER_KINDS_SHOWN:
            kept.append(hit)
    return [(KIND_LABELS[kind], hit_views(team=team, hits=best[kind])) for kind in missing if kind in best]


@team_page
def search_page(request: HttpRequest, *, team: Team, teams: list[Team]) -> HttpResponse:
    """GET /search/?q=..&kind=..&session=&agent=&role=&from=&to=&include_invalidated=1&explain=1:
    the team's best matches, the same search as POST /api/v1/search/."""
    form = SearchForm.from_query(request.GET)
    more = _checked(request.GET.get("more"))
    limit = SEARCH_MORE_RESULTS if more else SEARCH_RESULTS
    result = None
    hits: list[HitView] = []
    other_kinds: list[tuple[str, list[HitView]]] = []
    status = 200
    if form.submitted:
        data = validated_search(form, team=team, limit=limit)
        if data is None:
            status = 400
        else:
            result = selectors.search(
                filters=selectors.filters_from(data, team_id=team.pk), query=data["query"], limit=data["limit"]
            )
            hits = hit_views(team=team, hits=result.hits)
            if data["query"]:
                other_kinds = other_kinds_hits(team=team, data=data, shown=result.hits)
    more_query = request.GET.copy()
    more_query["more"] = "1"
    context = {
        "team": team,
        "teams": teams,
        "form": form,
        "facets": form.facets(),
        "result": result,
        "hits": hits,
        "other_kinds": other_kinds,
        "limit": limit,
        "more_limit": SEARCH_MORE_RESULTS,
        "more_url": "?" + more_query.urlencode() if result and not more and len(hits) == limit else "",
    }
    return render(request, "memory_app/search.html", context, status=status)
