"""The offline model batches texts by their token count: each text still gets its own vector,
whatever it is batched with, and no batch is larger than its token budget."""

from __future__ import annotations

import numpy as np

from memory_app.search.embeddings import offline
from memory_app.search.embeddings.offline import BATCH_TEXTS, BATCH_TOKENS, OfflineEmbeddings, length_batches


def test_length_batches_hold_every_text_once_within_the_budget():
    lengths = [5, 128, 17, 17, 90, 3, 128, 64, 40, 1] * 9

    batches = length_batches(lengths)

    assert sorted(position for batch in batches for position in batch) == list(range(len(lengths)))
    for batch in batches:
        padded = len(batch) * max(lengths[position] for position in batch)
        assert len(batch) == 1 or padded <= BATCH_TOKENS
        assert len(batch) <= BATCH_TEXTS
    assert [lengths[batch[0]] for batch in batches] == sorted(lengths[batch[0]] for batch in batches)


def test_a_text_gets_the_same_vector_alone_or_among_longer_and_shorter_ones():
    backend = OfflineEmbeddings()
    texts = [
        "the backup runs at midnight",
        " ".join(f"line {n} of the ledger flush log" for n in range(60)),  # past MAX_TOKENS
        "ok",
        "Rosa found the cello teacher through the school newsletter",
    ] * 12

    together = backend.embed(texts, purpose="document")
    alone = np.stack([backend.embed([text], purpose="document")[0] for text in texts[:4]])

    np.testing.assert_allclose(together[:4], alone, atol=1e-5)
    np.testing.assert_allclose(together[4:8], alone, atol=1e-5)


def test_a_text_past_the_model_length_is_embedded_from_its_first_tokens():
    backend = OfflineEmbeddings()
    runtime = offline._runtime(backend.threads)
    head = " ".join(f"step {n} rebuilt the invoice index" for n in range(40))
    tail = " and then the tail nobody embeds" * 40

    ids = runtime.tokenizer.encode(head + tail).ids

    assert len(ids) == offline.MAX_TOKENS
    np.testing.assert_allclose(
        backend.embed([head + tail], purpose="document"), backend.embed([head + tail + " more"], purpose="document")
    )
