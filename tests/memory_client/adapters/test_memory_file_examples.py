"""The memory-file examples of docs/integrations.md, run as a user would run them: each in its own
Python process against the live server, the Anthropic one against a scripted Messages API."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from memory_app.memory_files.models import MemoryFile
from tests.anthropic_server import ScriptedMessagesServer, Text, ToolUse
from tests.conftest import Tenant
from tests.memory_client.adapters.test_readme_examples import ROOT, example


@pytest.fixture
def messages_api() -> Iterator[ScriptedMessagesServer]:
    server = ScriptedMessagesServer().start()
    yield server
    server.stop()


def run(integration: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", example(integration)],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_memory_files_and_anthropic_examples_run(
    server_url: str, client_tenant: Tenant, messages_api: ScriptedMessagesServer
):
    memsite = {"MEMSITE_URL": server_url, "MEMSITE_API_KEY": client_tenant.key}

    output = run("memory-files", memsite)

    assert output.startswith("File created successfully at: /memories/notes/oslo.md\n")
    assert "2\tShe prefers aisle seats." in output
    assert "400 {'path': [\"may not contain '..', '.' or an empty name ('//')\"]}" in output
    assert "[(2, 'edit', 'key:" in output and "(1, 'create', 'key:" in output
    assert "-She prefers window seats.\n+She prefers aisle seats." in output
    assert output.rstrip().endswith("     2\tShe prefers window seats.")
    notes = MemoryFile.objects.get(team=client_tenant.team, agent="researcher", path="/memories/notes/oslo.md")
    assert (notes.version, notes.content) == (3, "Ada lives in Oslo.\nShe prefers window seats.\n")

    messages_api.script(
        ToolUse("memory", {"command": "view", "path": "/memories"}),
        ToolUse("memory", {"command": "create", "path": "/memories/deploy.md", "file_text": "Two approvals.\n"}),
        Text("I will remember that the deploy needs two approvals."),
    )
    anthropic_env = {"ANTHROPIC_BASE_URL": messages_api.base_url, "ANTHROPIC_API_KEY": "sk-ant-example"}

    output = run("anthropic-memory", {**memsite, **anthropic_env})

    lines = output.splitlines()
    assert lines[0] == "I will remember that the deploy needs two approvals."
    assert "/memories/deploy.md" in output and "/memories/notes/oslo.md" in output
    assert messages_api.tool_results()[1]["content"] == "File created successfully at: /memories/deploy.md"
    assert MemoryFile.objects.filter(team=client_tenant.team, agent="researcher").count() == 2
