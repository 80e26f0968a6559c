"""Seed 003's ManagedMemoryConfig (marsys 0.2.1's names and defaults) and its server JSON.

The server validates and stores the config (`memory_config` on a session); this module only
builds it. `to_dict()` is the JSON the server takes, `from_dict()` reads what it returns.
`token_counter` stays on the client: the server counts tokens with its own tokenizers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, get_type_hints

_Config = TypeVar("_Config")


def _to_json(config: Any) -> dict[str, Any]:
    """A config dataclass as JSON: nested configs recursively, lists copied, token_counter left out."""
    data: dict[str, Any] = {}
    for field in dataclasses.fields(config):
        if field.name == "token_counter":
            continue
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            value = _to_json(value)
        elif isinstance(value, list):
            value = list(value)
        data[field.name] = value
    return data


def _from_json(cls: type[_Config], data: Mapping[str, Any]) -> _Config:
    """The inverse of _to_json. Keys this client does not know (a newer server's) are skipped."""
    hints = get_type_hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.name not in data:
            continue
        hint = hints[field.name]
        value = data[field.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
            value = _from_json(hint, value)
        values[field.name] = value
    return cls(**values)


@dataclasses.dataclass
class ToolTruncationConfig:
    """Tool outputs in the active context are cut to `max_tool_message_tokens`."""

    enabled: bool = True
    max_tool_message_tokens: int = 1200
    grace_recent_messages: int = 1
    append_marker: str = " [truncated]"
    include_tool_payload_user_messages: bool = True


@dataclasses.dataclass
class SlidingWindowConfig:
    enabled: bool = True
    headroom_percent: float = 0.1


@dataclasses.dataclass
class SummarizationConfig:
    """`grace_recent_messages` protects from the N-th most recent assistant message onward."""

    enabled: bool = True
    grace_recent_messages: int = 1
    output_max_tokens: int = 6000
    prompt_mode: str = "generic"
    include_original_instruction: bool = True
    include_image_payload_bytes: bool = False
    max_retained_images: int | None = None


CompactionConfig = SummarizationConfig  # marsys's backward-compatible alias


@dataclasses.dataclass
class BackwardPackingConfig:
    grace_recent_messages: int = 1


@dataclasses.dataclass
class ActiveContextPolicyConfig:
    enabled: bool = True
    mode: str = "compaction"  # "compaction" | "sliding_window"
    sliding_window: SlidingWindowConfig = dataclasses.field(default_factory=SlidingWindowConfig)
    processor_order: list[str] = dataclasses.field(
        default_factory=lambda: ["tool_truncation", "summarization", "backward_packing"]
    )
    excluded_processors: list[str] = dataclasses.field(default_factory=list)
    min_reduction_ratio: float = 0.4
    tool_truncation: ToolTruncationConfig = dataclasses.field(default_factory=ToolTruncationConfig)
    summarization: SummarizationConfig = dataclasses.field(default_factory=SummarizationConfig)
    backward_packing: BackwardPackingConfig = dataclasses.field(default_factory=BackwardPackingConfig)

    @property
    def compaction(self) -> SummarizationConfig:
        """marsys's backward-compatible alias of `summarization`."""
        return self.summarization

    @property
    def reduction_order(self) -> list[str]:
        """marsys's backward-compatible alias of `processor_order`."""
        return self.processor_order


@dataclasses.dataclass
class ManagedMemoryConfig:
    threshold_tokens: int = 150_000
    image_token_estimate: int = 800
    trigger_events: list[str] = dataclasses.field(default_factory=lambda: ["add", "get_messages"])
    cache_invalidation_events: list[str] = dataclasses.field(
        default_factory=lambda: ["add", "remove_by_id", "delete_memory"]
    )
    token_counter: Callable[..., Any] | None = None  # client-only: never sent to the server
    active_context: ActiveContextPolicyConfig = dataclasses.field(default_factory=ActiveContextPolicyConfig)

    @property
    def compaction_target_tokens(self) -> int:
        """Derived target: threshold_tokens * (1 - min_reduction_ratio)."""
        return int(self.threshold_tokens * (1 - self.active_context.min_reduction_ratio))

    def to_dict(self) -> dict[str, Any]:
        """The server's `memory_config` JSON: every setting, without `token_counter`."""
        return _to_json(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ManagedMemoryConfig:
        """A config from the server's JSON (a session's effective `memory_config`)."""
        return _from_json(cls, data)
