"""Run one operation sequence on a MemoryManager, marsys's or ours, and return comparable results.

Pure Python with no Django and no memory_client import: marsys_driver.py runs it under
Python 3.12 next to marsys, and the differential tests run it under 3.11 against the live
server, so both sides read the operations in exactly the same way.

A scenario is {"managers": {"a": {"description": ...}, ...}, "ops": [op, ...]} and an op is
{"op": method, "mm": manager name (default "a"), "args": [...], "kwargs": {...},
"message": {Message fields}}. In arguments, "$3" is the id returned by op 3's add(), "@x" a
message id chosen per run, and "{tmp}" the run's scratch directory. Results are
{"value": ...} or {"error": exception class name}; ids in results are written back as "$3"/"@x".
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections.abc import Callable
from typing import Any

_CHOSEN_ID = re.compile(r"^@\w+$")
_RETURNED_ID = re.compile(r"^\$\d+$")
# marsys 0.2.1 raises MessageError with keyword context its constructor does not accept, so
# each MessageError it means to raise surfaces as this TypeError.
_MARSYS_MESSAGE_ERROR_BUG = "AgentFrameworkError.__init__() got an unexpected keyword argument"


def _resolve(value: Any, ids: dict[str, str], tmp: str) -> Any:
    if isinstance(value, str):
        if _RETURNED_ID.match(value):
            return ids[value]
        if _CHOSEN_ID.match(value):
            return ids.setdefault(value, str(uuid.uuid4()))
        return value.replace("{tmp}", tmp)
    if isinstance(value, list):
        return [_resolve(item, ids, tmp) for item in value]
    if isinstance(value, dict):
        return {key: _resolve(item, ids, tmp) for key, item in value.items()}
    return value


def _normalize(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, (list, tuple)):
        return [_normalize(item, names) for item in value]
    if isinstance(value, dict):
        return {key: _normalize(item, names) for key, item in value.items()}
    return value


def _error(exc: Exception) -> dict[str, str]:
    if isinstance(exc, TypeError) and _MARSYS_MESSAGE_ERROR_BUG in str(exc):
        return {"error": "MessageError", "raw": "TypeError"}
    return {"error": type(exc).__name__}


def saved_file(path: str, to_llm: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """The comparable part of a save_to_file document: messages as the LLM receives them."""
    with open(path) as file:
        document = json.load(file)
    return {
        "memory_type": document.get("memory_type"),
        "messages": [to_llm(message) for message in document.get("messages", [])],
        "additional_state": document.get("additional_state"),
    }


def run_scenario(
    scenario: dict[str, Any],
    *,
    make_manager: Callable[..., Any],
    make_message: Callable[..., Any],
    tmp: str,
    to_llm: Callable[[dict[str, Any]], dict[str, Any]],
) -> list[dict[str, Any]]:
    try:
        managers = {name: make_manager(**spec) for name, spec in scenario.get("managers", {"a": {}}).items()}
    except Exception as exc:  # a refused constructor is the scenario's one result
        return [_error(exc)]
    ids: dict[str, str] = {}
    results: list[dict[str, Any]] = []
    for index, op in enumerate(scenario["ops"]):
        manager = managers[op.get("mm", "a")]
        args = _resolve(op.get("args", []), ids, tmp)
        kwargs = _resolve(op.get("kwargs", {}), ids, tmp)
        try:
            if "message" in op:
                kwargs["message"] = make_message(**_resolve(op["message"], ids, tmp))
            value = getattr(manager, op["op"])(*args, **kwargs)
        except Exception as exc:  # a result to compare, not a failure of the run
            results.append(_error(exc))
            continue
        if op["op"] == "add":
            ids[f"${index}"] = value
        if op["op"] == "save_to_file":
            value = saved_file(args[0], to_llm)
        names = {real: name for name, real in ids.items()}
        results.append({"value": _normalize(value, names)})
    return results


def _message_fields(message: Any) -> dict[str, Any]:
    """Every field of a Message but its random id (dataclasses.asdict turns calls into dicts)."""
    fields = dataclasses.asdict(message)
    fields.pop("message_id")
    return fields


def run_message_case(
    case: dict[str, Any],
    *,
    message: Any,
    content: Any,
    response: Callable[[dict[str, Any]], Any],
) -> dict[str, Any]:
    """One call of the message classes: `message` is a Message class, `content` a MessageContent
    class, `response` builds what from_harmonized_response takes from a HarmonizedResponse dict.

    A case is {"call": "content", "kwargs": {...}}, {"call": "content_from_dict", "data": {...}},
    {"call": "to_api_format", "message": {...}} or
    {"call": "from_harmonized_response", "response": {...}, "kwargs": {...}}.
    """
    call = case["call"]
    try:
        if call == "content":
            value: Any = content(**case["kwargs"]).to_dict()
        elif call == "content_from_dict":
            value = dataclasses.asdict(content.from_dict(case["data"]))
        elif call == "to_api_format":
            value = message(**case["message"]).to_api_format()
        elif call == "from_harmonized_response":
            built = message.from_harmonized_response(response(case["response"]), **case.get("kwargs", {}))
            value = _message_fields(built)
        else:
            raise ValueError(f"unknown call {call!r}")
    except Exception as exc:  # a result to compare, not a failure of the run
        return _error(exc)
    return {"value": value}
