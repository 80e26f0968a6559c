"""What the memsite server and its client both speak, defined once: stdlib only.

- `messages`: the stored message's fields and their conversion to what an LLM API receives;
- `conversation`: round states, shared-memory scopes, attachment types and their ids;
- `config`: the managed-memory settings (names, defaults, derived values);
- `wire`: the JSON bodies the server sends (errors, events, the served context, MCP answers).

The server imports these modules and nothing else of `memory_client` (an import-linter
contract in `make lint` keeps it so): importing them loads neither HTTP code nor the client.
"""
