"""Reads of a store: items by exact namespace and key, searches under a prefix, namespace listings.

A store is one session's facts written as items (`store_namespace` set). The database does the work:
the live items of a namespace prefix are an index range of `fact_store_live` ("a.b" itself, then
"a.b." <= namespace < "a.b/", compared byte by byte: see migration 0029), value filters are JSON path
conditions, and pages are LIMIT/OFFSET. Only a listing's match conditions with wildcards and its
max_depth cut are applied in Python, to the distinct namespaces the database returns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from django.db.models import Q, QuerySet
from django.db.models.fields.json import KeyTransform

from memory_app.conversations.models import Session
from memory_app.facts.models import Fact
from memory_app.search import selectors as search_selectors
from memory_app.search.engines import Filters
from memory_app.search.models import SearchKind

SEPARATOR = "."  # LangGraph refuses "." inside a label, so the joined namespace is unambiguous
WILDCARD = "*"
RANKED_AT_LEAST = 50  # a query search ranks at least this many of the store's facts
COMPARISONS = {"$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}
OPERATORS = frozenset({"$eq", "$ne", *COMPARISONS})


class ItemDict(TypedDict):
    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: str
    updated_at: str


class SearchItemDict(ItemDict):
    score: float | None


@dataclass(frozen=True)
class Condition:
    """One value condition: the JSON path into the value, LangGraph's operator, its operand."""

    path: tuple[str, ...]
    operator: str
    operand: Any


def namespace_text(labels: Sequence[str]) -> str:
    return SEPARATOR.join(labels)


def conditions(value_filter: Mapping[str, Any], path: tuple[str, ...] = ()) -> Iterator[Condition]:
    """LangGraph's filter as conditions: a dotted key is a path into nested objects, a nested object
    without operators matches key by key, `{"$gt": 1, ...}` applies each operator to the value."""
    for key, wanted in value_filter.items():
        here = (*path, *key.split(SEPARATOR))
        if isinstance(wanted, Mapping) and any(name.startswith("$") for name in wanted):
            for operator, operand in wanted.items():
                yield Condition(here, operator, operand)
        elif isinstance(wanted, Mapping):
            yield from conditions(wanted, here)
        else:
            yield Condition(here, "$eq", wanted)


def _json_path(path: tuple[str, ...]) -> KeyTransform:
    expression = KeyTransform(path[0], "store_value")
    for key in path[1:]:
        expression = KeyTransform(key, expression)
    return expression


def _condition_q(alias: str, condition: Condition) -> Q:
    """The condition as LangGraph's stores read it: a missing key is None (it equals None and differs
    from anything else); an ordering comparison never matches a missing key."""
    operand = condition.operand
    if condition.operator in COMPARISONS:
        return Q(**{f"{alias}__{COMPARISONS[condition.operator]}": operand})
    missing_or_null = Q(**{f"{alias}__isnull": True}) | Q(**{alias: None})
    equal = missing_or_null if operand is None else Q(**{alias: operand})
    if condition.operator != "$ne":
        return equal
    # SQL's NOT leaves out a missing key (NULL), which differs from every operand but None.
    return ~equal if operand is None else ~equal | missing_or_null


def _with_filter(items: QuerySet[Fact], value_filter: Mapping[str, Any] | None) -> QuerySet[Fact]:
    for index, condition in enumerate(conditions(value_filter or {})):
        alias = f"store_path_{index}"
        items = items.alias(**{alias: _json_path(condition.path)}).filter(_condition_q(alias, condition))
    return items


def _under(prefix: Sequence[str]) -> Q:
    if not prefix:
        return Q()
    text = namespace_text(prefix)
    # "." + 1 is "/": every namespace that continues the prefix with another label sorts between.
    return Q(store_namespace=text) | Q(store_namespace__gte=text + SEPARATOR, store_namespace__lt=text + "/")


def live_items(*, session: Session) -> QuerySet[Fact]:
    """The store's live items (deletion markers left out), on the `fact_store_live` index."""
    return Fact.objects.filter(
        team_id=session.team_id,
        scope_key=str(session.pk),
        store_namespace__isnull=False,
        invalidated_at__isnull=True,
        store_value__isnull=False,
    )


