"""The managed-memory settings of a session: names, defaults and derived values, defined once.

The names and defaults are the reference library's (marsys 0.2.1). The client builds a config
and sends `to_json(config)` as a session's `memory_config`; the server validates that JSON into
the same dataclasses (memory_app's `parse_config`) and stores the full effective config.
`ManagedMemoryConfig.token_counter` is the client's alone (the server counts tokens with its own
tokenizers): fields marked CLIENT_ONLY are never sent nor accepted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, get_type_hints

PROCESSORS: tuple[str, ...] = ("tool_truncation", "summarization", "backward_packing")
MODES: tuple[str, ...] = ("compaction", "sliding_window")
TRIGGER_EVENTS: tuple[str, ...] = ("add", "get_messages")
CACHE_EVENTS: tuple[str, ...] = ("add", "remove_by_id", "delete_memory")
CLIENT_ONLY = {"client_only": True}

_Config = TypeVar("_Config")


@dataclass
class ToolTruncationConfig:
    """Tool outputs in the active context are cut to `max_tool_message_tokens`."""

    enabled: bool = True
    max_tool_message_tokens: int = 1200
    grace_recent_messages: int = 1
    append_marker: str = " [truncated]"
    include_tool_payload_user_messages: bool = True


@dataclass
class SlidingWindowConfig:
    enabled: bool = True
    headroom_percent: float = 0.1


@dataclass
class SummarizationConfig:
    """`grace_recent_messages` protects from the N-th most recent assistant message onward."""

    enabled: bool = True
    grace_recent_messages: int = 1
    output_max_tokens: int = 6000
    prompt_mode: str = "generic"
    include_original_instruction: bool = True
    include_image_payload_bytes: bool = False
    max_retained_images: int | None = None


@dataclass
class BackwardPackingConfig:
    grace_recent_messages: int = 1


@dataclass
class ActiveContextPolicyConfig:
    enabled: bool = True
    mode: str = "compaction"  # one of MODES
    sliding_window: SlidingWindowConfig = field(default_factory=SlidingWindowConfig)
    processor_order: list[str] = field(default_factory=lambda: list(PROCESSORS))
    excluded_processors: list[str] = field(default_factory=list)
    min_reduction_ratio: float = 0.4
    tool_truncation: ToolTruncationConfig = field(default_factory=ToolTruncationConfig)
    summarization: SummarizationConfig = field(default_factory=SummarizationConfig)
    backward_packing: BackwardPackingConfig = field(default_factory=BackwardPackingConfig)

    @property
    def compaction(self) -> SummarizationConfig:
        """The reference library's backward-compatible alias of `summarization`."""
        return self.summarization

    @property
    def reduction_order(self) -> list[str]:
        """The reference library's backward-compatible alias of `processor_order`."""
        return self.processor_order


@dataclass
class ManagedMemoryConfig:
    threshold_tokens: int = 150_000
    image_token_estimate: int = 800
    trigger_events: list[str] = field(default_factory=lambda: list(TRIGGER_EVENTS))
    cache_invalidation_events: list[str] = field(default_factory=lambda: list(CACHE_EVENTS))
    token_counter: Callable[..., Any] | None = field(default=None, metadata=CLIENT_ONLY)
    active_context: ActiveContextPolicyConfig = field(default_factory=ActiveContextPolicyConfig)

    @property
    def compaction_target_tokens(self) -> int:
        """What a compaction aims for: threshold_tokens x (1 - min_reduction_ratio)."""
        return int(self.threshold_tokens * (1 - self.active_context.min_reduction_ratio))

    def to_dict(self) -> dict[str, Any]:
        """The server's `memory_config` JSON: every setting, without `token_counter`."""
        return to_json(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ManagedMemoryConfig:
        """A config from the server's JSON (a session's effective `memory_config`)."""
        return from_json(cls, data)


def shared_fields(cls: type) -> list[dataclasses.Field[Any]]:
    """The fields of a config dataclass that travel between client and server."""
    return [item for item in dataclasses.fields(cls) if not item.metadata.get("client_only")]


def to_json(config: Any) -> dict[str, Any]:
    """A config dataclass as JSON: nested configs recursively, lists copied, client-only fields left out."""
    data: dict[str, Any] = {}
    for item in shared_fields(type(config)):
        value = getattr(config, item.name)
        if dataclasses.is_dataclass(value):
            value = to_json(value)
        elif isinstance(value, list):
            value = list(value)
        data[item.name] = value
    return data


def from_json(cls: type[_Config], data: Mapping[str, Any]) -> _Config:
    """The inverse of to_json, for a server's answer: keys this version does not know are skipped."""
    hints = get_type_hints(cls)
    values: dict[str, Any] = {}
    for item in shared_fields(cls):
        if item.name not in data:
            continue
        hint, value = hints[item.name], data[item.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
            value = from_json(hint, value)
        values[item.name] = value
    return cls(**values)
