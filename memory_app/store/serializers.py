"""Input of the store batch: LangGraph's operations as JSON, each checked field by field.

Errors name the operation and field (`ops[3].namespace`) and say why; a batch with any error runs
none of its operations.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from memory_app.facts.output import MAX_FIELD_CHARS
from memory_app.store import selectors

MAX_OPS = 1000  # operations per request: the client sends longer batches in several
MAX_LABELS = 20
MAX_NAMESPACE_CHARS = 600  # joined; an indexed value within PostgreSQL's btree entry limit at 4 bytes a char
MAX_PAGE = 1000
MAX_QUERY_CHARS = 2000
MAX_FILTER_CONDITIONS = 50
KINDS = ("get", "put", "search", "list_namespaces")


class OpError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def _namespace(op: Mapping[str, Any], field: str, *, wildcards: bool = False, empty: bool = False) -> list[str]:
    labels = op.get(field)
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise OpError(field, "must be a list of strings")
    if not labels and not empty:
        raise OpError(field, "must have at least one label")
    if len(labels) > MAX_LABELS:
        raise OpError(field, f"at most {MAX_LABELS} labels")
    for label in labels:
        if not label or selectors.SEPARATOR in label or "\x00" in label:
            raise OpError(field, 'every label must be non-empty, without "." or NUL characters')
        if label == selectors.WILDCARD and not wildcards:
            raise OpError(field, '"*" is a wildcard only in list_namespaces prefix and suffix')
    if len(selectors.namespace_text(labels)) > MAX_NAMESPACE_CHARS:
        raise OpError(field, f"at most {MAX_NAMESPACE_CHARS} characters with its separators")
    return labels


def _key(op: Mapping[str, Any]) -> str:
    key = op.get("key")
    if not isinstance(key, str) or not key.strip() or "\x00" in key:
        raise OpError("key", "must be a non-blank string without NUL characters")
    if len(key) > MAX_FIELD_CHARS:
        raise OpError("key", f"at most {MAX_FIELD_CHARS} characters")
    return key


def _value(op: Mapping[str, Any]) -> dict[str, Any] | None:
    if "value" not in op:
        raise OpError("value", "required (null deletes the key)")
    value = op["value"]
    if value is None:
        return None
    if not isinstance(value, dict):
        raise OpError("value", "must be a JSON object, or null to delete")
    if len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) > MAX_FIELD_CHARS:
        raise OpError("value", f"at most {MAX_FIELD_CHARS} characters as JSON")
    return value


def _count(op: Mapping[str, Any], field: str, default: int, *, minimum: int, maximum: int) -> int:
    number = op.get(field, default)
    if isinstance(number, bool) or not isinstance(number, int) or not minimum <= number <= maximum:
        raise OpError(field, f"must be an integer from {minimum} to {maximum}")
    return number


MAX_EXACT_NUMBER = 2**53  # beyond it a JSON number has no exact double, and SQLite refuses a larger int


def _number(value: Any) -> bool:
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return numeric and math.isfinite(value) and abs(value) <= MAX_EXACT_NUMBER


def _filter(op: Mapping[str, Any]) -> dict[str, Any] | None:
    value_filter = op.get("filter")
    if value_filter is None:
        return None
    if not isinstance(value_filter, dict):
        raise OpError("filter", "must be a JSON object")
    try:
        found = list(selectors.conditions(value_filter))
    except AttributeError as exc:  # a non-string key somewhere inside
        raise OpError("filter", "keys must be strings") from exc
    if len(found) > MAX_FILTER_CONDITIONS:
        raise OpError("filter", f"at most {MAX_FILTER_CONDITIONS} conditions")
    for condition in found:
        where = ".".join(condition.path)
        if not all(condition.path):
            raise OpError("filter", f"{where!r}: an empty key in a path")
        if condition.operator not in selectors.OPERATORS:
            raise OpError("filter", f"{where}: unknown operator {condition.operator} (use $eq $ne $gt $gte $lt $lte)")
        if condition.operator in selectors.COMPARISONS and not _number(condition.operand):
            raise OpError(
                "filter", f"{where}: {condition.operator} compares with a number (at most 2**53 either side of 0)"
            )
    return value_filter


def _search(op: Mapping[str, Any]) -> dict[str, Any]:
    query = op.get("query")
    if query is not None and (not isinstance(query, str) or len(query) > MAX_QUERY_CHARS):
        raise OpError("query", f"must be a string of at most {MAX_QUERY_CHARS} characters, or null")
    return {
        "op": "search",
        "namespace_prefix": _namespace(op, "namespace_prefix", empty=True),
        "filter": _filter(op),
        "limit": _count(op, "limit", 10, minimum=0, maximum=MAX_PAGE),
        "offset": _count(op, "offset", 0, minimum=0, maximum=10**6),
        "query": query or None,
    }


def _list_namespaces(op: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {"op": "list_namespaces"}
    for field in ("prefix", "suffix"):
        found[field] = _namespace(op, field, wildcards=True, empty=True) if op.get(field) is not None else None
    found["max_depth"] = (
        _count(op, "max_depth", 1, minimum=1, maximum=MAX_LABELS) if op.get("max_depth") is not None else None
    )
    found["limit"] = _count(op, "limit", 100, minimum=0, maximum=MAX_PAGE)
    found["offset"] = _count(op, "offset", 0, minimum=0, maximum=10**6)
    return found


def validate_op(op: Any) -> dict[str, Any]:
    if not isinstance(op, dict):
        raise OpError("op", "each operation must be a JSON object")
    kind = op.get("op")
    if kind not in KINDS:
        raise OpError("op", f"must be one of {', '.join(KINDS)}")
    if kind == "get":
        return {"op": "get", "namespace": _namespace(op, "namespace"), "key": _key(op)}
    if kind == "put":
        return {"op": "put", "namespace": _namespace(op, "namespace"), "key": _key(op), "value": _value(op)}
    if kind == "search":
        return _search(op)
    return _list_namespaces(op)


@extend_schema_field(
    {
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_OPS,
        "items": {
            "type": "object",
            "required": ["op"],
            "properties": {"op": {"type": "string", "enum": ["get", "put", "search", "list_namespaces"]}},
            "additionalProperties": True,
        },
    }
)
class OpsField(serializers.Field):
    """The list of operations, each validated; errors are reported as ops[i].field."""

    def to_internal_value(self, data: Any) -> list[dict[str, Any]]:
        if not isinstance(data, list) or not data:
            raise serializers.ValidationError("must be a non-empty list of operations")
        if len(data) > MAX_OPS:
            raise serializers.ValidationError(f"at most {MAX_OPS} operations a request")
        ops: list[dict[str, Any]] = []
        errors: dict[str, dict[str, list[str]]] = {}  # by index, as DRF reports list items
        for index, op in enumerate(data):
            try:
                ops.append(validate_op(op))
            except OpError as exc:
                errors[str(index)] = {exc.field: [exc.message]}
        if errors:
            raise serializers.ValidationError(errors)
        return ops

    def to_representation(self, value: Any) -> Any:
        return value


class StoreBatchInputSerializer(serializers.Serializer):
    session = serializers.UUIDField(help_text="The session whose facts hold the store's items.")
    role = serializers.CharField(max_length=200, default="langgraph", help_text="Who states the facts a put writes.")
    ops = OpsField(
        help_text="LangGraph's operations, run in order: "
        '{"op": "get", "namespace": [...], "key": k}; {"op": "put", "namespace": [...], "key": k, "value": '
        '{...} or null to delete}; {"op": "search", "namespace_prefix": [...], "filter": {...}, "query": q, '
        '"limit": 10, "offset": 0}; {"op": "list_namespaces", "prefix": [...], "suffix": [...], '
        '"max_depth": n, "limit": 100, "offset": 0}. Filter keys may be dotted paths into nested objects; '
        "operators $eq $ne $gt $gte $lt $lte."
    )


class StoreBatchOutputSerializer(serializers.Serializer):
    results = serializers.ListField(
        child=serializers.JSONField(),
        help_text="One result an operation: an item or null (get), null or "
        '{"kept": false, "reason": "curated"} (put), a list of items with `score` (search), a list of '
        "namespaces (list_namespaces). An item is {namespace, key, value, created_at, updated_at}.",
    )
