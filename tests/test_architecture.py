"""The shape of the code, checked like behaviour: no import cycle among the project's modules,
and code that speaks of the product's concepts rather than of design-document or issue numbers.

The import-linter contracts in pyproject.toml (`lint-imports`, run by `make lint`) hold the layers
and the boundaries between packages; this counts cycles, which a layer contract does not see
between two modules outside its layers.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("memsite", "memory_app", "experiences_app", "memory_client")


def import_cycles(packages: tuple[str, ...] = PACKAGES) -> list[list[str]]:
    """Every set of modules that import each other in a circle (strongly connected components of
    the import graph, imports inside functions included), migrations aside. Imports under
    `if TYPE_CHECKING:` never run, so they are left out: an annotation may name a model above."""
    graph = grimp.build_graph(*packages, exclude_type_checking_imports=True)
    modules = sorted(m for m in graph.modules if ".migrations" not in m)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(start: str) -> None:  # Tarjan's algorithm, iterative (no recursion limit)
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if ".migrations" in child:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    return cycles


def test_no_project_modules_import_each_other_in_a_circle():
    assert import_cycles() == []


def test_the_cycle_counter_finds_a_circle(tmp_path, monkeypatch):
    package = tmp_path / "circle_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circle_pkg import b\n")
    (package / "b.py").write_text("def f():\n    from circle_pkg import a  # hidden inside a function\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles(("circle_pkg",)) == [["circle_pkg.a", "circle_pkg.b"]]


HISTORY = re.compile(r"seed ?[0-9]{3}|issue ?[0-9]+", re.IGNORECASE)


def test_the_code_speaks_of_concepts_not_of_design_documents_or_issues():
    tracked = subprocess.run(
        ["git", "ls-files", "memsite", "memory_app", "experiences_app", "memory_client", "templates", "README.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    found = [
        f"{name}:{number}"
        for name in tracked
        if "/migrations/" not in name
        for number, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), start=1)
        if HISTORY.search(line)
    ]
    assert found == []
