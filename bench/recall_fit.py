"""Fit the weights of recall's relevance model (memory_app/search/fusion.py) on a development set and
report them on a separate test set, beside the weights the product ships.

    MEMSITE_VAR_DIR=/tmp/recall-fit .venv/bin/python manage.py migrate
    MEMSITE_VAR_DIR=/tmp/recall-fit .venv/bin/python -m bench recall_fit      # ~2 min on 2 cores
    # options: --dev FILE --test FILE (the recall_eval format)  --l2 1.0  --fix NAME=VALUE  --json PATH

Both sets are loaded as `manage.py recall_eval` loads them (a fresh team per conversation, each turn
said at its session's date, indexed to completion) on the database the environment names. For every
question, every candidate the product's search weighs (`selectors.scored_candidates`, limit 10:
both engines' lists, and the time-scoped ones) is a row of its features, labelled 1 if it holds
evidence. A logistic regression (L2-penalised, Newton's method, numpy) is fitted on the dev rows;
its weights, and R@5 / R@10 per category on both sets when candidates are ordered by the fitted
weights and by the shipped ones, are printed. The product keeps its own rounded weights: change
them in fusion.py when a fit on better data says so, and re-run `manage.py recall_eval` on the test set.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FEATURES = ("lexical_share", "similarity", "similarity_gap", "substance", "speaker_named", "in_time")
TOP_K = 10


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def shipped_weights() -> np.ndarray:
    from memory_app.search import fusion

    return np.array(
        [
            fusion.BIAS,
            fusion.WEIGHT_LEXICAL,
            fusion.WEIGHT_SIMILARITY,
            fusion.WEIGHT_SIMILARITY_GAP,
            fusion.WEIGHT_SUBSTANCE,
            fusion.WEIGHT_SPEAKER,
            fusion.WEIGHT_TIME,
        ]
    )


class Question:
    """One question's candidates: their turn ids, feature rows (with a leading 1) and labels."""

    def __init__(self, category: str, evidence: Sequence[str]) -> None:
        self.category = category
        self.evidence = list(evidence)
        self.turns: list[str] = []
        self.rows: list[list[float]] = []

    @property
    def labels(self) -> list[float]:
        wanted = set(self.evidence)
        return [1.0 if turn in wanted else 0.0 for turn in self.turns]


def collect(path: Path) -> list[Question]:
    """Every question of the set with its candidates' features, from the product's search."""
    from memory_app.search import evaluation, selectors
    from memory_app.search.evalset import load_evalset
    from memory_app.search.models import SearchKind
    from memory_app.tenancy import services as tenancy

    questions: list[Question] = []
    evalset = load_evalset(path)
    with evaluation.jobs_run_here():
        for number, conversation in enumerate(evalset["conversations"]):
            team = tenancy.team_get_or_create(name=f"recall-fit-{path.stem}-{number}-{conversation['id']}"[:100])
            try:
                loaded = evaluation.conversation_load(conversation=conversation, team=team)
                evaluation.index_until_done(team_id=team.pk)
                filters = selectors.filters_from({"kinds": [SearchKind.MESSAGE]}, team_id=team.pk)
                for asked in conversation["questions"]:
                    question = Question(asked["category"], asked["evidence"])
                    for hit in selectors.scored_candidates(filters=filters, query=asked["question"], limit=TOP_K):
                        if hit.item.message_id is None:
                            continue
                        features = hit.scored.features
                        question.turns.append(loaded.turn_of_message[hit.item.message_id])
                        question.rows.append([1.0, *(float(getattr(features, name)) for name in FEATURES)])
                    questions.append(question)
            finally:
                tenancy.team_delete(team=team)
        print(f"{path}: {len(questions)} questions, {sum(len(q.rows) for q in questions)} candidates", flush=True)
    return questions


