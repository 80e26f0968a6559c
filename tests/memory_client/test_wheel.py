"""The client as its own distribution, built and installed with the documented commands: the wheel
holds every module of memory_client/ and nothing else, declares its dependencies and one extra
per framework, and, installed in a clean venv with nothing but its dependencies, works against a
live server without Django or any agent framework.

The wheel and the venv are made once per test session (a few seconds: the build backend and the
dependencies come from the package index); nothing is written into the source tree.
"""

from __future__ import annotations

import email.message
import email.parser
import json
import re
import shlex
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from memory_app.jobs import JobKind
from memory_app.search import services as search_index
from tests.conftest import Tenant
from tests.job_dispatch import InlineWorker

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memory_client"
SMOKE_SCRIPT = Path(__file__).with_name("wheel_smoke.py")
# What a build could leave behind in the checkout (hatchling writes none of it; this keeps it so).
ARTIFACTS = ("build", "dist", "*.egg-info", "*.whl", "*.tar.gz")
FRAMEWORK_EXTRAS = {"openai-agents", "langchain", "langgraph", "google-adk", "anthropic", "mcp"}


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, **kwargs)
    assert result.returncode == 0, f"{shlex.join(argv)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def readme_install_commands() -> list[list[str]]:
    """The shell commands of the "Install the client in your agent project" section of
    docs/integrations.md (the README links it)."""
    document = (ROOT / "docs" / "integrations.md").read_text()
    section = document.split("<!-- integration: install -->", 1)[1].split("<!-- integration:", 1)[0]
    lines = [line for block in re.findall(r"```bash\n(.*?)```", section, re.DOTALL) for line in block.splitlines()]
    return [shlex.split(line, comments=True) for line in lines if line.strip()]


def readme_command(prefix: str) -> list[str]:
    """The documented install command that starts with `prefix` (and is not an extras variant)."""
    found = [argv for argv in readme_install_commands() if shlex.join(argv).startswith(prefix) and "[" not in argv[-1]]
    assert len(found) == 1, f"the install section of docs/integrations.md shows {found} for {prefix}"
    return found[0]


def artifacts_in_checkout() -> set[Path]:
    """Build leftovers in the package directory and at the repository root."""
    found: set[Path] = set()
    for pattern in ARTIFACTS:
        found.update(PACKAGE.rglob(pattern))
        found.update(ROOT.glob(pattern))
    return found


def wheel_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def package_files(files: dict[str, bytes]) -> dict[str, bytes]:
    """A wheel's files outside its .dist-info (whose WHEEL file names the builder's version)."""
    return {name: data for name, data in files.items() if ".dist-info/" not in name}


def metadata(wheel: Path) -> email.message.Message:
    files = wheel_files(wheel)
    [name] = [name for name in files if name.endswith(".dist-info/METADATA")]
    return email.parser.Parser().parsestr(files[name].decode())


def pins(requirements_file: str) -> dict[str, str]:
    """name -> version of the `name==version` lines of a requirements file."""
    pinned: dict[str, str] = {}
    for line in (ROOT / requirements_file).read_text().splitlines():
        requirement = line.split("#", 1)[0].strip()
        if "==" in requirement:
            name, version = requirement.split("==", 1)
            pinned[Requirement(name).name.lower()] = version.strip()
    return pinned


@dataclass
class Built:
    wheel: Path
    artifacts_before: set[Path]
    artifacts_after: set[Path]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The wheel, built by the documented command with the output directory moved to a tmp dir."""
    out = tmp_path_factory.mktemp("wheel")
    argv = readme_command("python -m build ")
    argv = [sys.executable, *(str(out) if arg == "dist" else arg for arg in argv[1:])]
    before = artifacts_in_checkout()
    run(argv, cwd=ROOT)
    [wheel] = out.glob("*.whl")
    return Built(wheel=wheel, artifacts_before=before, artifacts_after=artifacts_in_checkout())


@pytest.fixture(scope="session")
def client_python(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The interpreter of a clean venv (no system site packages) where the documented `pip install`
    of the wheel was run. The venv has no pip of its own: this one installs into it (`--python`),
    which saves the seconds ensurepip takes."""
    venv = tmp_path_factory.mktemp("client-venv")
    run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(venv)])
    python = venv / "bin" / "python"
    argv = readme_command("pip install dist/")
    assert argv[-1] == f"dist/{built.wheel.name}", "the documentation installs another wheel than the build makes"
    run([sys.executable, "-m", "pip", "--python", str(python), *argv[1:-1], str(built.wheel)])
    return python


@pytest.fixture
def background_indexer(run_jobs_inline: Callable[[JobKind], InlineWorker], live_server: Any) -> InlineWorker:
    """Index runs the live server queues start at once on a thread, as a search worker would."""
    worker = run_jobs_inline(search_index.JOB)
    worker.background = True
    return worker


def test_wheel_holds_every_client_module_and_nothing_else(built: Built):
    names = set(wheel_files(built.wheel))
    modules = {
        f"memory_client/{path.relative_to(PACKAGE).as_posix()}"
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
    }
    shipped = {name for name in names if ".dist-info/" not in name}

    assert modules <= shipped
    assert shipped - modules == {"memory_client/README.md", "memory_client/py.typed"}
    assert "memory_client/README.md" in shipped  # the package's own documentation travels with it
    assert not [name for name in names if not name.startswith(("memory_client/", "memsite_client-"))]


