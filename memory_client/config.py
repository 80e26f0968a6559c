"""The managed-memory config classes of the client (defined once, in memory_client.vocabulary).

`ManagedMemoryConfig.to_dict()` is the JSON the server takes as a session's `memory_config`,
`from_dict()` reads what it returns. `token_counter` stays on the client.
"""

from __future__ import annotations

from memory_client.vocabulary.config import (
    ActiveContextPolicyConfig,
    BackwardPackingConfig,
    ManagedMemoryConfig,
    SlidingWindowConfig,
    SummarizationConfig,
    ToolTruncationConfig,
)

CompactionConfig = SummarizationConfig  # the reference library's backward-compatible alias

__all__ = [
    "ActiveContextPolicyConfig",
    "BackwardPackingConfig",
    "CompactionConfig",
    "ManagedMemoryConfig",
    "SlidingWindowConfig",
    "SummarizationConfig",
    "ToolTruncationConfig",
]
