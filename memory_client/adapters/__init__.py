"""memsite memory behind the interfaces of the agent frameworks people already use.

- `memory_client.adapters.openai_agents.MemsiteSession`: an OpenAI Agents SDK `Session`;
- `memory_client.adapters.langchain.MemsiteChatMessageHistory`: a LangChain `BaseChatMessageHistory`;
- `memory_client.adapters.langgraph.MemsiteStore`: a LangGraph `BaseStore` over memsite's facts;
- `memory_client.adapters.anthropic_memory.MemsiteMemoryTool`: the Anthropic SDK's memory tool
  (`BetaAbstractMemoryTool`) over memsite's memory files;
- `memory_client.adapters.google_adk.MemsiteMemoryService`: a Google ADK `BaseMemoryService` over
  memsite's sessions and search.

Each module imports its framework, so import the one you use; this package imports none of them,
and `import memory_client` never needs a framework installed.
"""
