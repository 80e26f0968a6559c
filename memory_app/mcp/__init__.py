"""The MCP server: tools over the REST operations (api.py is the endpoint, tools.py the tools)."""
