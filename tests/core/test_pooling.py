"""Texts past the embedder's window are pooled over windows (core/pooling.py)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from llama_index_graphrag_ext.core.embed_cache import CachedEmbedding
from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding
from llama_index_graphrag_ext.core.pooling import (
    PooledEmbedding,
    Window,
    count_over_window,
    find_window,
    window_texts,
)

SHORT = ["Warsaw is the capital of Poland.", "The Danube flows through Vienna."]
# 16 words per sentence, every word one word piece of MiniLM's vocabulary.
LONG = " ".join(
    f"river {i} runs past the old town and the new bridge to the sea at last ." for i in range(6)
)


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from llama_index_graphrag_ext.core.defaults import embedded_embedding_path

    return AutoTokenizer.from_pretrained(embedded_embedding_path())


@pytest.fixture
def pooled(tokenizer):
    return PooledEmbedding(
        HashEmbedding(dim=64), overlap=4, window=Window(tokenizer, max_tokens=18, text_tokens=16)
    )


def test_texts_within_the_window_keep_the_inner_vectors_bit_for_bit(pooled):
    batch = [SHORT[0], LONG, SHORT[1]]
    mine, theirs = (
        pooled.get_text_embedding_batch(batch),
        pooled.inner.get_text_embedding_batch(batch),
    )
    assert mine[0] == theirs[0] and mine[2] == theirs[2]
    assert mine[1] != theirs[1]
    assert pooled.stats["texts"] == 3 and pooled.stats["texts_pooled"] == 1


def test_a_long_text_is_the_weighted_mean_of_windows_that_cover_it(pooled, tokenizer):
    spans = [
        (s, e, w)
        for (s, e), w in zip(
            tokenizer(LONG, add_special_tokens=False, return_offsets_mapping=True)[
                "offset_mapping"
            ],
            tokenizer(LONG, add_special_tokens=False).word_ids(),
            strict=True,
        )
    ]
    windows = window_texts(LONG, spans, 16, 4)
    assert windows[0] == LONG[: spans[15][1]] and windows[-1].endswith("at last .")
    for text in windows:  # each fits, and neighbours share words
        assert len(tokenizer(text, add_special_tokens=False)["input_ids"]) <= 16
    assert all(a.split()[-1] in b for a, b in zip(windows, windows[1:], strict=False))
    vectors = np.asarray(pooled.inner.get_text_embedding_batch(windows))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    # The opening window weighs 2/3 (by default); the others share the last third.
    weights = np.full(len(windows), (1 / 3) / (len(windows) - 1))
    weights[0] = 2 / 3
    expected = vectors.T @ weights
    expected /= np.linalg.norm(expected)
    got = np.asarray(pooled.get_text_embedding(LONG))
    assert np.allclose(got, expected, atol=1e-6)
    assert pooled.stats["windows_embedded"] == len(windows) >= 6
    assert count_over_window(pooled, [LONG, *SHORT]) == 1
    # head_weight=None is the plain mean; the cache key tells the two apart.
    plain = PooledEmbedding(pooled.inner, overlap=4, window=pooled.window, head_weight=None)
    mean = vectors.mean(axis=0)
    assert np.allclose(plain.get_text_embedding(LONG), mean / np.linalg.norm(mean), atol=1e-6)
    assert plain.cache_tag != pooled.cache_tag
    with pytest.raises(ValueError, match="head_weight"):
        PooledEmbedding(pooled.inner, window=pooled.window, head_weight=0.0)


def test_the_switch_and_an_unknown_window_embed_as_the_inner_embedder(caplog, tokenizer):
    inner = HashEmbedding(dim=32)
    off = PooledEmbedding(inner, overlap=4, enabled=False, window=Window(tokenizer, 18, 16))
    assert not off.pooling and off.get_text_embedding(LONG) == inner.get_text_embedding(LONG)
    with caplog.at_level(logging.WARNING):
        unknown = PooledEmbedding(inner)
    assert "cannot be found" in caplog.text and caplog.text.count("cannot be found") == 1
    assert unknown.stats["window_known"] is False and unknown.window is None
    assert unknown.get_text_embedding(LONG) == inner.get_text_embedding(LONG)
    assert find_window(inner) is None and count_over_window(inner, [LONG]) is None
    with pytest.raises(ValueError, match="cannot be found"):
        PooledEmbedding(inner, strict=True)


def test_the_cache_keys_pooled_vectors_apart_from_truncated_ones(pooled, tmp_path):
    path = tmp_path / "emb.sqlite"
    # A cache written without pooling holds the inner embedder's vector of LONG.
    plain = CachedEmbedding(pooled.inner, path)
    plain_vectors = plain.get_text_embedding_batch([SHORT[0], LONG])
    cached = CachedEmbedding(pooled, path)
    vectors = cached.get_text_embedding_batch([SHORT[0], LONG])
    assert cached.hits == 1  # the short text, under the same key as before
    assert vectors[0] == plain_vectors[0]
    assert np.allclose(vectors[1], pooled.get_text_embedding(LONG), atol=1e-6)
    assert not np.allclose(vectors[1], plain_vectors[1], atol=1e-3)
    again = CachedEmbedding(pooled, path).get_text_embedding_batch([LONG])
    assert np.allclose(again[0], vectors[1], atol=1e-6)


@pytest.mark.embedded
def test_minilm_reads_past_its_window(minilm):
    assert isinstance(minilm, PooledEmbedding) and minilm.window.max_tokens == 256
    tail = "The last sentence says the treaty was signed in Zanzibar by the Hanseatic League."
    long = "Teutberga was a queen of Lotharingia by marriage to Lothair II. " * 30 + tail
    batch = [*SHORT, long]
    pooled, truncated = (
        minilm.get_text_embedding_batch(batch),
        minilm.inner.get_text_embedding_batch(batch),
    )
    assert pooled[:2] == truncated[:2]  # bit-identical within the window
    query = np.asarray(
        minilm.get_query_embedding("treaty signed in Zanzibar by the Hanseatic League")
    )
    assert query @ np.asarray(pooled[2]) > query @ np.asarray(truncated[2]) + 0.03


def test_a_text_one_piece_over_the_window_still_gets_two_windows(tokenizer):
    text = "Teutberga " + " ".join(["river"] * 14)  # 4 pieces (te ##ut ##berg ##a) + 14 = 18
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    spans = [(s, e, w) for (s, e), w in zip(enc["offset_mapping"], enc.word_ids(), strict=True)]
    assert len(spans) == 18
    windows = window_texts(text, spans, 16, 4)
    # The last window would open at piece 2, inside "Teutberga": back to its start
    # is where the first opened, so it opens at the next word instead.
    assert len(windows) == 2 and windows[0].startswith("Teutberga")
    assert windows[1] == " ".join(["river"] * 14)
    assert windows[-1].endswith("river") and not windows[-1].startswith("##")
