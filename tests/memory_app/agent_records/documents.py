"""Documents assembled from every YAML block of the agent memory file conventions (kept verbatim in
./agent_memory_files/, one file per block in the conventions' order, whitespace-only lines included)."""

from __future__ import annotations

from pathlib import Path

BLOCKS = Path(__file__).with_name("agent_memory_files")


def block(name: str) -> str:
    return (BLOCKS / f"{name}.yaml").read_text()


def main_document() -> str:
    """The schema walk-through: header, discoveries, attempts, decisions and context sections."""
    return "".join(block(name) for name in ("1_header", "2_discoveries", "3_attempts", "4_decisions", "5_context"))


def examples_document(agent: str) -> str:
    """Examples 1-3 (a discovery, a failed attempt, a decision) under the conventions' header for `agent`."""
    header = block("1_header").replace('agent: "developer"', f'agent: "{agent}"')
    examples = ("6_example_1_discovery", "7_example_2_failed_attempt", "8_example_3_decision")
    return header + "".join(block(name) for name in examples)


def versioning_document() -> str:
    """The versioning block alone: the smallest valid document (no sections)."""
    return block("9_versioning")


def all_blocks() -> list[str]:
    return sorted(path.stem for path in BLOCKS.glob("*.yaml"))
