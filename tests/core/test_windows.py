"""A long chunk scored by its best window (core/windows.py)."""

from __future__ import annotations

import numpy as np

from llama_index_graphrag_ext.core.embed_cache import CachedEmbedding
from llama_index_graphrag_ext.core.embeddings import embed_texts
from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding
from llama_index_graphrag_ext.core.windows import (
    ChunkWindows,
    chunk_of,
    embed_with_windows,
    find_pooler,
    sentence_runs,
    sentence_windows,
    window_ids,
    window_rows,
)


def _unit(*values: float) -> np.ndarray:
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_window_ids_name_their_chunk_even_when_it_has_the_mark():
    ids = window_ids("doc#window7", 3)
    assert len(set(ids)) == 3 and {chunk_of(w) for w in ids} == {"doc#window7"}


def test_window_rows_keep_only_chunks_read_in_several_windows():
    two = np.stack([_unit(1, 0), _unit(0, 1)])
    ids, matrix = window_rows(["a", "b", "c"], [None, two, two[:1]])
    assert ids == window_ids("b", 2) and matrix.shape == (2, 2)
    assert window_rows(["a"], [None]) == ([], None)


def test_best_replaces_a_long_chunk_s_score_by_its_best_window_only():
    # Chunk row 1 is long: its pooled vector sits between two topics, its second
    # window is the query's topic. Rows 0 and 2 are short chunks.
    windows = ChunkWindows(np.stack([_unit(0, 1, 0), _unit(1, 0, 0)]), np.asarray([1, 1]))
    query = _unit(1, 0, 0)
    pooled_scores = np.asarray([0.6, 0.5, 0.2], dtype=np.float32)
    out = windows.best(pooled_scores, [0, 1, 2], query)
    assert np.allclose(out, [0.6, 1.0, 0.2])
    assert np.allclose(pooled_scores, [0.6, 0.5, 0.2])  # the input is left alone
    # Any subset and order of rows; a long chunk not asked for changes nothing.
    assert np.allclose(windows.best(np.asarray([0.2, 0.5]), [2, 1], query), [0.2, 1.0])
    assert np.allclose(windows.best(np.asarray([0.3]), [0], query), [0.3])


def test_from_table_maps_windows_to_chunk_rows():
    ids = window_ids("b", 2) + window_ids("a", 1)
    windows = ChunkWindows.from_table(ids, np.eye(3, dtype=np.float32), {"a": 0, "b": 1})
    assert windows.owner.tolist() == [1, 1, 0] and len(windows) == 3
    assert ChunkWindows.from_table([], np.zeros((0, 3)), {}) is None


LONG = "Opening sentence about rivers. {} Closing sentence about bridges.".format(
    " ".join(f"word{i} filler text." for i in range(200))
)


def test_embed_with_windows_embeds_each_window_once_and_pools_as_the_wrapper(minilm, tmp_path):
    texts = ["A short text.", LONG, "Another short one."]
    before = minilm.stats
    vectors, windows = embed_with_windows(minilm, texts)
    assert windows[0] is None and windows[2] is None
    pieces = [LONG[a:b] for a, b in minilm.window_ranges([LONG])[0]]
    assert len(pieces) > 1
    after = minilm.stats  # each window embedded once, and counted as pooled
    assert after["texts_pooled"] - before["texts_pooled"] == 1
    assert after["windows_embedded"] - before["windows_embedded"] == len(pieces)
    expected = np.asarray(minilm.inner.get_text_embedding_batch(pieces))
    assert np.allclose(windows[1], expected, atol=1e-5)
    # The vectors are the ones the pooling wrapper gives, long text included.
    assert np.allclose(vectors, np.asarray(minilm.get_text_embedding_batch(texts)), atol=1e-5)
    # Found through the cache wrapper; an embedder without pooling windows nothing.
    cached = CachedEmbedding(minilm, tmp_path / "cache.sqlite")
    assert find_pooler(cached) is minilm
    assert np.allclose(embed_with_windows(cached, [LONG])[1][0], windows[1], atol=1e-5)
    for plain in (HashEmbedding(dim=8), minilm.inner):
        flat, none = embed_with_windows(plain, texts)
        assert none == [None] * 3 and flat.shape[0] == 3


def test_sentence_runs_join_whole_sentences_up_to_the_word_budget():
    sentences = ["one two three.", "four five.", "six seven eight nine.", "ten."]
    assert sentence_runs(sentences, 5) == [
        "one two three. four five.",
        "six seven eight nine. ten.",
    ]
    # A sentence longer than the budget is a run of its own; nothing is cut or lost.
    assert sentence_runs(["a b c d e f g.", "h."], 3) == ["a b c d e f g.", "h."]
    assert sentence_runs([], 5) == []


def test_sentence_windows_replace_only_long_texts_windows_by_their_runs():
    embed = HashEmbedding(dim=16)
    two = np.stack([_unit(*[1] + [0] * 15), _unit(*[0, 1] + [0] * 14)])
    texts = ["short.", "Alpha beta. Gamma delta. Epsilon zeta.", "One run only."]
    split = lambda batch: [t.replace(". ", ".|").split("|") for t in batch]  # noqa: E731
    out = sentence_windows(embed, texts, [None, two, two], split, 2)
    assert out[0] is None
    # The long text's windows are now its three runs' unit vectors, as embed_texts makes them.
    runs = ["Alpha beta.", "Gamma delta.", "Epsilon zeta."]
    assert out[1].shape == (3, 16) and np.allclose(out[1], embed_texts(embed, runs))
    # A long text whose sentences make a single run keeps the embedder's windows.
    assert out[2] is two
