"""The fact extractor's answer: a JSON list of (subject, predicate, object) triples. Pure.

Follows marsys's KGMemory flow: the model answers `[{"subject", "predicate", "object"}]`.
Real models wrap that list in code fences, in an object (`{"facts": [...]}`, which JSON mode
forces) or in prose, so those are accepted; the triples themselves are checked strictly and
one bad triple rejects the whole batch, so a run never applies half an answer. The limits keep
a runaway or hostile answer from costing memory or flooding the graph.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

MAX_OUTPUT_CHARS = 200_000
MAX_TRIPLES = 500
MAX_FIELD_CHARS = 1_000
# Where to look for the JSON in prose: a bracket in the prose itself ("see [1]") can come first,
# but trying every bracket of a long answer would cost quadratic time.
MAX_JSON_CANDIDATES = 32

_WRAPPER_KEYS = ("facts", "triples")
_TRIPLE_KEYS = frozenset({"subject", "predicate", "object", "obj"})
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_START = re.compile(r"[\[{]")
_CUT_TAIL = re.compile(r"[\w.+-]{0,12}")


@dataclass(frozen=True)
class Triple:
    subject: str
    predicate: str
    object: str
    confidence: float | None = None
    replaces: bool = False  # this fact replaces the live value of subject + predicate


class FactOutputError(ValueError):
    """The answer is not a usable list of triples; `reason` is one line, safe to store and show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def normalize_term(text: str) -> str:
    """The form two terms are compared in: NFKC, casefolded, single spaces, stripped."""
    # Casefolding can yield text that is no longer in NFKC form, so normalise again after it.
    folded = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(folded.split())


def parse_fact_output(text: str) -> list[Triple]:
    """Every triple in the answer, or FactOutputError for the whole answer."""
    if not isinstance(text, str):
        raise FactOutputError(f"the output is {type(text).__name__}, not text")
    if len(text) > MAX_OUTPUT_CHARS:
        raise FactOutputError(f"the output has {len(text)} characters (limit {MAX_OUTPUT_CHARS})")
    items = _find_list_in(text)
    if len(items) > MAX_TRIPLES:
        raise FactOutputError(f"the output has {len(items)} triples (limit {MAX_TRIPLES})")
    return [_triple(item, index) for index, item in enumerate(items)]


def _find_list_in(text: str) -> list[Any]:
    """The list in the answer's code fence, else in the whole answer.

    A value may itself hold three backticks (a subject quoting code): the fence pattern then
    ends there, or finds a fence that is not one, and the inside is no usable JSON. The whole
    answer still is, so it is read again; when neither holds a list, the fenced reading's
    problem is the one reported."""
    inside = _unfence(text)
    try:
        return _find_list(inside)
    except FactOutputError:
        if inside == text:
            raise
        try:
            return _find_list(text)
        except FactOutputError:
            pass
        raise


def _unfence(text: str) -> str:
    """The inside of the first code fence (an unclosed one runs to the end), else the text."""
    match = _FENCE.search(text)
    return match.group(1) if match else text


def _find_list(text: str) -> list[Any]:
    """The list of triple objects: the whole text, or the first usable JSON value in it."""
    stripped = text.strip()
    if not stripped:
        raise FactOutputError("the output is empty")
    decoder = json.JSONDecoder()
    first_problem = ""
    position = 0
    for _ in range(MAX_JSON_CANDIDATES):
        match = _START.search(stripped, position)
        if match is None:
            break
        try:
            value, end = decoder.raw_decode(stripped, match.start())
        except json.JSONDecodeError as exc:
            if _truncated(exc, stripped):
                raise FactOutputError("the JSON is truncated (the answer was cut off)") from exc
            first_problem = first_problem or f"invalid JSON: {exc.msg} at character {exc.pos}"
            # What parsed before the error belongs to this broken value: a list inside it is
            # a fragment, never the answer.
            position = max(exc.pos, match.start() + 1)
            continue
        except RecursionError as exc:
            raise FactOutputError("the JSON is nested too deeply") from exc
        except ValueError as exc:  # e.g. an integer past Python's 4300-digit limit
            raise FactOutputError(f"invalid JSON: {str(exc).split(';')[0]}") from exc
        items, problem = _as_triple_list(value)
        if items is not None:
            return items
        first_problem = first_problem or problem
        position = end  # never search inside a value already judged
    raise FactOutputError(first_problem or "no JSON list of facts in the output")


def _truncated(exc: json.JSONDecodeError, text: str) -> bool:
    """Whether the JSON broke because the text ended (an answer cut off at its token limit)."""
    # An unterminated string is reported where it starts, but only the end of input causes it;
    # a cut-off literal or number ("tru", "0.") leaves a short word-like tail.
    return exc.msg.startswith("Unterminated string") or bool(_CUT_TAIL.fullmatch(text[exc.pos :]))


def _as_triple_list(value: Any) -> tuple[list[Any] | None, str]:
    """The list this value holds if it is (or wraps) a list of objects, else why not."""
    if isinstance(value, list):
        # A list of anything else is prose ("see [1]") or a wrong answer: the caller looks on.
        odd = [item for item in value if not isinstance(item, dict)]
        if not odd:
            return value, ""
        return None, f"the JSON list holds a {_json_type(odd[0])}, not triple objects"
    if _TRIPLE_KEYS & value.keys():
        return None, "a lone triple object, not a list of them"  # or a fragment of a broken list
    for key in _WRAPPER_KEYS:
        if isinstance(value.get(key), list):
            return _as_triple_list(value[key])
    lists = [item for item in value.values() if isinstance(item, list)]
    if len(lists) == 1:
        return _as_triple_list(lists[0])
    return None, "the JSON object does not hold one list of facts"


def _json_type(value: Any) -> str:
    names = {str: "string", bool: "boolean", int: "number", float: "number", list: "list", dict: "object"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _triple(item: dict[str, Any], index: int) -> Triple:
    where = f"triple {index + 1}"
    if "object" in item and "obj" in item:
        raise FactOutputError(f"{where} has both 'object' and 'obj'")
    return Triple(
        subject=_field(item, "subject", where),
        predicate=_field(item, "predicate", where),
        object=_field(item, "obj" if "obj" in item else "object", where),
        confidence=_confidence(item.get("confidence"), where),
        replaces=_replaces(item.get("replaces"), where),
    )


def _field(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        kind = "missing" if key not in item else f"a {_json_type(value)}"
        raise FactOutputError(f"{where}: '{key}' is {kind}, not a string")
    value = value.strip()
    if not value:
        raise FactOutputError(f"{where}: '{key}' is empty")
    # Normalising can lengthen text (NFKC expands ligatures), and both forms are stored.
    if max(len(value), len(normalize_term(value))) > MAX_FIELD_CHARS:
        raise FactOutputError(f"{where}: '{key}' is longer than {MAX_FIELD_CHARS} characters")
    if "\x00" in value:  # PostgreSQL cannot store NUL in text
        raise FactOutputError(f"{where}: '{key}' contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800") that no database accepts
        raise FactOutputError(f"{where}: '{key}' is not valid Unicode") from exc
    return value


def _confidence(value: Any, where: str) -> float | None:
    if value is None:
        return None
    # bool is an int in Python, but `true` is no confidence.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FactOutputError(f"{where}: 'confidence' is a {_json_type(value)}, not a number")
    if not math.isfinite(value) or not 0 <= value <= 1:
        raise FactOutputError(f"{where}: 'confidence' {value} is outside 0..1")
    return float(value)


def _replaces(value: Any, where: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise FactOutputError(f"{where}: 'replaces' is a {_json_type(value)}, not true/false")
    return value
