"""The memory-file MCP tools under gunicorn, driven by the official MCP Python SDK: the six commands,
a refused path, the history and a revert; a read key only views; another team finds nothing."""

from __future__ import annotations

from typing import Any

import pytest

from memory_app.memory_files.models import MemoryFile
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey
from tests.conftest import make_tenant
from tests.memory_app.mcp.conftest import Server, connect, run

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_an_agent_keeps_its_memory_files_through_the_mcp_tools(gunicorn: Server):
    tenant = make_tenant("alpha")
    reader = tenancy.api_key_create(team=tenant.team, name="reader", role=ApiKey.Role.READ)[1]
    stranger = make_tenant("beta")

    def memory(**arguments: Any) -> dict[str, Any]:
        return {"agent": "coder", **arguments}

    async def session() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with connect(gunicorn.mcp_url, tenant.key) as client:

            async def tool(name: str, arguments: dict[str, Any]) -> Any:
                return await client.call_tool(name, arguments)

            seen["create"] = await tool(
                "memory_file", memory(command="create", path="/memories/a.md", file_text="one\n")
            )
            seen["replace"] = await tool(
                "memory_file", memory(command="str_replace", path="/memories/a.md", old_str="one", new_str="two")
            )
            seen["insert"] = await tool(
                "memory_file", memory(command="insert", path="/memories/a.md", insert_line=1, insert_text="three")
            )
            seen["rename"] = await tool(
                "memory_file", memory(command="rename", old_path="/memories/a.md", new_path="/memories/b.md")
            )
            seen["view"] = await tool("memory_file", memory(command="view", path="/memories/b.md"))
            seen["refused"] = await tool("memory_file", memory(command="view", path="/memories/../b.md"))
            seen["history"] = await tool("memory_file_history", {"path": "/memories/b.md", "agent": "coder"})
            seen["revert"] = await tool(
                "memory_file_revert", {"path": "/memories/b.md", "agent": "coder", "version": 1}
            )
            seen["scratch"] = await tool("memory_file", memory(command="create", path="/memories/s.md", file_text="x"))
            seen["delete"] = await tool("memory_file", memory(command="delete", path="/memories/s.md"))
        async with connect(gunicorn.mcp_url, reader) as client:
            seen["read view"] = await client.call_tool("memory_file", memory(command="view", path="/memories"))
            seen["read create"] = await client.call_tool(
                "memory_file", memory(command="create", path="/memories/r.md", file_text="r")
            )
        async with connect(gunicorn.mcp_url, stranger.key) as client:
            seen["other view"] = await client.call_tool("memory_file", memory(command="view", path="/memories/b.md"))
            seen["other list"] = await client.call_tool("memory_file", memory(command="view", path="/memories"))
        return seen

    seen = run(session)

    def text(name: str) -> str:
        return seen[name].content[0].text

    assert text("create") == "File created successfully at: /memories/a.md"
    assert text("replace").startswith("The memory file has been edited.")
    assert text("insert") == "The file /memories/a.md has been edited."
    assert text("rename") == "Successfully renamed /memories/a.md to /memories/b.md"
    assert text("view").endswith("     1\ttwo\n     2\tthree\n     3\t")
    assert seen["refused"].is_error is True
    assert seen["refused"].structured_content["status"] == 400
    assert "'..'" in seen["refused"].structured_content["fields"]["path"][0]
    assert [row["action"] for row in seen["history"].structured_content["results"]] == [
        "rename",
        "edit",
        "edit",
        "create",
    ]
    assert seen["revert"].structured_content["version"] == 5
    assert text("delete") == "Successfully deleted /memories/s.md"
    assert "/memories/a.md" in text("read view")  # version 1 was at a.md: the revert moved it back
    assert seen["read create"].is_error is True
    assert seen["read create"].structured_content["error"] == "permission_denied"
    assert seen["other view"].structured_content["status"] == 404
    assert "a.md" not in text("other list") and "b.md" not in text("other list")
    live = MemoryFile.objects.get(team=tenant.team, deleted_at__isnull=True)
    assert (live.agent, live.path, live.content, live.version) == ("coder", "/memories/a.md", "one\n", 5)
