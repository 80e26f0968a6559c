"""A session's managed-memory config as validated JSON. Pure: no Django import.

A session stores its full effective config; `parse_config` fills defaults, refuses unknown
keys and wrong types, and names the offending path (`active_context.summarization.output_max_tokens`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, get_type_hints

from memory_client.vocabulary.config import (
    CACHE_EVENTS,
    MODES,
    PROCESSORS,
    TRIGGER_EVENTS,
    ActiveContextPolicyConfig,
    ManagedMemoryConfig,
    shared_fields,
    to_json,
)

# The settings themselves are defined once, with the client (memory_client.vocabulary.config).
__all__ = [
    "CACHE_EVENTS",
    "MODES",
    "PROCESSORS",
    "TRIGGER_EVENTS",
    "ActiveContextPolicyConfig",
    "ConfigError",
    "ManagedMemoryConfig",
    "json_schema",
    "merge",
    "parse_config",
    "stored_config",
    "to_dict",
]


class ConfigError(ValueError):
    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{path}: {msgs[0]}" for path, msgs in errors.items()))
        self.errors = errors


# Extra rules beyond types: (path, check, message)
_RULES: list[tuple[str, Any, str]] = [
    ("threshold_tokens", lambda v: v >= 1, "must be at least 1"),
    ("image_token_estimate", lambda v: v >= 0, "must be >= 0"),
    ("trigger_events", lambda v: set(v) <= set(TRIGGER_EVENTS), f"items must be among {', '.join(TRIGGER_EVENTS)}"),
    (
        "cache_invalidation_events",
        lambda v: set(v) == set(CACHE_EVENTS),
        # The server keeps no context cache: every read is derived anew, as after any of these
        # events, so a list that leaves one out would be a setting accepted and ignored.
        f"must list all of {', '.join(CACHE_EVENTS)}: the context is derived anew on every read (no cache)",
    ),
    ("active_context.mode", lambda v: v in MODES, f"must be one of {', '.join(MODES)}"),
    (
        "active_context.processor_order",
        lambda v: set(v) <= set(PROCESSORS),
        f"items must be among {', '.join(PROCESSORS)}",
    ),
    (
        "active_context.excluded_processors",
        lambda v: set(v) <= set(PROCESSORS),
        f"items must be among {', '.join(PROCESSORS)}",
    ),
    ("active_context.min_reduction_ratio", lambda v: 0 < v < 1, "must be between 0 and 1 (exclusive)"),
    (
        "active_context.summarization.prompt_mode",
        lambda v: v == "generic",
        'must be "generic" (the one summarization prompt there is)',
    ),
    ("active_context.sliding_window.headroom_percent", lambda v: 0 <= v < 1, "must be in [0, 1)"),
    ("active_context.tool_truncation.max_tool_message_tokens", lambda v: v >= 1, "must be at least 1"),
    ("active_context.tool_truncation.grace_recent_messages", lambda v: v >= 0, "must be >= 0"),
    ("active_context.summarization.grace_recent_messages", lambda v: v >= 0, "must be >= 0"),
    ("active_context.summarization.output_max_tokens", lambda v: v >= 16, "must be at least 16"),
    ("active_context.summarization.max_retained_images", lambda v: v is None or v >= 0, "must be >= 0 or null"),
    ("active_context.backward_packing.grace_recent_messages", lambda v: v >= 0, "must be >= 0"),
]


# Every integer setting fits the 32-bit column that holds a session's threshold.
MAX_SETTING_INT = 2**31 - 1


def _type_ok(value: Any, hint: Any) -> bool:
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint == list[str]:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    if hint == int | None:
        return value is None or _type_ok(value, int)
    return False


def _too_large(value: Any) -> bool:
    return isinstance(value, int | float) and abs(value) > MAX_SETTING_INT


def _build(cls: type, data: Any, path: str, errors: dict[str, list[str]]) -> Any:
    if not isinstance(data, dict):
        errors[path or "memory_config"] = ["must be an object"]
        return cls()
    hints = get_type_hints(cls)
    names = {f.name for f in shared_fields(cls)}
    for unknown in sorted(set(data) - names):
        errors[f"{path}.{unknown}" if path else unknown] = ["unknown setting"]
    values: dict[str, Any] = {}
    for name in names & set(data):
        sub = f"{path}.{name}" if path else name
        hint = hints[name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            values[name] = _build(hint, data[name], sub, errors)
        elif _type_ok(data[name], hint) and _too_large(data[name]):
            errors[sub] = [f"must be at most {MAX_SETTING_INT}"]
        elif _type_ok(data[name], hint):
            values[name] = float(data[name]) if hint is float else data[name]
        else:
            errors[sub] = [f"must be of type {getattr(hint, '__name__', str(hint))}"]
    return cls(**values)


def _lookup(config: ManagedMemoryConfig, path: str) -> Any:
    value: Any = config
    for part in path.split("."):
        value = getattr(value, part)
    return value


def parse_config(data: Any) -> ManagedMemoryConfig:
    """JSON (partial is fine) -> a full config, or ConfigError naming every bad path."""
    errors: dict[str, list[str]] = {}
    config = _build(ManagedMemoryConfig, data if data is not None else {}, "", errors)
    for path, check, message in _RULES:
        # A setting with a type error holds its default here: its one error is the type's.
        badly_typed = any(path == bad or path.startswith(f"{bad}.") for bad in errors)
        if not badly_typed and not check(_lookup(config, path)):
            errors[path] = [message]
    if errors:
        raise ConfigError(errors)
    return config


@functools.lru_cache(maxsize=512)
def _parsed(text: str) -> ManagedMemoryConfig:
    return parse_config(json.loads(text))


def stored_config(data: Any) -> ManagedMemoryConfig:
    """parse_config of a session's stored (validated) config, remembered: every context read
    and append needs it, and parsing takes longer than the read's queries. Treat it as read-only."""
    return _parsed(json.dumps(data or {}, sort_keys=True))


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge two partial configs (a session's settings over its team's defaults)."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def to_dict(config: ManagedMemoryConfig) -> dict[str, Any]:
    return to_json(config)


def json_schema(cls: type = ManagedMemoryConfig) -> dict[str, Any]:
    """The JSON Schema of a (partial) config, from the dataclasses above: the API documents the
    settings it takes, so clients and schema-driven tools see each name, type and bound."""
    hints = get_type_hints(cls)
    properties: dict[str, Any] = {}
    for item in shared_fields(cls):
        hint = hints[item.name]
        if dataclasses.is_dataclass(hint):
            properties[item.name] = json_schema(hint)  # type: ignore[arg-type]
        else:
            properties[item.name] = _value_schema(hint)
    return {"type": "object", "properties": properties, "additionalProperties": False}


def _value_schema(hint: Any) -> dict[str, Any]:
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return {"type": "integer", "maximum": MAX_SETTING_INT}
    if hint == int | None:
        return {"type": "integer", "maximum": MAX_SETTING_INT, "nullable": True}
    if hint is float:
        return {"type": "number"}
    if hint == list[str]:
        return {"type": "array", "items": {"type": "string"}}
    return {"type": "string"}
