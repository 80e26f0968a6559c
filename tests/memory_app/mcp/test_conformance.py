"""The official MCP conformance suite (@modelcontextprotocol/conformance) against `/mcp`.

The suite's client sends no headers of its own, so it reaches the live server through a local
proxy that adds the Bearer key (node_tools.bearer_proxy). Every server scenario of the suite is
either run here or listed in NOT_APPLICABLE with the reason; a scenario a newer suite adds fails
test_every_server_scenario_of_the_suite_is_run_or_set_aside_with_a_reason until it is classified.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_tenant
from tests.memory_app.mcp.node_tools import CONFORMANCE, bearer_proxy, installed, node22

APPLICABLE = ("server-initialize", "ping", "tools-list", "dns-rebinding-protection")
_TEST_TOOLS = "calls a test tool of the suite's reference server (test_simple_text, ...), which memsite does not have"
_NO_STREAM = "the server asks the client something mid-call, over a stream; /mcp answers each POST with JSON"
_NO_CAPABILITY = "a capability memsite does not declare (it serves tools only)"
NOT_APPLICABLE: dict[str, str] = {
    "logging-set-level": _NO_CAPABILITY + ": logging",
    "completion-complete": _NO_CAPABILITY + ": completions",
    "tools-call-simple-text": _TEST_TOOLS,
    "tools-call-image": _TEST_TOOLS,
    "tools-call-audio": _TEST_TOOLS,
    "tools-call-embedded-resource": _TEST_TOOLS,
    "tools-call-mixed-content": _TEST_TOOLS,
    "tools-call-with-logging": _TEST_TOOLS + "; and logging",
    "tools-call-error": _TEST_TOOLS + " (test_error_handling); tool errors are tested in test_http.py",
    "tools-call-with-progress": _TEST_TOOLS + "; and progress notifications need a stream",
    "tools-call-sampling": _NO_STREAM + " (sampling)",
    "tools-call-elicitation": _NO_STREAM + " (elicitation)",
    "elicitation-sep1034-defaults": _NO_STREAM + " (elicitation)",
    "elicitation-sep1330-enums": _NO_STREAM + " (elicitation)",
    "json-schema-2020-12": "lists the suite's json_schema_2020_12_tool; memsite's schemas are checked by "
    "test_tool_schemas.py",
    "server-sse-polling": "SSE polling of a stateful session: /mcp is stateless JSON (the scenario makes no "
    "check against such a server, only a warning)",
    "server-sse-multiple-streams": "several SSE streams of one session: as above",
    "resources-list": _NO_CAPABILITY + ": resources",
    "resources-read-text": _NO_CAPABILITY + ": resources",
    "resources-read-binary": _NO_CAPABILITY + ": resources",
    "resources-templates-read": _NO_CAPABILITY + ": resources",
    "resources-subscribe": _NO_CAPABILITY + ": resources",
    "resources-unsubscribe": _NO_CAPABILITY + ": resources",
    "prompts-list": _NO_CAPABILITY + ": prompts",
    "prompts-get-simple": _NO_CAPABILITY + ": prompts",
    "prompts-get-with-args": _NO_CAPABILITY + ": prompts",
    "prompts-get-embedded-resource": _NO_CAPABILITY + ": prompts",
    "prompts-get-with-image": _NO_CAPABILITY + ": prompts",
}


def conformance(*arguments: str) -> list[str]:
    return [node22(), installed(CONFORMANCE), *arguments]


def test_every_server_scenario_of_the_suite_is_run_or_set_aside_with_a_reason():
    listed = subprocess.run(conformance("list", "--server"), capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    scenarios = re.findall(r"^\s+- (\S+)", listed.stdout, re.MULTILINE)

    assert sorted(scenarios) == sorted([*APPLICABLE, *NOT_APPLICABLE])


def checks_of(results: Path) -> list[dict[str, Any]]:
    """The checks a scenario wrote (results/<scenario>/server-<scenario>-<time>/checks.json)."""
    files = list(results.glob("*/checks.json"))
    assert len(files) == 1, list(results.iterdir())
    return json.loads(files[0].read_text())


@pytest.mark.django_db(transaction=True)
def test_the_applicable_scenarios_of_the_conformance_suite_pass_on_mcp(live_server: Any, tmp_path: Path):
    tenant = make_tenant("conformance")

    with bearer_proxy(live_server.url, tenant.key) as url:
        # One process per scenario, all at once: each is mostly Node starting up.
        runs = {
            scenario: subprocess.Popen(
                conformance("server", "--url", f"{url}/mcp", "--scenario", scenario, "-o", str(tmp_path / scenario)),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for scenario in APPLICABLE
        }
        outputs = {scenario: process.communicate(timeout=120)[0] for scenario, process in runs.items()}

    for scenario, process in runs.items():
        assert process.returncode == 0, outputs[scenario]
        checks = checks_of(tmp_path / scenario)
        statuses = [check["status"] for check in checks]
        assert "SUCCESS" in statuses and set(statuses) <= {"SUCCESS", "INFO"}, (scenario, checks)
