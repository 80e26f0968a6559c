"""manage.py recall_eval FILE [--json OUT] [--systems memsite,bm25,dense] [--limit N] [--keep] [--undated]:
measure recall on labelled conversations (the format: memory_app.search.evalset, docs/recall.md).

Each conversation is loaded into a fresh team, indexed here (no worker needed), and every question
asked of memsite's search and of the baselines; the figures are printed per category and overall.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_app.search import evaluation
from memory_app.search.evalset import EvalSet, EvalSetError, load_evalset


class Command(BaseCommand):
    help = "Measure recall (R@k, hit@k, NDCG@10) of memsite's search and of BM25 and dense baselines on a file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, help="the labelled conversations (JSON, see docs/recall.md)")
        parser.add_argument("--json", type=Path, dest="json_out", help="also write every figure to this file")
        parser.add_argument(
            "--systems",
            default=",".join(evaluation.SYSTEMS),
            help=f"comma-separated, among {', '.join(evaluation.SYSTEMS)} (default: all)",
        )
        parser.add_argument("--limit", type=int, help="only the first N conversations of the file")
        parser.add_argument("--keep", action="store_true", help="keep the teams the conversations were loaded into")
        parser.add_argument(
            "--undated",
            action="store_true",
            help="load turns without their session's time (kept in metadata only): what the dates are worth",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        systems = self._systems(options["systems"])
        try:
            evalset = load_evalset(options["file"])
        except EvalSetError as exc:
            raise CommandError(str(exc)) from exc
        limit = options.get("limit")
        if limit is not None:
            if limit < 1:
                raise CommandError("--limit must be at least 1")
            evalset = EvalSet(conversations=evalset["conversations"][:limit])
        try:
            report = evaluation.evaluate(
                evalset=evalset,
                source=str(options["file"]),
                systems=systems,
                keep=options["keep"],
                dated=not options["undated"],
                progress=lambda line: self.stderr.write(line),
            )
        except evaluation.RecallEvalError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write("\n".join(evaluation.report_lines(report)))
        if options.get("json_out"):
            options["json_out"].parent.mkdir(parents=True, exist_ok=True)
            options["json_out"].write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
            self.stdout.write(f"Figures written to {options['json_out']}.")
        if options["keep"] and report["teams"]:
            self.stdout.write(f"Teams kept (delete them from the admin when done): {', '.join(report['teams'])}")

    def _systems(self, value: str) -> list[str]:
        systems = [name.strip() for name in value.split(",") if name.strip()]
        unknown = [name for name in systems if name not in evaluation.SYSTEMS]
        if unknown or not systems:
            raise CommandError(f"--systems: choose among {', '.join(evaluation.SYSTEMS)} (got {value!r})")
        return list(dict.fromkeys(systems))
