"""Stored message -> the dict an LLM API receives (defined in memory_client.vocabulary.messages)."""

from memory_client.vocabulary.messages import to_llm_dict, to_openai_message

__all__ = ["to_llm_dict", "to_openai_message"]
