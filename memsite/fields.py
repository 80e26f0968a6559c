"""Model fields shared by the apps: JSON that always reads back as valid Unicode, and JSON kept as written.

Bodies holding lone UTF-16 surrogates are refused at parse time (memsite/parsers.py), but rows
written before that rule, or by other paths into the database, may still hold one as a JSON
escape ("\\ud800"). Python decodes such an escape into a string that UTF-8 cannot encode, so
every response, page, export or LLM prompt built from the row failed. Reading replaces each
lone surrogate with U+FFFD, the replacement character, once, where rows enter Python.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import models

REPLACEMENT = "\ufffd"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# In stored JSON text a surrogate can only appear escaped; text without this needs no walk.
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def is_scalar_text(text: str) -> bool:
    """Whether UTF-8 can encode `text`: it holds no lone surrogate (the one case it cannot)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def has_lone_surrogate(value: Any) -> bool:
    """Whether any string in `value` (keys included) holds a lone surrogate; builds nothing."""
    if isinstance(value, str):
        return not is_scalar_text(value)
    if isinstance(value, dict):
        return any(has_lone_surrogate(key) or has_lone_surrogate(item) for key, item in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(item) for item in value)
    return False


def without_lone_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (keys included) replaced by U+FFFD."""
    if not has_lone_surrogate(value):
        return value
    if isinstance(value, str):
        return _LONE_SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {without_lone_surrogates(key): without_lone_surrogates(item) for key, item in value.items()}
    return [without_lone_surrogates(item) for item in value]


class ReadableJSONMixin:
    """Decoded JSON with lone surrogates replaced (see the module docstring)."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        decoded = super().from_db_value(value, expression, connection)  # type: ignore[misc]
        if isinstance(value, str) and not _ESCAPED_SURROGATE.search(value):
            return decoded  # the common case: nothing to replace, no walk
        return without_lone_surrogates(decoded)


class JSONField(ReadableJSONMixin, models.JSONField):
    """Django's JSONField, read back as valid Unicode.

    Migrations see Django's own field: the column and every query are exactly Django's, only
    the Python value read back differs, so no migration is needed to adopt it.
    """

    def deconstruct(self) -> Any:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs


class VerbatimJSONField(ReadableJSONMixin, models.JSONField):
    """JSON kept as written: PostgreSQL's `json`, not `jsonb`, which reorders object keys.

    Message payloads are replayed to LLMs as text; `{"zeta": 1, "alpha": 2}` must come back
    in that order, exactly as SQLite and the reference library return it.
    """

    def db_type(self, connection: Any) -> str | None:
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if connection.vendor != "postgresql":
            return super().get_db_prep_value(value, connection, prepared)
        # Django adapts JSON as psycopg's Jsonb, and the jsonb cast reorders the keys.
        from psycopg.types.json import Json

        return Json(value if prepared else self.get_prep_value(value))

    def deconstruct(self) -> Any:
        # Migrations name the field by the path it was first defined at; memory_app.models
        # re-exports it there, so moving its definition needs no migration.
        name, _path, args, kwargs = super().deconstruct()
        return name, "memory_app.models.VerbatimJSONField", args, kwargs

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        # psycopg decodes `json` columns itself (Django only registers a text loader for
        # jsonb): the value is already parsed, in its original key order. Decoding it again
        # would turn the string "42" into the number 42.
        if connection.vendor == "postgresql":
            return without_lone_surrogates(value)
        return super().from_db_value(value, expression, connection)
