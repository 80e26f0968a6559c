"""The embedding backends: the fake for tests, the offline wheel-shipped model, and any
OpenAI-compatible server over real HTTP to the scripted one."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from memory_app.search.embeddings import (
    FAKE_BACKEND,
    EmbeddingPermanentError,
    EmbeddingTransientError,
    embedder_path,
    get_embedder,
)
from memory_app.search.embeddings.fake import FakeEmbeddings
from memory_app.search.embeddings.offline import OfflineEmbeddings
from memory_app.search.embeddings.openai_backend import OpenAIEmbeddings
from tests.llm_server import Fail, Garbage, ScriptedLLMServer, Vectors


@pytest.fixture(autouse=True)
def _embedding_settings(settings) -> None:
    settings.EMBEDDINGS_BACKEND = ""
    settings.EMBEDDINGS_BASE_URL = ""
    settings.EMBEDDINGS_MODEL = "text-embedding-3-small"
    settings.EMBEDDINGS_API_KEY = ""
    settings.EMBEDDINGS_TIMEOUT = 5.0
    settings.EMBEDDINGS_DIMENSION = 0
    settings.EMBEDDINGS_THREADS = 1


@pytest.fixture
def embeddings_server(settings):
    """The scripted OpenAI-compatible server, configured as the embeddings backend."""
    server = ScriptedLLMServer(embedding_dimension=8).start()
    settings.EMBEDDINGS_BASE_URL = server.base_url
    settings.EMBEDDINGS_API_KEY = "sk-test-embeddings"
    settings.EMBEDDINGS_MODEL = "scripted-embedder"
    yield server
    server.stop()


def assert_unit_rows(vectors: np.ndarray) -> None:
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# --- choosing the backend ----------------------------------------------------------------------


def test_the_backend_follows_the_settings(settings):
    assert get_embedder().name == "offline"
    settings.EMBEDDINGS_BASE_URL = "http://127.0.0.1:9/v1"
    assert get_embedder().name == "openai"
    settings.EMBEDDINGS_BACKEND = FAKE_BACKEND
    assert embedder_path() == FAKE_BACKEND
    assert get_embedder().name == "fake"


def test_one_instance_serves_the_process_until_a_setting_changes(settings):
    settings.EMBEDDINGS_BACKEND = FAKE_BACKEND
    assert get_embedder() is get_embedder()
    settings.EMBEDDINGS_BASE_URL = "http://127.0.0.1:9/v1"
    settings.EMBEDDINGS_BACKEND = ""
    first = get_embedder()
    settings.EMBEDDINGS_MODEL = "another-model"
    assert get_embedder() is not first
    assert get_embedder().model == "another-model"


# --- the fake ----------------------------------------------------------------------------------


def test_the_fake_is_deterministic_normalised_and_64_wide():
    texts = ["The login page fails for emoji passwords", "", "Deployments are frozen in December"]
    vectors = FakeEmbeddings().embed(texts, purpose="document")
    assert vectors.shape == (3, 64)
    assert_unit_rows(vectors)
    assert np.array_equal(vectors, FakeEmbeddings().embed(texts, purpose="query"))
    assert FakeEmbeddings().embed([], purpose="query").shape == (0, 64)


def test_the_fake_puts_texts_sharing_words_closer():
    anchor, related, unrelated = FakeEmbeddings().embed(
        ["the login page crashes on emoji passwords", "login crashes with emoji", "quarterly budget meeting moved"],
        purpose="document",
    )
    assert anchor @ related > anchor @ unrelated + 0.2


# --- the offline model -------------------------------------------------------------------------

MEMORIES = [
    "The login page returns a 500 error when the password contains an emoji.",
    "Deployments are frozen from December 20 until January 3.",
    "Lena is allergic to peanuts; order the team lunch accordingly.",
]


def test_the_offline_model_gives_normalised_384_wide_float32_rows():
    backend = OfflineEmbeddings()
    vectors = backend.embed([*MEMORIES, ""], purpose="document")
    assert (backend.model, backend.dimension) == ("all-MiniLM-L6-v2-q8", 384)
    assert vectors.shape == (4, 384)
    assert_unit_rows(vectors)
    assert backend.embed([], purpose="query").shape == (0, 384)


def test_the_offline_model_ranks_a_paraphrase_first():
    backend = OfflineEmbeddings()
    documents = backend.embed(MEMORIES, purpose="document")
    # Shares no word with the memory it is about.
    question = backend.embed(["Is there any food restriction to keep in mind when catering?"], purpose="query")[0]
    assert int(np.argmax(documents @ question)) == 2


def test_the_offline_model_does_not_depend_on_the_batch():
    """A text's vector is the same alone or among longer texts (padding is masked out), and
    rows come back in input order although batches are sorted by length."""
    backend = OfflineEmbeddings()
    together = backend.embed([MEMORIES[1], "word " * 2000, MEMORIES[0]], purpose="document")
    alone = backend.embed([MEMORIES[1], MEMORIES[0]], purpose="document")
    assert together[0] @ alone[0] > 0.9999
    assert together[2] @ alone[1] > 0.9999
    assert_unit_rows(together)  # the 2000-word text was truncated, not refused


def test_the_offline_model_serves_threads_at_once():
    backend = OfflineEmbeddings()
    expected = backend.embed(MEMORIES, purpose="document")
    results: list[np.ndarray] = []
    threads = [
        threading.Thread(target=lambda: results.append(backend.embed(MEMORIES, purpose="document"))) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 4
    assert all(np.allclose(r, expected, atol=1e-6) for r in results)


# --- an OpenAI-compatible server ---------------------------------------------------------------


def test_it_returns_normalised_rows_in_input_order(embeddings_server):
    embeddings_server.script_embeddings(Vectors(rows=[[3.0, 4.0], [0.0, 2.0]]))
    backend = get_embedder()
    vectors = backend.embed(["first", "second"], purpose="document")
    assert np.allclose(vectors, [[0.6, 0.8], [0.0, 1.0]])
    assert backend.dimension == 2
    sent = embeddings_server.embedding_requests[-1]
    assert (sent["model"], sent["input"]) == ("scripted-embedder", ["first", "second"])
    assert embeddings_server.requests == []  # no chat call was made or consumed


def test_the_same_text_gets_the_same_vector(embeddings_server):
    backend = OpenAIEmbeddings()
    first = backend.embed(["a memory", "another"], purpose="document")
    assert first.shape == (2, 8)
    assert_unit_rows(first)
    assert np.array_equal(backend.embed(["a memory"], purpose="query")[0], first[0])


def test_the_dimension_is_learned_from_the_server_when_not_configured(embeddings_server):
    assert OpenAIEmbeddings().dimension == 8
    assert embeddings_server.embedding_requests[-1]["input"] == ["dimension probe"]


def test_a_server_answering_another_dimension_than_configured_is_refused(settings, embeddings_server):
    settings.EMBEDDINGS_DIMENSION = 1536
    backend = OpenAIEmbeddings()
    assert backend.dimension == 1536
    with pytest.raises(EmbeddingPermanentError, match="8 dimensions, expected 1536"):
        backend.embed(["text"], purpose="document")


def test_long_lists_are_sent_in_batches(embeddings_server):
    vectors = OpenAIEmbeddings().embed([f"text {i}" for i in range(300)], purpose="document")
    assert vectors.shape == (300, 8)
    assert [len(r["input"]) for r in embeddings_server.embedding_requests] == [128, 128, 44]


@pytest.mark.parametrize(
    ("step", "error", "retry_after"),
    [
        (Fail(429, headers={"Retry-After": "7"}), EmbeddingTransientError, 7.0),
        (Fail(503, headers={"Retry-After": "2"}), EmbeddingTransientError, 2.0),
        (Fail(500), EmbeddingTransientError, None),
        (Garbage(), EmbeddingTransientError, None),
        (Vectors(rows=[[1.0, 0.0]]), EmbeddingTransientError, None),  # one vector for two texts
        (Fail(400), EmbeddingPermanentError, None),
        (Fail(401), EmbeddingPermanentError, None),
    ],
)
def test_failures_are_transient_or_permanent(embeddings_server, step, error, retry_after):
    embeddings_server.script_embeddings(step)
    with pytest.raises(error) as caught:
        OpenAIEmbeddings().embed(["one", "two"], purpose="document")
    assert type(caught.value) is error
    if error is EmbeddingTransientError:
        assert caught.value.retry_after == retry_after
    assert "sk-test-embeddings" not in caught.value.detail


def test_a_timeout_is_transient(settings, embeddings_server):
    settings.EMBEDDINGS_TIMEOUT = 0.3
    release = threading.Event()
    embeddings_server.script_embeddings(Vectors(hold=release))
    try:
        with pytest.raises(EmbeddingTransientError, match="timed out"):
            OpenAIEmbeddings().embed(["slow"], purpose="document")
    finally:
        release.set()


def test_an_unreachable_server_is_transient(settings):
    settings.EMBEDDINGS_BASE_URL = "http://127.0.0.1:9/v1"  # the discard port: nothing listens
    with pytest.raises(EmbeddingTransientError, match="could not connect"):
        OpenAIEmbeddings().embed(["text"], purpose="document")
