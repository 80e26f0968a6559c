"""memory_append carries the time each message was said (`occurred_at`), as the REST append does,
and tells models so in its input schema."""

from __future__ import annotations

import pytest
from django.utils.dateparse import parse_datetime

from memory_app.conversations.models import Message, Session
from tests.conftest import Tenant
from tests.memory_app.mcp.rpc import call_tool, mcp_client, request

pytestmark = pytest.mark.django_db


def test_memory_append_stores_the_time_a_message_was_said(tenant: Tenant) -> None:
    result = call_tool(
        mcp_client(tenant.key),
        "memory_append",
        {
            "external_id": "diary",
            "create": True,
            "messages": [
                {"role": "user", "content": "went kayaking", "occurred_at": "2025-07-14T18:30:00+02:00"},
                {"role": "assistant", "content": "nice"},
            ],
        },
    )

    assert result["isError"] is False, result
    stored = Message.objects.filter(session_id=result["structuredContent"]["session_id"]).order_by("seq")
    assert [m.occurred_at for m in stored] == [parse_datetime("2025-07-14T16:30:00Z"), None]


def test_memory_append_refuses_a_naive_time_and_stores_nothing(tenant: Tenant) -> None:
    result = call_tool(
        mcp_client(tenant.key),
        "memory_append",
        {
            "external_id": "diary",
            "create": True,
            "messages": [{"role": "user", "content": "x", "occurred_at": "2025-07-14T18:30:00"}],
        },
    )

    assert result["isError"] is True
    assert "messages[0].occurred_at" in result["content"][0]["text"]
    assert not Session.objects.filter(team=tenant.team, external_id="diary").exists()


def test_memory_append_schema_describes_occurred_at(tenant: Tenant) -> None:
    tools = request(mcp_client(tenant.key), "tools/list").json()["result"]["tools"]
    append = next(tool for tool in tools if tool["name"] == "memory_append")

    message = append["inputSchema"]["properties"]["messages"]["items"]
    assert message["properties"]["occurred_at"]["format"] == "date-time"
