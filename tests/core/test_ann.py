"""Approximate kNN (core/ann.py): recall against the exact search, determinism, masking."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.core.ann import ivf_knn, knn_recall, use_approximate
from llama_index_graphrag_ext.core.embeddings import knn_graph
from llama_index_graphrag_ext.qcg.graph import knn_rows


def clustered(n: int, d: int = 64, centres: int = 40, seed: int = 0) -> np.ndarray:
    """Unit rows around a few centres: the shape of real embeddings (topics)."""
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, d)).astype(np.float32)
    x = c[rng.integers(0, centres, n)] + 0.7 * rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_size_rule():
    assert not use_approximate(1000, 1000, None)
    assert use_approximate(60_000, 60_000, None)
    assert use_approximate(10, 10, True) and not use_approximate(10**6, 10**6, False)


def test_ivf_graph_recalls_the_exact_neighbours_and_is_deterministic():
    x = clustered(4000)
    exact, exact_sims = knn_graph(x, 10, approximate=False)
    approx, sims = knn_graph(x, 10, approximate=True)
    assert approx.shape == exact.shape and (approx >= 0).all()
    assert not (approx == np.arange(len(x))[:, None]).any()  # never itself
    assert knn_recall(approx, exact) >= 0.95
    # Scores are exact inner products, best first.
    np.testing.assert_allclose(sims, np.einsum("nd,nkd->nk", x, x[approx]), atol=1e-5)
    assert (np.diff(sims, axis=1) <= 1e-6).all()
    again, _ = knn_graph(x, 10, approximate=True)
    np.testing.assert_array_equal(again, approx)
    assert exact_sims[:, 0].min() >= sims[:, 0].min() - 1e-6


def test_ivf_against_other_rows_and_tiny_inputs():
    x, y = clustered(300, seed=1), clustered(2000, seed=2)
    idx, _ = ivf_knn(x, y, 5)
    exact, _ = knn_graph(x, 5, others=y, approximate=False)
    assert knn_recall(idx, exact) >= 0.9
    idx, sims = ivf_knn(np.zeros((0, 64), np.float32), y, 5)
    assert idx.shape == (0, 5)


def test_qcg_rows_skip_their_own_chunk_when_approximate():
    x = clustered(3000)
    codes = np.repeat(np.arange(1000), 3)  # three query nodes per chunk
    rows = np.arange(len(x))
    exact, _ = knn_rows(x, rows, 8, codes, approximate=False)
    approx, sims = knn_rows(x, rows, 8, codes, approximate=True)
    valid = approx >= 0
    assert valid.mean() > 0.99
    assert not (codes[np.where(valid, approx, 0)] == codes[rows][:, None])[valid].any()
    assert knn_recall(approx, exact) >= 0.9
    assert np.isneginf(sims[~valid]).all()


@pytest.mark.parametrize("k", [1, 10])
def test_knn_graph_rows_are_always_full(k):
    x = clustered(500)
    idx, _ = knn_graph(x, k, approximate=True)
    assert idx.shape == (500, k) and (idx >= 0).all()
