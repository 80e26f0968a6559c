"""Python client for memsite: marsys 0.2.1's memory API, kept on a memsite server.

from memory_client import MemoryManager
memory = MemoryManager(description="You are helpful")  # MEMSITE_URL / MEMSITE_API_KEY
memory.add(role="user", content="Hello")
memory.retrieve_all()
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Names are loaded on first use (PEP 562), so that importing `memory_client.vocabulary` (the
# server does) runs this file without loading the HTTP client and everything it needs.
_EXPORTS: dict[str, str] = {
    "ActiveContextPolicyConfig": "memory_client.config",
    "AgentCallMsg": "memory_client.messages",
    "AgentConfigurationError": "memory_client.errors",
    "ApiError": "memory_client.errors",
    "Attachment": "memory_client.conversation",
    "AttachmentType": "memory_client.conversation",
    "AuthenticationError": "memory_client.errors",
    "BackwardPackingConfig": "memory_client.config",
    "CompactionConfig": "memory_client.config",
    "CompactionEvent": "memory_client.events",
    "ConflictError": "memory_client.errors",
    "Conversation": "memory_client.conversation",
    "ConversationMemory": "memory_client.memory",
    "FactExtractionError": "memory_client.errors",
    "FactExtractionTimeout": "memory_client.errors",
    "KGMemory": "memory_client.kg",
    "ManagedConversationMemory": "memory_client.managed",
    "ManagedMemoryConfig": "memory_client.config",
    "Memory": "memory_client.rounds",
    "MemoryClientError": "memory_client.errors",
    "MemoryConfigError": "memory_client.errors",
    "MemoryFileError": "memory_client.memory_files",
    "MemoryFiles": "memory_client.memory_files",
    "MemoryManager": "memory_client.manager",
    "MemoryResetEvent": "memory_client.events",
    "Message": "memory_client.messages",
    "MessageContent": "memory_client.messages",
    "MessageError": "memory_client.errors",
    "NotFoundError": "memory_client.errors",
    "Post": "memory_client.conversation",
    "RemoteConversationMemory": "memory_client.memory",
    "RemoteKGMemory": "memory_client.kg",
    "RemoteManagedConversationMemory": "memory_client.managed",
    "Round": "memory_client.conversation",
    "SearchQueryError": "memory_client.errors",
    "SharedMemoryEntry": "memory_client.conversation",
    "SlidingWindowConfig": "memory_client.config",
    "SummarizationConfig": "memory_client.config",
    "ToolCallMsg": "memory_client.messages",
    "ToolTruncationConfig": "memory_client.config",
    "fact_to_dict": "memory_client.kg",
    "last_messages": "memory_client.turns",
    "to_llm_dict": "memory_client.openai_format",
}

if TYPE_CHECKING:
    from memory_client.config import (
        ActiveContextPolicyConfig,
        BackwardPackingConfig,
        CompactionConfig,
        ManagedMemoryConfig,
        SlidingWindowConfig,
        SummarizationConfig,
        ToolTruncationConfig,
    )
    from memory_client.conversation import Attachment, AttachmentType, Conversation, Post, Round, SharedMemoryEntry
    from memory_client.errors import (
        AgentConfigurationError,
        ApiError,
        AuthenticationError,
        ConflictError,
        FactExtractionError,
        FactExtractionTimeout,
        MemoryClientError,
        MemoryConfigError,
        MessageError,
        NotFoundError,
        SearchQueryError,
    )
    from memory_client.events import CompactionEvent, MemoryResetEvent
    from memory_client.kg import KGMemory, RemoteKGMemory, fact_to_dict
    from memory_client.managed import ManagedConversationMemory, RemoteManagedConversationMemory
    from memory_client.manager import MemoryManager
    from memory_client.memory import ConversationMemory, RemoteConversationMemory
    from memory_client.memory_files import MemoryFileError, MemoryFiles
    from memory_client.messages import AgentCallMsg, Message, MessageContent, ToolCallMsg
    from memory_client.openai_format import to_llm_dict
    from memory_client.rounds import Memory
    from memory_client.turns import last_messages


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'memory_client' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ActiveContextPolicyConfig",
    "AgentCallMsg",
    "AgentConfigurationError",
    "ApiError",
    "Attachment",
    "AttachmentType",
    "AuthenticationError",
    "BackwardPackingConfig",
    "CompactionConfig",
    "CompactionEvent",
    "ConflictError",
    "Conversation",
    "ConversationMemory",
    "FactExtractionError",
    "FactExtractionTimeout",
    "KGMemory",
    "ManagedConversationMemory",
    "ManagedMemoryConfig",
    "Memory",
    "MemoryClientError",
    "MemoryConfigError",
    "MemoryFileError",
    "MemoryFiles",
    "MemoryManager",
    "MemoryResetEvent",
    "Message",
    "MessageContent",
    "MessageError",
    "NotFoundError",
    "Post",
    "RemoteConversationMemory",
    "RemoteKGMemory",
    "RemoteManagedConversationMemory",
    "Round",
    "SearchQueryError",
    "SharedMemoryEntry",
    "SlidingWindowConfig",
    "SummarizationConfig",
    "ToolCallMsg",
    "ToolTruncationConfig",
    "fact_to_dict",
    "last_messages",
    "to_llm_dict",
]
