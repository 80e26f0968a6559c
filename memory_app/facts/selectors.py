"""Reads of facts and fact-extraction runs, always from the caller's team."""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from memory_app.conversations.models import Session
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.facts.output import normalize_term
from memory_app.tenancy.models import Team
from memsite.errors import NotFound

MAX_GRAPH_EDGES = 2000  # a neighbourhood larger than this is cut (newest facts first)


def _valid_at(as_of: datetime) -> Q:
    return Q(valid_from__lte=as_of) & (Q(invalidated_at__isnull=True) | Q(invalidated_at__gt=as_of))


def fact_list(
    *,
    team: Team,
    subject: str | None = None,
    predicate: str | None = None,
    object: str | None = None,
    role: str | None = None,
    session: Session | None = None,
    q: str | None = None,
    as_of: datetime | None = None,
    include_invalidated: bool = False,
    order: str = "created",
) -> QuerySet[Fact]:
    """Facts newest first: the live ones, those valid at `as_of`, or all of them. Newest by
    first sighting, or with `order="last_seen"` by latest (a re-stated fact is recent again).

    subject/predicate/object match the normalised term exactly; `q` finds a normalised
    substring in any of the three.
    """
    facts = Fact.objects.filter(team=team)
    if as_of is not None:
        facts = facts.filter(_valid_at(as_of))
    elif not include_invalidated:
        facts = facts.filter(invalidated_at__isnull=True)
    if subject is not None:
        norm = normalize_term(subject)
        facts = facts.filter(subject_key=term_key(norm), subject_norm=norm)
    if object is not None:
        norm = normalize_term(object)
        facts = facts.filter(object_key=term_key(norm), object_norm=norm)
    if predicate is not None:
        facts = facts.filter(predicate_norm=normalize_term(predicate))
    if role is not None:
        facts = facts.filter(role=role)
    if session is not None:
        facts = facts.filter(session=session)
    if q:
        term = normalize_term(q)
        facts = facts.filter(
            Q(subject_norm__contains=term) | Q(predicate_norm__contains=term) | Q(object_norm__contains=term)
        )
    if order == "last_seen":
        return facts.order_by("-last_seen_at", "-created_at", "-id")
    return facts.order_by("-created_at", "-id")


def fact_get(*, team: Team, fact_id: uuid.UUID | str) -> Fact:
    try:
        return Fact.objects.get(team=team, pk=fact_id)
    except Fact.DoesNotExist as exc:
        raise NotFound("Fact not found.") from exc


@dataclass
class Graph:
    nodes: list[dict[str, str]] = field(default_factory=list)
    edges: list[dict[str, str]] = field(default_factory=list)
    truncated: bool = False


def fact_graph(
    *, team: Team, entity: str, depth: int = 1, as_of: datetime | None = None, session: Session | None = None
) -> Graph:
    """The entity's neighbourhood: facts reachable within `depth` hops (breadth first).

    Nodes are normalised terms labelled as first written; an edge is a fact, from its
    subject to its object. One query per hop, on the (team, subject) and (team, object)
    indexes.
    """
    start = normalize_term(entity)
    graph = Graph()
    if not start:
        return graph
    scope = Fact.objects.filter(team=team).filter(_valid_at(as_of) if as_of else Q(invalidated_at__isnull=True))
    if session is not None:
        scope = scope.filter(session=session)
    labels: dict[str, str] = {}
    seen_edges: set[Any] = set()
    frontier, visited = {start}, {start}
    for _ in range(depth):
        keys = [term_key(term) for term in frontier]
        matching = scope.filter(Q(subject_key__in=keys) | Q(object_key__in=keys)).order_by("-created_at")
        rows = matching.exclude(pk__in=seen_edges).values(
            "id", "subject", "subject_norm", "predicate", "object", "object_norm"
        )[: MAX_GRAPH_EDGES - len(graph.edges) + 1]
        reached: set[str] = set()
        for row in rows:
            if len(graph.edges) == MAX_GRAPH_EDGES:
                graph.truncated = True
                break
            seen_edges.add(row["id"])
            labels.setdefault(row["subject_norm"], row["subject"])
            labels.setdefault(row["object_norm"], row["object"])
            reached.update((row["subject_norm"], row["object_norm"]))
            graph.edges.append(
                {
                    "id": str(row["id"]),
                    "source": row["subject_norm"],
                    "target": row["object_norm"],
                    "predicate": row["predicate"],
                }
            )
        frontier = reached - visited
        visited |= reached
        if not frontier or graph.truncated:
            break
    labels.setdefault(start, entity.strip())
    graph.nodes = [{"id": node, "label": labels[node]} for node in [start, *sorted(visited - {start})]]
    return graph


def fact_extraction_list(
    *, team: Team, session: Session | None = None, status: str | None = None
) -> QuerySet[FactExtractionRun]:
    runs = FactExtractionRun.objects.filter(team=team)
    if session is not None:
        runs = runs.filter(session=session)
    if status is not None:
        runs = runs.filter(status=status)
    return runs.order_by("-created_at", "-id")


def fact_extraction_get(*, team: Team, run_id: uuid.UUID | str) -> FactExtractionRun:
    try:
        return FactExtractionRun.objects.get(team=team, pk=run_id)
    except FactExtractionRun.DoesNotExist as exc:
        raise NotFound("Fact extraction not found.") from exc


def term_key(term_norm: str) -> str:
    """The indexed stand-in of a normalised subject or object (exact-match lookups)."""
    return hashlib.sha256(term_norm.encode()).hexdigest()[:32]
