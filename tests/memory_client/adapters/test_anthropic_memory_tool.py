"""MemsiteMemoryTool run by the Anthropic SDK's own tool runner, against a scripted Messages API.

The fake model asks for each of the memory tool's six commands in turn, and for a path the rules
refuse; the test reads what the SDK sent back to the model for each, and what the server stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from memory_app.memory_files.models import MemoryFile, MemoryFileVersion
from memory_client.adapters.anthropic_memory import MemsiteMemoryTool
from tests.anthropic_server import ScriptedMessagesServer, Text, ToolUse
from tests.conftest import Tenant


@pytest.fixture
def messages_api() -> Iterator[ScriptedMessagesServer]:
    server = ScriptedMessagesServer().start()
    yield server
    server.stop()


def memory(**command: Any) -> ToolUse:
    return ToolUse("memory", command)


def test_the_sdks_tool_runner_drives_every_command_through_memsite(
    messages_api: ScriptedMessagesServer, server_url: str, client_tenant: Tenant
):
    messages_api.script(
        memory(command="view", path="/memories"),
        memory(command="create", path="/memories/deploy.md", file_text="needs one approval\nrun migrations\n"),
        memory(command="str_replace", path="/memories/deploy.md", old_str="one approval", new_str="two approvals"),
        memory(command="insert", path="/memories/deploy.md", insert_line=0, insert_text="# Deploy"),
        memory(command="create", path="/memories/../etc/passwd", file_text="root"),
        memory(command="str_replace", path="/memories/deploy.md", old_str="no such text", new_str="x"),
        memory(command="rename", old_path="/memories/deploy.md", new_path="/memories/runbooks/deploy.md"),
        memory(command="view", path="/memories/runbooks/deploy.md"),
        memory(command="create", path="/memories/scratch.md", file_text="temp"),
        memory(command="delete", path="/memories/scratch.md"),
        Text("Noted: the deploy needs two approvals."),
    )
    tool = MemsiteMemoryTool(agent="deployer", base_url=server_url, api_key=client_tenant.key)
    client = anthropic.Anthropic(api_key="test-key", base_url=messages_api.base_url, max_retries=0)

    final = client.beta.messages.tool_runner(
        model="claude-sonnet-5-5",
        max_tokens=1024,
        tools=[tool],
        messages=[{"role": "user", "content": "Remember that the deploy needs two approvals."}],
    ).until_done()
    tool.close()

    assert final.content[0].text == "Noted: the deploy needs two approvals."
    assert messages_api.requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = messages_api.tool_results()
    answers = [(result.get("is_error", False), result["content"]) for result in results]
    assert answers[0] == (
        False,
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n4K\t/memories",
    )
    assert answers[1] == (False, "File created successfully at: /memories/deploy.md")
    assert answers[2][0] is False
    assert answers[2][1].startswith("The memory file has been edited.") and "1\tneeds two approvals" in answers[2][1]
    assert answers[3] == (False, "The file /memories/deploy.md has been edited.")
    refused, content = answers[4]
    assert refused is True
    assert "path: may not contain '..'" in str(content)
    assert answers[5] == (
        True,
        "Error: No replacement was performed, old_str `no such text` did not appear verbatim in /memories/deploy.md.",
    )
    assert answers[6] == (False, "Successfully renamed /memories/deploy.md to /memories/runbooks/deploy.md")
    assert answers[7] == (
        False,
        "Here's the content of /memories/runbooks/deploy.md with line numbers:\n"
        "     1\t# Deploy\n     2\tneeds two approvals\n     3\trun migrations\n     4\t",
    )
    assert answers[9] == (False, "Successfully deleted /memories/scratch.md")

    live = MemoryFile.objects.get(team=client_tenant.team, deleted_at__isnull=True)
    assert (live.agent, live.path, live.version) == ("deployer", "/memories/runbooks/deploy.md", 4)
    assert live.content == "# Deploy\nneeds two approvals\nrun migrations\n"
    actions = list(MemoryFileVersion.objects.filter(file=live).order_by("version").values_list("action", flat=True))
    assert actions == ["create", "edit", "edit", "rename"]
    assert not MemoryFile.objects.filter(path__contains="etc").exists()
