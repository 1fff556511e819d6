"""The query layer: exact kNN lists, and incremental insert / delete equal to a rebuild."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.qcg.graph import QueryLayer, knn_rows
from llama_index_graphrag_ext.qcg.query_nodes import QueryPair


def _pairs(n_chunks, per_chunk):
    return [
        QueryPair(f"c{c}", i, f"query {c}-{i}", f"answer {c}-{i}")
        for c in range(n_chunks)
        for i in range(per_chunk)
    ]


def _vectors(n, d=8, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(n, d)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _brute_knn(matrix, k, codes=None):
    sims = matrix @ matrix.T
    np.fill_diagonal(sims, -np.inf)
    if codes is not None:
        sims[codes[:, None] == codes[None, :]] = -np.inf
    out = []
    for row in sims:
        order = np.lexsort((np.arange(len(row)), -row))[:k]
        out.append([int(j) for j in order if np.isfinite(row[j])])
    return out


def _lists(layer):
    return {layer.pairs[r].node_id: layer.neighbor_ids(r) for r in range(len(layer))}


@pytest.mark.parametrize("exclude", [False, True])
def test_build_matches_brute_force(exclude):
    pairs = _pairs(6, 4)
    vecs = _vectors(len(pairs))
    layer = QueryLayer.build(pairs, vecs, k=3, exclude_same_chunk=exclude)
    expected = _brute_knn(vecs, 3, layer.chunk_codes if exclude else None)
    assert [[int(j) for j in row if j >= 0] for row in layer.knn] == expected
    assert layer.chunks == tuple(f"c{c}" for c in range(6))
    if exclude:
        for r, row in enumerate(layer.knn):
            assert all(layer.chunk_codes[j] != layer.chunk_codes[r] for j in row if j >= 0)


def test_ties_go_to_the_earlier_node():
    vecs = np.array([[1, 0], [1, 0], [1, 0], [0, 1]], dtype=np.float32)
    idx, _ = knn_rows(vecs, np.arange(4), 2)
    assert idx[0].tolist() == [1, 2] and idx[2].tolist() == [0, 1]
    assert idx[3].tolist() == [0, 1]


def test_fewer_candidates_than_k_are_padded():
    layer = QueryLayer.build(_pairs(1, 2), _vectors(2), k=3)
    assert layer.knn.shape == (2, 3)
    assert layer.knn[0].tolist() == [1, -1, -1] and layer.neighbor_ids(0) == ["c0::q1"]


@pytest.mark.parametrize("exclude", [False, True])
def test_incremental_insert_equals_rebuild(exclude):
    pairs = _pairs(9, 3)
    vecs = _vectors(len(pairs), seed=3)
    full = QueryLayer.build(pairs, vecs, k=3, exclude_same_chunk=exclude)
    layer = QueryLayer.empty(3, exclude_same_chunk=exclude)
    for start in range(0, len(pairs), 6):  # batches that split chunks too
        layer = layer.added(pairs[start : start + 6], vecs[start : start + 6])
    assert _lists(layer) == _lists(full)
    assert np.allclose(layer.knn_sim[layer.knn >= 0], full.knn_sim[full.knn >= 0])


@pytest.mark.parametrize("exclude", [False, True])
def test_delete_equals_rebuild(exclude):
    pairs = _pairs(8, 3)
    vecs = _vectors(len(pairs), seed=5)
    full = QueryLayer.build(pairs, vecs, k=3, exclude_same_chunk=exclude)
    gone = {"c2", "c5"}
    smaller = full.without_chunks(["c2", "c5", "not-there"])
    keep = [i for i, p in enumerate(pairs) if p.chunk_id not in gone]
    rebuilt = QueryLayer.build(
        [pairs[i] for i in keep], vecs[keep], k=3, exclude_same_chunk=exclude
    )
    assert _lists(smaller) == _lists(rebuilt)
    assert smaller.chunks == rebuilt.chunks
    assert np.array_equal(smaller.chunk_codes, rebuilt.chunk_codes)
    assert full.without_chunks(["nope"]) is full


def test_dimension_and_count_mismatch_are_errors():
    layer = QueryLayer.build(_pairs(1, 2), _vectors(2, d=8), k=2)
    with pytest.raises(ValueError, match="dimension"):
        layer.added(_pairs(1, 1), _vectors(1, d=4))
    with pytest.raises(ValueError, match="query nodes for"):
        layer.added(_pairs(1, 2), _vectors(1, d=8))
