"""Python client for memsite: marsys 0.2.1's memory API, kept on a memsite server.

from memory_client import MemoryManager
memory = MemoryManager(description="You are helpful")  # MEMSITE_URL / MEMSITE_API_KEY
memory.add(role="user", content="Hello")
memory.retrieve_all()
"""

from memory_client.errors import (
    ApiError,
    AuthenticationError,
    ConflictError,
    MemoryClientError,
    MessageError,
    NotFoundError,
)
from memory_client.memory import ConversationMemory, MemoryManager, RemoteConversationMemory
from memory_client.messages import AgentCallMsg, Message, ToolCallMsg
from memory_client.openai_format import to_llm_dict

__all__ = [
    "AgentCallMsg",
    "ApiError",
    "AuthenticationError",
    "ConflictError",
    "ConversationMemory",
    "MemoryClientError",
    "MemoryManager",
    "Message",
    "MessageError",
    "NotFoundError",
    "RemoteConversationMemory",
    "ToolCallMsg",
    "to_llm_dict",
]
