"""The integration examples, copied out of docs/integrations.md and run as a user would run them.

Each runs in its own Python process against the live server (MEMSITE_URL / MEMSITE_API_KEY) and
the scripted OpenAI-compatible server (OPENAI_BASE_URL), from the repository root.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Tenant
from tests.llm_server import Reply, ToolCall, ToolCallsReply

ROOT = Path(__file__).resolve().parents[3]


def example(integration: str) -> str:
    """The first python block of the docs/integrations.md section under `<!-- integration: NAME -->`."""
    document = (ROOT / "docs" / "integrations.md").read_text()
    marker = f"<!-- integration: {integration} -->\n###"
    assert marker in document, f"docs/integrations.md has no section for {integration}"
    section = document.split(marker, 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None
    return found.group(1)


@pytest.fixture
def run_example(server_url: str, client_tenant: Tenant, llm_server):
    def run(integration: str) -> str:
        env = {
            **os.environ,
            "MEMSITE_URL": server_url,
            "MEMSITE_API_KEY": client_tenant.key,
            "OPENAI_BASE_URL": llm_server.base_url,
            "OPENAI_API_KEY": "sk-example",
        }
        env.pop("OPENAI_AGENTS_DISABLE_TRACING", None)  # the example itself must keep traces from OpenAI
        done = subprocess.run(
            [sys.executable, "-c", example(integration)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        # What a new user would see besides the output: no deprecation warning, no failed trace export.
        assert done.stderr == "", done.stderr
        return done.stdout

    return run


def test_the_openai_agents_example_runs_and_its_second_run_sees_the_first(run_example, llm_server):
    llm_server.script(
        ToolCallsReply([ToolCall("get_weather", json.dumps({"city": "Oslo"}), id="call_oslo")]),
        Reply("It is 4 °C and raining in Oslo."),
        Reply("You asked about Oslo."),
    )

    output = run_example("openai-agents")

    assert output.splitlines()[0] == "You asked about Oslo."
    assert "'call_id': 'call_oslo'" in output
    second = llm_server.requests[-1]["messages"]
    assert [message["role"] for message in second] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert second[2]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_the_langchain_example_runs_and_its_second_call_sees_the_first(run_example, llm_server):
    llm_server.script(Reply("Nice to meet you, Ada."), Reply("You live in Oslo."))

    output = run_example("langchain")

    assert output.splitlines() == [
        "You live in Oslo.",
        "HumanMessage Hello, I am Ada and I live in Oslo.",
        "AIMessage Nice to meet you, Ada.",
        "HumanMessage Where do I live?",
        "AIMessage You live in Oslo.",
    ]
    assert llm_server.requests[-1]["messages"][:2] == [
        {"role": "user", "content": "Hello, I am Ada and I live in Oslo."},
        {"role": "assistant", "content": "Nice to meet you, Ada."},
    ]


def test_the_langgraph_example_runs_and_its_second_invocation_finds_the_memory(run_example):
    output = run_example("langgraph")

    assert output.splitlines() == ["['Ada prefers window seats']", "[('memories', 'ada')]"]
