"""JSON as every parser reads it: what the server accepts in a body and the stdio proxy accepts
in an answer. Python's json reads NaN, Infinity and -Infinity, and turns a number too large for a
64-bit float (`1e400`) into Infinity; none of them is JSON, and writing them back is not either.
Standard library only (the server imports this module)."""

from __future__ import annotations

import json
import math
from typing import Any


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal[:40]} is beyond a 64-bit float (only Infinity could hold it, which is not JSON)")
    return value


def loads_strict(text: str | bytes) -> Any:
    """`json.loads` that refuses NaN, Infinity and numbers only Infinity could hold (ValueError).
    RecursionError still escapes for nesting past the decoder's stack: callers word it."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
