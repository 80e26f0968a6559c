"""The TypeScript client (clients/typescript/) against a live server.

The package is copied out of the checkout and packed once per test session with `npm pack` (its
prepack script builds dist/esm and dist/cjs with tsc), beside the node_modules `make test`
installs from the committed lock file with `npm ci`: nothing is fetched here and nothing is
written into the checkout. Then:

- test/types.ts, a TypeScript project's use of every entry point, type-checks against the built
  declarations; then one node process runs every test file of clients/typescript/test/ (node's
  own test runner) against the live server, with the compaction and search jobs the server
  queues run at once by in-process workers and the scripted LLM server as the server's LLM;
- the tarball is installed into an empty project (`npm install --offline`): it brings no
  dependency, and a script using both its ES module and its CommonJS build works against the
  live server; the README's TypeScript quickstart is type-checked there and runs as written;
- the examples of clients/typescript/README.md and docs/integrations.md run in the package's
  own directory, where the frameworks they use are installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memory_app.compaction import services as compaction
from memory_app.jobs import JobKind
from memory_app.search import services as search_index
from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey
from tests.conftest import Tenant
from tests.job_dispatch import InlineWorker
from tests.llm_server import Reply, ToolCall, ToolCallsReply

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "clients" / "typescript"
HERE = Path(__file__).parent
COPIED = ("src", "test", "scripts", "package.json", "package-lock.json", "tsconfig.json", "README.md")
NODE_TIMEOUT = 240


def run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=NODE_TIMEOUT, check=False)
    assert done.returncode == 0, f"{' '.join(argv)} failed in {cwd}:\n{done.stdout[-6000:]}\n{done.stderr[-4000:]}"
    return done


@dataclass
class Packed:
    directory: Path  # the package's copy, built, with the checkout's node_modules
    tarball: Path
    manifest: dict[str, Any]


@pytest.fixture(scope="session")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Packed:
    installed = PACKAGE / "node_modules" / ".package-lock.json"
    assert installed.exists(), "clients/typescript/node_modules is missing: `make test` installs it (npm ci)"
    directory = tmp_path_factory.mktemp("typescript-client") / "package"
    directory.mkdir()
    for name in COPIED:
        source = PACKAGE / name
        if source.is_dir():
            shutil.copytree(source, directory / name)
        else:
            shutil.copy2(source, directory / name)
    (directory / "node_modules").symlink_to(PACKAGE / "node_modules", target_is_directory=True)
    out = tmp_path_factory.mktemp("typescript-tarball")
    done = run(["npm", "pack", "--json", "--pack-destination", str(out)], cwd=directory)
    manifest = json.loads(done.stdout[done.stdout.index("[") :])[0]
    return Packed(directory=directory, tarball=out / manifest["filename"], manifest=manifest)


@pytest.fixture
def workers(run_jobs_inline: Callable[[JobKind], InlineWorker], live_server: Any, llm_server: Any) -> None:
    """Compaction and index jobs start at once on a thread, as a worker would run them."""
    for kind in (compaction.JOB, search_index.JOB):
        run_jobs_inline(kind).background = True


@pytest.fixture
def node_env(server_url: str, client_tenant: Tenant) -> dict[str, str]:
    _, admin_key = tenancy.api_key_create(team=client_tenant.team, name="ts-admin", role=ApiKey.Role.ADMIN)
    return {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "MEMSITE_URL": server_url,
        "MEMSITE_API_KEY": client_tenant.key,
        "MEMSITE_ADMIN_KEY": admin_key,
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
        "NO_COLOR": "1",
    }


def tap_counts(output: str) -> dict[str, int]:
    found = re.findall(r"^# (tests|pass|fail|skipped|todo|cancelled) (\d+)$", output, re.M)
    return {name: int(value) for name, value in found}


def declared_tests() -> int:
    """The `test(...)` calls of the test files: every one must run (none skipped, none lost)."""
    return sum(len(re.findall(r"^\s*test\(", path.read_text(), re.M)) for path in (PACKAGE / "test").glob("*.test.mjs"))


def test_the_typescript_client_passes_its_node_tests_against_a_live_server(
    packed: Packed, node_env: dict[str, str], workers: None, record_property: Callable[[str, Any], None]
):
    # A TypeScript project's use of every entry point type-checks against the packed declarations.
    run(["node", "node_modules/typescript/bin/tsc", "-p", "test/tsconfig.json"], cwd=packed.directory)
    done = subprocess.run(
        ["node", "--test", "--test-reporter=tap", "test/all.test.mjs"],
        cwd=packed.directory,
        env=node_env,
        capture_output=True,
        text=True,
        timeout=NODE_TIMEOUT,
        check=False,
    )
    counts = tap_counts(done.stdout)
    record_property("node_tests", counts.get("tests"))
    print(f"node --test: {counts}")

    assert done.returncode == 0, done.stdout[-12000:] + done.stderr[-4000:]
    assert counts["fail"] == 0 and counts["skipped"] == 0 and counts["todo"] == 0 and counts["cancelled"] == 0
    assert counts["tests"] == counts["pass"] == declared_tests()


def readme_typescript(document: Path, marker: str) -> str:
    """The ```ts block after `<!-- marker -->` in a markdown file."""
    text = document.read_text()
    assert f"<!-- {marker} -->" in text, f"{document.name} has no <!-- {marker} -->"
    found = re.search(r"```ts\n(.*?)```", text.split(f"<!-- {marker} -->", 1)[1], re.S)
    assert found is not None
    return found.group(1)


def readme_command(prefix: str) -> list[str]:
    """The README's command (in backquotes) that starts with `prefix`, up to its `&&`."""
    text = (ROOT / "README.md").read_text().split("### 4. With TypeScript", 1)[1]
    [found] = [command for command in re.findall(r"`([^`]+)`", text.replace("\n", " ")) if command.startswith(prefix)]
    return found.split(" && ")[0].split()


def test_the_packed_tarball_installs_into_an_empty_project_with_no_dependency_and_works(
    packed: Packed, node_env: dict[str, str], workers: None, tmp_path: Path
):
    files = {entry["path"] for entry in packed.manifest["files"]}
    assert {"package.json", "README.md", "dist/esm/index.js", "dist/esm/index.d.ts", "dist/cjs/index.js"} <= files
    assert {"dist/cjs/package.json", "dist/esm/adapters/agents.d.ts", "dist/cjs/adapters/anthropic-memory.js"} <= files
    assert not [name for name in files if name.startswith(("src/", "test/", "scripts/", "node_modules/"))]

    project = tmp_path / "consumer"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "consumer", "private": True, "type": "module"}))
    run(["npm", "install", "--offline", "--no-audit", "--no-fund", str(packed.tarball)], cwd=project, env=node_env)
    installed = sorted(path.name for path in (project / "node_modules").iterdir() if not path.name.startswith("."))
    assert installed == ["memsite-client"]  # zero runtime dependencies; the adapters' frameworks are optional peers

    shutil.copy(HERE / "smoke.mjs", project / "smoke.mjs")
    shutil.copy(HERE / "smoke.cjs", project / "smoke.cjs")
    report = json.loads(run(["node", "smoke.mjs"], cwd=project, env=node_env).stdout)
    assert Path(report["resolved"]).is_relative_to(project / "node_modules" / "memsite-client")
    assert report["context"] == [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What is the weather in Oslo?"},
    ]
    assert report["cjs"] == report["context"]

    # The README's quickstart, type-checked against the installed declarations, then run.
    (project / "quickstart.ts").write_text(readme_typescript(ROOT / "README.md", "typescript: quickstart"))
    tsc = PACKAGE / "node_modules" / "typescript" / "bin" / "tsc"
    command = readme_command("npx tsc ")
    run(["node", str(tsc), *command[2:]], cwd=project, env=node_env)
    output = run(["node", "quickstart.js"], cwd=project, env=node_env).stdout.splitlines()
    assert re.fullmatch(r"[0-9a-f-]{36}", output[0])
    assert output[1:] == [
        "system: You are a weather assistant.",
        "user: What is the weather in Oslo?",
        'assistant: [get_weather {"city":"Oslo"}]',
        'tool: {"temp_c":4,"sky":"rain"}',
        "assistant: It is 4 °C and raining in Oslo.",
        "5 messages",
    ]


