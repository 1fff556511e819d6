"""A long chunk scored by its best window (core/windows.py)."""

from __future__ import annotations

import numpy as np

from llama_index_graphrag_ext.core.embed_cache import CachedEmbedding
from llama_index_graphrag_ext.core.windows import (
    ChunkWindows,
    chunk_of,
    find_pooler,
    window_ids,
    window_rows,
    window_vectors,
)
from llama_index_graphrag_ext.testing import HashEmbedding


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


def test_window_vectors_are_the_pooling_wrapper_s_windows_embedded(minilm, tmp_path):
    out = window_vectors(minilm, ["A short text.", LONG])
    assert out[0] is None
    windows = [LONG[a:b] for a, b in minilm.window_ranges([LONG])[0]]
    assert len(windows) > 1
    expected = np.asarray(minilm.inner.get_text_embedding_batch(windows))
    assert np.allclose(out[1], expected, atol=1e-5)
    # Found through the cache wrapper; an embedder without pooling windows nothing.
    cached = CachedEmbedding(minilm, tmp_path / "cache.sqlite")
    assert find_pooler(cached) is minilm
    assert np.allclose(window_vectors(cached, [LONG])[0], out[1], atol=1e-5)
    assert window_vectors(HashEmbedding(dim=8), [LONG]) == [None]
    assert window_vectors(minilm.inner, [LONG]) == [None]
