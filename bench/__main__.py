"""The benches' one entry point, from the repository root:

    .venv/bin/python -m bench --list              # every bench and what it measures
    .venv/bin/python -m bench NAME [options]      # bench/NAME.py's main with these options
    .venv/bin/python -m bench NAME --help         # its options

`python bench/NAME.py [options]` runs the same main. Each bench prints its report and writes its
figures as JSON as well (`--json PATH`, default var/bench/NAME.json).
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The modules with a main(argv). The others in bench/ are what they use: bench/harness.py (shared
# helpers), the data they seed (retention_sessions, search_corpus, search_quality, floor_tables,
# recall_vocabulary, recall_questions)
# and what they serve or run (floors, limit_floor, urls, wsgi, retention_server, and
# retention_marsys, which runs in the marsys venv).
BENCHES = (
    "api_bench",
    "auth_bench",
    "broker_bench",
    "compaction_bench",
    "embedding_choice",
    "facts_bench",
    "hot_path_profile",
    "indexing_bench",
    "load",
    "mcp_bench",
    "queue_fairness",
    "recall_fit",
    "recall_sets",
    "retention_bench",
    "search_bench",
    "selection_bench",
)
USAGE = "usage: python -m bench --list | python -m bench NAME [options] | python -m bench NAME --help"


def purpose(name: str) -> str:
    """The first paragraph of the bench's docstring on one line, read without importing it."""
    docstring = ast.get_docstring(ast.parse((HERE / f"{name}.py").read_text())) or ""
    return " ".join(docstring.split("\n\n", 1)[0].split())


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip() if args else USAGE)
        return 0 if args else 2
    if args[0] == "--list":
        width = max(map(len, BENCHES))
        for name in BENCHES:
            print(f"{name:<{width}}  {purpose(name)}")
        return 0
    name = Path(args[0]).name.removesuffix(".py")  # also `bench/api_bench.py`
    if name not in BENCHES:
        print(f"{USAGE}\nno bench {args[0]!r}; the benches: {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    sys.argv = [f"python -m bench {name}", *args[1:]]  # what argparse shows as the program
    bench = importlib.import_module(f"bench.{name}")
    return int(bench.main(args[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main())