def integration_example(name: str) -> str:
    """The ```js block of the docs/integrations.md section under `<!-- integration: NAME -->`."""
    document = (ROOT / "docs" / "integrations.md").read_text()
    marker = f"<!-- integration: {name} -->\n###"
    assert marker in document, f"docs/integrations.md has no section for {name}"
    found = re.search(r"```js\n(.*?)```", document.split(marker, 1)[1], re.S)
    assert found is not None
    return found.group(1)


def run_example(packed: Packed, name: str, env: dict[str, str]) -> list[str]:
    """The example as an ES module in the package's directory, where the frameworks are installed."""
    script = packed.directory / f"example-{name}.mjs"
    script.write_text(integration_example(name))
    return run(["node", script.name], cwd=packed.directory, env=env).stdout.splitlines()


def test_the_typescript_integration_examples_run_as_written(
    packed: Packed, node_env: dict[str, str], workers: None, llm_server: Any, client_tenant: Tenant
):
    env = {**node_env, "OPENAI_BASE_URL": llm_server.base_url, "OPENAI_API_KEY": "sk-example"}
    llm_server.script(
        ToolCallsReply([ToolCall("get_weather", json.dumps({"city": "Oslo"}), id="call_oslo")]),
        Reply("It is 4 °C and raining in Oslo."),
        Reply("You asked about Oslo."),
    )

    output = run_example(packed, "typescript-agents", env)

    assert output[0] == "You asked about Oslo."
    items = [json.loads(line) for line in output[1:]]
    assert [item["role"] if item.get("type", "message") == "message" else item["type"] for item in items] == [
        "user",
        "function_call",
        "function_call_result",
        "assistant",
        "user",
        "assistant",
    ]
    assert items[1]["callId"] == "call_oslo"
    second = llm_server.requests[-1]["messages"]
    assert [message["role"] for message in second] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert second[2]["tool_calls"][0]["function"]["name"] == "get_weather"

    llm_server.script(
        ToolCallsReply([ToolCall("remember", json.dumps({"note": "The release freeze starts on Thursday."}))]),
        Reply("Noted: the freeze starts on Thursday."),
    )

    output = run_example(packed, "typescript-ai", env)

    assert output[0] == "Noted: the freeze starts on Thursday."
    [result] = json.loads(output[1])
    assert result["remembered"] is True
    found = client_tenant.client.get("/api/v1/sessions/", {"external_id": "release-planner"}).json()["results"]
    stored = client_tenant.client.get(f"/api/v1/sessions/{found[0]['id']}/messages/").json()["results"]
    assert [(row["role"], row["name"], row["content"]) for row in stored] == [
        ("assistant", "Planner", "The release freeze starts on Thursday.")
    ]
