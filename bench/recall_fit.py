"""Fit the weights of recall's relevance model (memory_app/search/fusion.py) on development sets and
report them on a separate test set, beside the weights the product ships.

    MEMSITE_VAR_DIR=/tmp/recall-fit .venv/bin/python manage.py migrate
    MEMSITE_VAR_DIR=/tmp/recall-fit .venv/bin/python -m bench recall_fit \
        --fix speaker_named=0.3 --fix in_time=3.0                              # ~4 min on 2 cores
    # options: --dev FILE (repeatable) --test FILE (the recall_eval format)  --no-quality-set
    #          --l2 1.0  --fix NAME=VALUE (repeatable)  --tune  --rows FILE (cache)  --json PATH

The development sets are the conversations of bench/data/recall_dev.json and (unless
--no-quality-set) the search bench's quality set (bench/search_quality.py: 40 planted memories among
3,000 agent-session texts and near misses sharing their words, 60 questions), which guards against
word matches that mean something else. Each set is loaded as `manage.py recall_eval` loads it (a
fresh team per conversation, each turn said at its session's date, indexed to completion) on the
database the environment names. For every question, every candidate the product's search weighs
(`selectors.scored_candidates`, limit 10: both engines' lists, and the time-scoped ones) is a row of
its inputs (fusion.Features.inputs), labelled 1 if it holds evidence. A logistic regression
(L2-penalised, Newton's method, numpy) is fitted on the development rows, each set weighing the same
whatever its number of questions; with --tune, the weights are then moved one at a time (coordinate
ascent) while the dev sets' mean recall improves, starting from the better of the fit and the shipped
weights (the likelihood counts every candidate; a search is judged by its top ten). The weights, and
R@5 / R@10 per category on every set when
candidates are ordered by the fitted weights and by the shipped ones, are printed. The product keeps
its own rounded weights: change them in fusion.py when a fit on better data says so, and re-run
`manage.py recall_eval` on the test set.
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TOP_K = 10
QUALITY_SET = "quality set"


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def input_names() -> tuple[str, ...]:
    from memory_app.search import fusion

    return tuple(fusion.WEIGHTS)


def shipped_weights() -> np.ndarray:
    from memory_app.search import fusion

    return np.array([fusion.BIAS, *fusion.WEIGHTS.values()])


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


def load(source: Path | str) -> Any:
    """A set by its file, or the quality set (made here, the same every time)."""
    from bench import search_quality
    from memory_app.search.evalset import load_evalset, validate_evalset

    if source == QUALITY_SET:
        return validate_evalset(search_quality.as_evalset())
    return load_evalset(Path(source))


def collect(source: Path | str) -> list[Question]:
    """Every question of the set with its candidates' inputs, from the product's search."""
    from memory_app.search import evaluation, selectors
    from memory_app.search.models import SearchKind
    from memory_app.tenancy import services as tenancy

    questions: list[Question] = []
    evalset = load(source)
    name = Path(source).stem if source != QUALITY_SET else "quality"
    with evaluation.jobs_run_here():
        for number, conversation in enumerate(evalset["conversations"]):
            team = tenancy.team_get_or_create(name=f"recall-fit-{name}-{number}-{conversation['id']}"[:100])
            try:
                loaded = evaluation.conversation_load(conversation=conversation, team=team)
                evaluation.index_until_done(team_id=team.pk)
                filters = selectors.filters_from({"kinds": [SearchKind.MESSAGE]}, team_id=team.pk)
                for asked in conversation["questions"]:
                    # The quality set's questions are grouped by their id ("no keyword/3").
                    category = asked["id"].split("/")[0] if source == QUALITY_SET else asked["category"]
                    question = Question(category, asked["evidence"])
                    for hit in selectors.scored_candidates(filters=filters, query=asked["question"], limit=TOP_K):
                        if hit.item.message_id is None:
                            continue
                        question.turns.append(loaded.turn_of_message[hit.item.message_id])
                        question.rows.append([1.0, *hit.scored.features.inputs().values()])
                    questions.append(question)
            finally:
                tenancy.team_delete(team=team)
        print(f"{source}: {len(questions)} questions, {sum(len(q.rows) for q in questions)} candidates", flush=True)
    return questions


def collected(
    sources: Sequence[Path | str], test_source: Path, cache: Path | None
) -> tuple[dict[str, list[Question]], list[Question]]:
    """Every set's questions and candidates: from `cache` when it holds them (written by an earlier
    run of the same code: delete it after changing the search), else from the product's search."""
    if cache is not None and cache.exists():
        stored = pickle.loads(cache.read_bytes())  # noqa: S301 (a file this bench wrote itself)
        return stored["dev"], stored["test"]
    dev = {str(source): collect(source) for source in sources}
    test = collect(test_source)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_bytes(pickle.dumps({"dev": dev, "test": test}))
    return dev, test


