"""Request body parsers: DRF's, plus the rules every parsed body (JSON or YAML) shares.

A parsed body is refused with a 400 naming the place when it holds something no database can
store or no response can carry, so one careless or hostile value cannot poison a row:

- a NUL character (U+0000): PostgreSQL cannot store it in text or jsonb;
- a lone UTF-16 surrogate (JSON's "\\ud800" without its pair): not a Unicode character, so
  UTF-8 cannot encode it, and every later read of the row would fail;
- an integer outside the signed 64-bit range: SQLite and PostgreSQL integer columns, and
  SQLite's JSON, overflow on it;
- nesting deeper than MAX_BODY_DEPTH: the parsers, JSON encoding and validation all recurse.
DRF's CharField already refuses NUL and surrogates in plain text fields; this covers free-form
JSON (metadata, content parts, records) and keys.

Before those, `parse_json` refuses what is not JSON at all, with a parse error: text that is
not in the request's encoding, bad syntax, nesting past the decoder's own stack, and the
constants NaN, Infinity and -Infinity (and a literal such as 1e400 that only a float's infinity
can hold), which Python's json reads by default but no other JSON parser, jsonb column or JSON
answer can carry. The REST API's parser and the MCP endpoint both read bodies through it.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from memory_client.vocabulary.strict_json import loads_strict
from memsite.errors import InvalidInput
from memsite.fields import is_scalar_text

# Levels of objects and arrays one body may nest: far more than any message, record or
# config needs, far below where Python's parsers and encoders run out of stack.
MAX_BODY_DEPTH = 100
INT_MIN, INT_MAX = -(2**63), 2**63 - 1

NUL = "\x00"
NUL_PROBLEM = "NUL characters (U+0000) are not allowed"
SURROGATE_PROBLEM = "not valid Unicode: a lone UTF-16 surrogate (\\ud800-\\udfff) without its pair"
INTEGER_PROBLEM = f"integers must lie between {INT_MIN} and {INT_MAX}"
DEPTH_PROBLEM = f"nested more than {MAX_BODY_DEPTH} levels deep"


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored, or None when it can."""
    if NUL in text:
        return NUL_PROBLEM
    if not is_scalar_text(text):
        return SURROGATE_PROBLEM
    return None


def _value_problem(value: Any) -> str | None:
    if isinstance(value, str):
        return text_problem(value)
    if isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
        return INTEGER_PROBLEM
    return None


def check_body(data: Any) -> Any:
    """`data` unchanged, or InvalidInput naming the first place it breaks a rule above.

    Iterative, so a body nested deeper than Python's recursion limit is refused, not crashed on.
    """
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, dict | list) and depth >= MAX_BODY_DEPTH:
            top = path.split(".")[0].split("[")[0]
            raise InvalidInput.for_field(top or "non_field_errors", DEPTH_PROBLEM)
        if isinstance(value, dict):
            children: list[tuple[Any, str, int]] = []
            for key, item in value.items():
                problem = text_problem(key) if isinstance(key, str) else None
                if problem:
                    raise InvalidInput.for_field(path or "non_field_errors", f"{problem} (in a key)")
                children.append((item, f"{path}.{key}" if path else str(key), depth + 1))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{index}]", depth + 1) for index, item in reversed(list(enumerate(value))))
        else:
            problem = _value_problem(value)
            if problem:
                raise InvalidInput.for_field(path or "non_field_errors", problem)
    return data


def parse_json(raw: bytes, *, encoding: str = "utf-8") -> Any:
    """The JSON body in `raw` once it meets every rule above.

    ParseError when `raw` is not JSON (see the module docstring); InvalidInput from check_body
    when it is JSON that breaks a rule. Size is not checked here: BodySizeLimitMiddleware and
    Django's DATA_UPLOAD_MAX_MEMORY_SIZE refuse an oversized body before anything reads it.
    """
    try:
        data = loads_strict(raw.decode(encoding))
    except RecursionError as exc:  # the C decoder's own stack limit, past ~1000 levels
        raise ParseError(f"JSON parse error - {DEPTH_PROBLEM}") from exc
    except (ValueError, LookupError) as exc:  # UnicodeDecodeError is a ValueError; LookupError: unknown charset
        raise ParseError(f"JSON parse error - {exc}") from exc
    return check_body(data)


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        return parse_json(stream.read(), encoding=encoding)