def test_building_leaves_nothing_in_the_checkout(built: Built):
    assert built.artifacts_after == built.artifacts_before


def test_wheel_declares_version_dependencies_extras_and_the_mcp_command(built: Built):
    meta = metadata(built.wheel)
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(text) for text in meta.get_all("Requires-Dist") or []]
    core = {req.name.lower(): req for req in requirements if req.marker is None}
    by_extra: dict[str, set[str]] = {}
    for req in requirements:
        for extra in FRAMEWORK_EXTRAS | {"all"}:
            if req.marker is not None and req.marker.evaluate({"extra": extra}):
                by_extra.setdefault(extra, set()).add(req.name.lower())
    entry_points = wheel_files(built.wheel)[f"memsite_client-{project['version']}.dist-info/entry_points.txt"]

    assert meta["Name"] == "memsite-client"
    assert meta["Version"] == project["version"]
    assert built.wheel.name == f"memsite_client-{project['version']}-py3-none-any.whl"
    assert meta["Requires-Python"] == ">=3.11"
    assert set(core) == {"httpx", "pyyaml"}  # nothing of the server, no framework
    assert set(meta.get_all("Provides-Extra") or []) == FRAMEWORK_EXTRAS | {"all"}
    assert by_extra == {
        "openai-agents": {"openai-agents"},
        "langchain": {"langchain-core"},
        "langgraph": {"langgraph"},
        "google-adk": {"google-adk"},
        "anthropic": {"anthropic"},
        "all": {"openai-agents", "langchain-core", "langgraph", "google-adk", "anthropic"},
    }  # `mcp` adds nothing: the stdio proxy needs only httpx
    assert "memsite-mcp = memory_client.mcp:main" in entry_points.decode()
    # The versions the server and the adapters' tests run with satisfy the declared ranges.
    pinned = pins("requirements.txt") | pins("requirements-dev.txt")
    for req in requirements:
        assert req.specifier.contains(pinned[req.name.lower()]), f"{req} excludes the tested {pinned[req.name.lower()]}"


def test_readme_extras_are_the_declared_ones(built: Built):
    declared = set(metadata(built.wheel).get_all("Provides-Extra") or [])
    shown = [argv[-1] for argv in readme_install_commands() if argv[-1].endswith("]")]

    assert shown  # the documentation shows how to ask for extras, from a path and from the wheel
    for target in shown:
        assert set(target[target.index("[") + 1 : -1].split(",")) <= declared


def test_pip_install_from_the_checkout_builds_the_same_package(built: Built, tmp_path: Path):
    """`pip install /path/to/memsite/memory_client` builds the wheel pip then installs: the same
    files as the documented wheel, byte for byte (the build is reproducible), and no leftovers."""
    assert readme_command("pip install /")[-1].endswith("/memsite/memory_client")
    before = artifacts_in_checkout()
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(tmp_path), "./memory_client"], cwd=ROOT)
    [wheel] = tmp_path.glob("*.whl")

    assert wheel.name == built.wheel.name
    assert package_files(wheel_files(wheel)) == package_files(wheel_files(built.wheel))
    assert artifacts_in_checkout() == before


def test_installed_wheel_works_against_a_live_server_without_django(
    client_python: Path, server_url: str, client_tenant: Tenant, background_indexer: InlineWorker
):
    env = {"MEMSITE_URL": server_url, "MEMSITE_API_KEY": client_tenant.key, "PATH": "/usr/bin:/bin"}
    # -I: only the venv's site-packages on the path (not the checkout, not PYTHONPATH).
    result = run([str(client_python), "-I", str(SMOKE_SCRIPT)], env=env, cwd=client_python.parent)
    report = json.loads(result.stdout)
    venv = client_python.parent.parent

    assert Path(report["client_file"]).is_relative_to(venv)  # the installed wheel, not the checkout
    assert report["version"] == tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]["version"]
    assert report["installed"] == []  # neither Django nor any agent framework is in the venv
    assert report["loaded"] == []
    tool_call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    }
    assert report["context"] == [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What is the weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call]},
        {"role": "tool", "content": '{"temp_c": 4, "sky": "rain"}', "tool_call_id": "call_1"},
        {"role": "assistant", "content": "It is 4 °C and raining in Oslo."},
    ]
    assert report["attached"] == report["context"]
    hit = report["hits"][0]
    assert hit["kind"] == "message"
    assert hit["text"] == "What is the weather in Oslo?"
    assert hit["source"]["role"] == "user"
    assert hit["source"]["seq"] == 1


def test_memsite_mcp_command_is_installed_and_needs_no_framework(client_python: Path):
    command = client_python.parent / "memsite-mcp"

    helped = run([str(command), "--help"], env={"PATH": "/usr/bin:/bin"})
    unset = subprocess.run([str(command)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, check=False)

    assert "MEMSITE_URL" in helped.stdout
    assert unset.returncode == 2
    assert "MEMSITE_API_KEY" in unset.stderr  # says what to set instead of failing later