def fit(questions: Sequence[Question], l2: float, fixed: dict[str, float], steps: int = 50) -> np.ndarray:
    """Logistic regression by Newton's method over the weights not `fixed` (a fixed weight is a
    prior the data does not move); the bias is penalised like the rest (it does not order)."""
    rows = np.array([row for q in questions for row in q.rows])
    labels = np.array([label for q in questions for label in q.labels])
    names = ("bias", *FEATURES)
    weights = np.array([fixed.get(name, 0.0) for name in names])
    free = [i for i, name in enumerate(names) if name not in fixed]
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(rows @ weights)))
        x = rows[:, free]
        gradient = x.T @ (p - labels) + l2 * weights[free]
        hessian = (x * (p * (1.0 - p))[:, None]).T @ x + l2 * np.eye(len(free))
        weights[free] -= np.linalg.solve(hessian, gradient)
    return weights


def figures(questions: Sequence[Question], weights: np.ndarray) -> dict[str, dict[str, float]]:
    """R@5 and R@10 per category and overall, candidates ordered by `weights` (each turn once)."""
    from memory_app.search.recall_measures import evidence_recall

    per: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for q in questions:
        scores = np.array(q.rows) @ weights if q.rows else np.array([])
        ranking = list(dict.fromkeys(q.turns[i] for i in np.argsort(-scores, kind="stable")))
        pair = (
            evidence_recall(ranking=ranking, evidence=q.evidence, k=5),
            evidence_recall(ranking=ranking, evidence=q.evidence, k=10),
        )
        per[q.category].append(pair)
        per["overall"].append(pair)
    return {
        category: {"R@5": sum(p[0] for p in pairs) / len(pairs), "R@10": sum(p[1] for p in pairs) / len(pairs)}
        for category, pairs in per.items()
    }


def table(results: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    categories = ["single-hop", "multi-hop", "temporal", "open-domain", "adversarial", "overall"]
    lines = ["| set | weights | " + " | ".join(categories) + " |", "|---|---|" + "---:|" * len(categories)]
    for label, by_category in results.items():
        cells = [
            f"{by_category[c]['R@5']:.3f} / {by_category[c]['R@10']:.3f}" if c in by_category else "-"
            for c in categories
        ]
        lines.append(f"| {label.replace(' · ', ' | ')} | " + " | ".join(cells) + " |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dev", type=Path, default=ROOT / "bench/data/recall_dev.json")
    parser.add_argument("--test", type=Path, default=ROOT / "bench/data/recall_test.json")
    parser.add_argument("--l2", type=float, default=1.0, help="the penalty on the weights (default 1.0)")
    parser.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"keep a weight at a value instead of fitting it (names: {', '.join(FEATURES)}); repeatable",
    )
    parser.add_argument("--json", type=Path, default=ROOT / "var/bench/recall_fit.json")
    args = parser.parse_args(argv)
    fixed = {name: float(value) for name, value in (item.split("=", 1) for item in args.fix)}
    if set(fixed) - set(FEATURES):
        parser.error(f"--fix: unknown weight {', '.join(sorted(set(fixed) - set(FEATURES)))}")
    setup_django()
    dev, test = collect(args.dev), collect(args.test)
    fitted, shipped = fit(dev, args.l2, fixed), shipped_weights()
    names = ("bias", *FEATURES)
    print("\n| weight | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names))
    print(f"| fitted on dev (fixed: {fixed or 'none'}) | " + " | ".join(f"{w:.2f}" for w in fitted) + " |")
    print("| shipped (fusion.py) | " + " | ".join(f"{w:.2f}" for w in shipped) + " |\n")
    results = {
        f"{name} · {label}": figures(questions, weights)
        for name, questions in (("dev", dev), ("test", test))
        for label, weights in (("fitted", fitted), ("shipped", shipped))
    }
    print("R@5 / R@10 with candidates ordered by each set of weights (recency and kind weights aside):\n")
    print("\n".join(table(results)))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "weights": {"names": names, "fitted": fitted.tolist(), "shipped": shipped.tolist()},
        "figures": results,
        "l2": args.l2,
        "fixed": fixed,
        "finite": all(math.isfinite(w) for w in fitted),
    }
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"\nFigures written to {args.json}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