def live_fact(*, session: Session, namespace: Sequence[str], key: str) -> Fact | None:
    """The live fact (value or deletion marker) of the key: at most one (store services)."""
    return (
        Fact.objects.filter(
            team_id=session.team_id,
            scope_key=str(session.pk),
            store_namespace=namespace_text(namespace),
            predicate=key,
            invalidated_at__isnull=True,
        )
        .order_by("-created_at")
        .first()
    )


def item_dict(fact: Fact) -> ItemDict:
    assert fact.store_namespace is not None  # only store items are read here
    return {
        "namespace": fact.store_namespace.split(SEPARATOR),
        "key": fact.predicate,
        "value": dict(fact.store_value or {}),  # a live item's value is an object; a marker is never shown
        "created_at": fact.valid_from.isoformat(),
        "updated_at": fact.updated_at.isoformat(),
    }


def store_get(*, session: Session, namespace: Sequence[str], key: str) -> ItemDict | None:
    fact = live_fact(session=session, namespace=namespace, key=key)
    return item_dict(fact) if fact is not None and fact.store_value is not None else None


def _scored(fact: Fact, score: float | None) -> SearchItemDict:
    return {**item_dict(fact), "score": score}


def store_search(
    *,
    session: Session,
    namespace_prefix: Sequence[str],
    value_filter: Mapping[str, Any] | None = None,
    limit: int = 10,
    offset: int = 0,
    query: str | None = None,
) -> list[SearchItemDict]:
    """The live items under the prefix that pass the filter, newest first; with a query, those
    memsite's hybrid search ranks come first, best first, with their scores, then the rest (score None)."""
    if limit <= 0:
        return []
    items = _with_filter(live_items(session=session).filter(_under(namespace_prefix)), value_filter).only(
        "id", "store_namespace", "predicate", "store_value", "valid_from", "updated_at"
    )
    newest = items.order_by("-created_at", "-id")
    if not query:
        return [_scored(fact, None) for fact in newest[offset : offset + limit]]
    ranked = _ranked_fact_ids(session=session, query=query, at_least=offset + limit)
    found = {fact.pk: fact for fact in items.filter(pk__in=list(ranked))}
    results = [_scored(found[fact_id], score) for fact_id, score in ranked.items() if fact_id in found]
    wanted = offset + limit
    if len(results) < wanted:
        rest = newest.exclude(pk__in=list(found))[: wanted - len(results)]
        results += [_scored(fact, None) for fact in rest]
    return results[offset:wanted]


def _ranked_fact_ids(*, session: Session, query: str, at_least: int) -> dict[Any, float]:
    """Fact id -> score of the session's live facts memsite's search finds for the query, best first."""
    filters = Filters(team_id=session.team_id, kinds=(SearchKind.FACT,), session_id=session.pk)
    result = search_selectors.search(filters=filters, query=query, limit=max(RANKED_AT_LEAST, at_least))
    ranked: dict[Any, float] = {}
    for hit in result.hits:  # a long fact may be several pieces: its best one counts
        if hit.item.fact_id is not None:
            ranked.setdefault(hit.item.fact_id, hit.scored.fused_score)
    return ranked


def _matches(namespace: tuple[str, ...], path: Sequence[str], *, suffix: bool) -> bool:
    if len(namespace) < len(path):
        return False
    labels = namespace[len(namespace) - len(path) :] if suffix else namespace[: len(path)]
    return all(wanted in (WILDCARD, label) for label, wanted in zip(labels, path, strict=True))


def store_list_namespaces(
    *,
    session: Session,
    prefix: Sequence[str] | None = None,
    suffix: Sequence[str] | None = None,
    max_depth: int | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[list[str]]:
    """The namespaces holding live items, sorted, cut to max_depth and paged, as LangGraph lists them."""
    literal = list(prefix or [])
    if WILDCARD in literal:
        literal = literal[: literal.index(WILDCARD)]
    distinct = (
        live_items(session=session)
        .filter(_under(literal))
        .order_by("store_namespace")
        .values_list("store_namespace", flat=True)
        .distinct()
    )
    found: set[tuple[str, ...]] = set()
    for text in distinct:
        namespace = tuple(str(text).split(SEPARATOR))
        if prefix and not _matches(namespace, prefix, suffix=False):
            continue
        if suffix and not _matches(namespace, suffix, suffix=True):
            continue
        found.add(namespace[:max_depth] if max_depth is not None else namespace)
    return [list(namespace) for namespace in sorted(found)[offset : offset + limit]]
