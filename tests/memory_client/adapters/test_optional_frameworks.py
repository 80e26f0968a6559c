"""The frameworks stay optional: the client and the adapters package import none of them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FRAMEWORKS = ("agents", "anthropic", "google.adk", "google.genai", "langchain_core", "langgraph", "openai")


def test_importing_the_client_and_the_adapters_package_loads_no_framework():
    probe = (
        "import sys, memory_client, memory_client.adapters\n"
        "from memory_client import MemoryManager\n"
        f"print(sorted(name for name in {FRAMEWORKS!r} if name in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "[]"
