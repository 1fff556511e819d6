"""HashEmbedding: the suite's one hashed embedder (tests, and ``scale --embed-model hash:384``)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding


def test_vectors_are_pinned():
    # The scale report's hash:384 figures (docs/assets/scale.json) rest on these
    # exact vectors: each word adds the sign of its crc32's bit 31 at crc32 % dim.
    vec = np.array(HashEmbedding(dim=384).get_text_embedding("The ferry crossed the river"))
    slots = np.flatnonzero(vec)
    assert slots.tolist() == [102, 136, 171, 275]
    assert (vec[slots] * np.sqrt(7)).tolist() == pytest.approx([-2.0, -1.0, 1.0, 1.0], abs=1e-6)


def test_deterministic_and_word_sensitive():
    embed = HashEmbedding(dim=384)
    a, b, c = embed.get_text_embedding_batch(
        ["The ferry crossed the river", "the river: ferry crossed THE", "Quantum chromodynamics"]
    )
    assert len(a) == 384 and np.linalg.norm(a) == pytest.approx(1.0, abs=1e-5)
    assert np.dot(a, b) == pytest.approx(1.0, abs=1e-5)  # same words, any order
    assert np.dot(a, c) < 0.5
    assert HashEmbedding(dim=384).get_query_embedding("The ferry") == embed.get_query_embedding(
        "the ferry"
    )
    # A text without words gets the first axis.
    assert embed.get_text_embedding("") == embed.get_text_embedding("  ?! ")
    assert np.linalg.norm(embed.get_text_embedding("")) == pytest.approx(1.0)


def test_counts_what_it_embeds_from_several_threads():
    embed = HashEmbedding(dim=16, embed_batch_size=3)
    texts = [f"text number {i}" for i in range(50)]
    threads = [
        threading.Thread(target=embed.get_text_embedding_batch, args=(texts,)) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    embed.get_query_embedding("a longer query than any text above")
    assert embed.embedded_texts == 4 * 50 + 1
    assert embed.embedded_chars == 4 * sum(map(len, texts)) + 34
    assert embed.longest_text == 34