def fit(sets: Sequence[Sequence[Question]], l2: float, fixed: dict[str, float], steps: int = 50) -> np.ndarray:
    """Logistic regression by Newton's method over the weights not `fixed` (a fixed weight is a
    prior the data does not move); each set's rows weigh 1 / its number of questions, so every set
    counts the same; the bias is penalised like the rest (it does not order)."""
    rows = np.array([row for questions in sets for q in questions for row in q.rows])
    labels = np.array([label for questions in sets for q in questions for label in q.labels])
    share = np.array([1.0 / len(questions) for questions in sets for q in questions for _ in q.rows])
    share *= len(share) / share.sum()  # the penalty keeps its scale
    names = ("bias", *input_names())
    weights = np.array([fixed.get(name, 0.0) for name in names])
    free = [i for i, name in enumerate(names) if name not in fixed]
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(rows @ weights)))
        x = rows[:, free]
        gradient = x.T @ (share * (p - labels)) + l2 * weights[free]
        hessian = (x * (share * p * (1.0 - p))[:, None]).T @ x + l2 * np.eye(len(free))
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


def objective(sets: Sequence[Sequence[Question]], weights: np.ndarray) -> float:
    """What the tuning maximises: the mean over the sets of their overall (R@5 + R@10) / 2."""
    means = [figures(questions, weights)["overall"] for questions in sets]
    return sum((m["R@5"] + m["R@10"]) / 2 for m in means) / len(means)


def tune(sets: Sequence[Sequence[Question]], start: np.ndarray, fixed: dict[str, float], passes: int = 3) -> np.ndarray:
    """Coordinate ascent on `objective` from `start`: each weight not fixed is tried at several
    multiples of its value (and the bias moved), kept where recall is higher. Logistic regression
    fits the likelihood of every candidate; what a search is judged by is its top ten."""
    names = ("bias", *input_names())
    best, score = start.copy(), objective(sets, start)
    for _ in range(passes):
        for i, name in enumerate(names):
            if name in fixed:
                continue
            for factor in (0.0, 0.5, 0.75, 1.25, 1.5, 2.0):
                trial = best.copy()
                trial[i] = best[i] * factor if name != "bias" else best[i] + (factor - 1.0) * 2.0
                value = objective(sets, trial)
                if value > score + 1e-9:
                    best, score = trial, value
    return best


def table(results: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    categories = list(dict.fromkeys(c for by_category in results.values() for c in by_category if c != "overall"))
    categories.append("overall")
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
    parser.add_argument("--dev", type=Path, action="append", help="repeatable (default: bench/data/recall_dev.json)")
    parser.add_argument("--no-quality-set", action="store_true", help="fit without the search bench's quality set")
    parser.add_argument(
        "--tune",
        action="store_true",
        help="then maximise the dev sets' recall by coordinate ascent from the better start",
    )
    parser.add_argument("--test", type=Path, default=ROOT / "bench/data/recall_test.json")
    parser.add_argument("--l2", type=float, default=1.0, help="the penalty on the weights (default 1.0)")
    parser.add_argument(
        "--fix",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="keep a weight at a value instead of fitting it (the names of fusion.WEIGHTS); repeatable",
    )
    parser.add_argument("--rows", type=Path, help="keep the candidates in this file and read them from it next time")
    parser.add_argument("--json", type=Path, default=ROOT / "var/bench/recall_fit.json")
    args = parser.parse_args(argv)
    fixed = {name: float(value) for name, value in (item.split("=", 1) for item in args.fix)}
    setup_django()
    if set(fixed) - set(input_names()):
        parser.error(f"--fix: unknown weight {', '.join(sorted(set(fixed) - set(input_names())))} ({input_names()})")
    sources: list[Path | str] = list(args.dev or [ROOT / "bench/data/recall_dev.json"])
    if not args.no_quality_set:
        sources.append(QUALITY_SET)
    dev, test = collected(sources, args.test, args.rows)
    shipped = shipped_weights()
    fitted = fit(list(dev.values()), args.l2, fixed)
    if args.tune:
        start = max((fitted, shipped), key=lambda weights: objective(list(dev.values()), weights))
        fitted = tune(list(dev.values()), start, fixed)
    names = ("bias", *input_names())
    print("\n| weight | " + " | ".join(names) + " |\n|---|" + "---:|" * len(names))
    print(f"| fitted on dev (fixed: {fixed or 'none'}) | " + " | ".join(f"{w:.2f}" for w in fitted) + " |")
    print("| shipped (fusion.py) | " + " | ".join(f"{w:.2f}" for w in shipped) + " |\n")
    sets = {**{f"dev {Path(name).name}": questions for name, questions in dev.items()}, "test": test}
    results = {
        f"{name} · {label}": figures(questions, weights)
        for name, questions in sets.items()
        for label, weights in (("fitted", fitted), ("shipped", shipped))
    }
    print("R@5 / R@10 with candidates ordered by each set of weights (recency and kind weights aside):\n")
    for name in sets:
        print("\n".join(table({key: value for key, value in results.items() if key.startswith(f"{name} ·")})))
        print()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "weights": {"names": names, "fitted": fitted.tolist(), "shipped": shipped.tolist()},
        "figures": results,
        "l2": args.l2,
        "fixed": fixed,
        "tuned": args.tune,
        "finite": all(math.isfinite(w) for w in fitted),
    }
    args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"\nFigures written to {args.json}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
