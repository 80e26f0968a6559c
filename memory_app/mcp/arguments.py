"""The first look at a tool's arguments: the ones the REST endpoint never sees as body fields.

A tool's arguments become a URL (session id, agent name), a query string or a body. The REST
serializers validate the body and query in depth; what ends up in the URL must be checked
here, because a malformed id would only make the URL match nothing. This checks the top level
against the tool's input schema (names, required, JSON types, uuid format, enums), so the
errors name the argument the same way the API names a field. The rules of every parsed body
(no NUL, no lone surrogate, integer range, depth) were already applied to the whole JSON-RPC
message, arguments included, when the endpoint read it (memory_app.mcp.api, memsite.parsers).
"""

from __future__ import annotations

import uuid
from typing import Any

Schema = dict[str, Any]
Problems = dict[str, list[str]]

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}
_TYPE_WORDS = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false"}


def argument_problems(arguments: dict[str, Any], schema: Schema) -> Problems:
    """{argument: [why]} for every top-level argument that breaks `schema`; {} when all is well."""
    problems: Problems = {}
    properties: dict[str, Schema] = schema.get("properties", {})
    for name in schema.get("required", ()):
        if arguments.get(name) is None:
            problems.setdefault(name, []).append("This field is required.")
    for name, value in arguments.items():
        spec = properties.get(name)
        if spec is None:
            problems.setdefault(name, []).append(f"Unknown argument; expected one of: {', '.join(sorted(properties))}.")
        elif value is not None:
            problem = _value_problem(value, spec)
            if problem:
                problems.setdefault(name, []).append(problem)
    for group in schema.get("x-one-of-required", ()):
        if not any(arguments.get(name) is not None for name in group):
            problems.setdefault(group[0], []).append(f"Give one of: {', '.join(group)}.")
    return problems


def _value_problem(value: Any, spec: Schema) -> str | None:
    kinds = spec.get("type")
    if isinstance(kinds, str):
        kinds = [kinds]
    if kinds and not any(_is_type(value, kind) for kind in kinds):
        return f"Must be {' or '.join(_TYPE_WORDS.get(kind, f'an {kind}') for kind in kinds)}."
    if "enum" in spec and value not in spec["enum"]:
        return f'"{value}" is not a valid choice; expected one of: {", ".join(map(str, spec["enum"]))}.'
    if spec.get("format") == "uuid" and isinstance(value, str) and not _is_uuid(value):
        return "Must be a valid UUID."
    if isinstance(value, str) and "/" in value and spec.get("x-path-segment"):
        return "Must not contain '/'."
    if isinstance(value, str) and len(value) > spec.get("maxLength", len(value)):
        return f"Ensure this field has no more than {spec['maxLength']} characters."
    if isinstance(value, str) and len(value) < spec.get("minLength", 0):
        return "This field may not be blank."
    if isinstance(value, list) and len(value) < spec.get("minItems", 0):
        return f"Ensure this field has at least {spec['minItems']} elements."
    return None


def _is_type(value: Any, kind: str) -> bool:
    if isinstance(value, bool):  # a bool is an int to Python, never to JSON Schema
        return kind == "boolean"
    return isinstance(value, _JSON_TYPES.get(kind, ()))


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
