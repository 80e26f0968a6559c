"""Every tool's input schema, as the official MCP client lists it, checked by a JSON Schema validator.

MCP tool schemas are JSON Schema 2020-12. A union written as a list of types
(`"type": ["string", "null"]`) is valid JSON Schema, but some MCP hosts and LLM tool-call
converters read `type` as one string and drop or break such a property, so unions are `anyOf`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.conftest import make_tenant
from tests.memory_app.mcp.conftest import connect, run
from tests.memory_app.mcp.test_http import WEATHER_TURN

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def listed_schemas(live_server: Any) -> dict[str, dict[str, Any]]:
    """{tool name: input schema} as tools/list answers it through the official client."""
    tenant = make_tenant("schemas")

    async def listing() -> Any:
        async with connect(f"{live_server.url}/mcp", tenant.key) as client:
            return (await client.list_tools()).tools

    return {tool.name: tool.input_schema for tool in run(listing)}


def type_lists(schema: Any, path: str = "") -> Iterator[str]:
    """The path of every `type` whose value is a list, anywhere in the schema."""
    if isinstance(schema, dict):
        if isinstance(schema.get("type"), list):
            yield path or "/"
        for key, value in schema.items():
            yield from type_lists(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for index, value in enumerate(schema):
            yield from type_lists(value, f"{path}/{index}")


def test_every_tool_schema_is_valid_json_schema_and_writes_unions_as_any_of(listed_schemas):
    assert "memory_append" in listed_schemas
    for name, schema in listed_schemas.items():
        Draft202012Validator.check_schema(schema)  # raises SchemaError naming what is wrong
        assert list(type_lists(schema)) == [], name


def test_memory_append_content_is_text_parts_or_null_and_nothing_else(listed_schemas):
    validator = Draft202012Validator(listed_schemas["memory_append"])

    def problems(content: Any) -> list[str]:
        arguments = {"external_id": "t-1", "messages": [{"role": "user", "content": content}]}
        return [error.message for error in validator.iter_errors(arguments)]

    assert problems("My printer is out of toner.") == []
    assert problems([{"type": "text", "text": "What is in this picture?"}]) == []
    assert problems(None) == []  # an assistant message that only calls tools
    assert problems(42) != []
    assert problems({"text": "not a list"}) != []
    assert not list(validator.iter_errors({"external_id": "t-1", "messages": WEATHER_TURN}))
