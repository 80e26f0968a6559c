"""Python client for memsite: marsys 0.2.1's memory API, kept on a memsite server.

from memory_client import MemoryManager
memory = MemoryManager(description="You are helpful")  # MEMSITE_URL / MEMSITE_API_KEY
memory.add(role="user", content="Hello")
memory.retrieve_all()
"""

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
    ApiError,
    AuthenticationError,
    ConflictError,
    FactExtractionError,
    FactExtractionTimeout,
    MemoryClientError,
    MemoryConfigError,
    MessageError,
    NotFoundError,
)
from memory_client.events import CompactionEvent, MemoryResetEvent
from memory_client.kg import KGMemory, RemoteKGMemory, fact_to_dict
from memory_client.managed import ManagedConversationMemory, RemoteManagedConversationMemory
from memory_client.manager import MemoryManager
from memory_client.memory import ConversationMemory, RemoteConversationMemory
from memory_client.messages import AgentCallMsg, Message, ToolCallMsg
from memory_client.openai_format import to_llm_dict
from memory_client.rounds import Memory

__all__ = [
    "ActiveContextPolicyConfig",
    "AgentCallMsg",
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
    "MemoryManager",
    "MemoryResetEvent",
    "Message",
    "MessageError",
    "NotFoundError",
    "Post",
    "RemoteConversationMemory",
    "RemoteKGMemory",
    "RemoteManagedConversationMemory",
    "Round",
    "SharedMemoryEntry",
    "SlidingWindowConfig",
    "SummarizationConfig",
    "ToolCallMsg",
    "ToolTruncationConfig",
    "fact_to_dict",
    "to_llm_dict",
]
