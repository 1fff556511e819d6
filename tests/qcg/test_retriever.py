"""Paper §3.4 steps 1-3 on hand-worked graphs: threshold, cap, h-hop expansion, chunk means, ties."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.core.search import MatrixSearch
from llama_index_graphrag_ext.qcg.config import QCGRetrieval
from llama_index_graphrag_ext.qcg.graph import QueryLayer
from llama_index_graphrag_ext.qcg.query_nodes import QueryPair
from llama_index_graphrag_ext.qcg.retriever import collect

QUERY = np.array([1.0, 0.0], dtype=np.float32)


def _unit(c):
    return [c, float(np.sqrt(1 - c * c))]


def _layer(cosines, chunks, knn):
    """A layer with given cosines to QUERY, chunk of each node and kNN lists."""
    pairs = tuple(QueryPair(ch, i, f"q{i}", f"a{i}") for i, ch in enumerate(chunks))
    names = tuple(dict.fromkeys(chunks))
    codes = np.array([names.index(c) for c in chunks])
    width = max(len(r) for r in knn)
    idx = np.array([r + [-1] * (width - len(r)) for r in knn], dtype=np.int64)
    sims = np.where(idx >= 0, 0.5, -np.inf).astype(np.float32)
    matrix = np.array([_unit(c) for c in cosines], dtype=np.float32)
    return QueryLayer(pairs, matrix, codes, names, idx, sims, width)


#        row:   0    1    2    3     4     5
COS = [0.9, 0.3, 0.8, 0.6, -0.2, 0.1]
CHUNKS = ["A", "A", "B", "C", "D", "E"]
KNN = [[5], [3], [4, 1], [], [], []]


def _ranked(params, layer=None):
    layer = layer or _layer(COS, CHUNKS, KNN)
    found = collect(layer, QUERY, params, MatrixSearch(layer.matrix))
    return [layer.chunks[c] for c in found.chunk_codes], found


def test_threshold_keeps_cos_plus_epsilon_at_least_gamma():
    chunks, found = _ranked(QCGRetrieval(gamma=1.5, h=0, n=10))
    assert chunks == ["A", "B", "C"]
    assert sorted(found.rows.tolist()) == [0, 2, 3]
    # gamma 1.0 (cos >= 0) also admits rows 1 and 5, not row 4.
    chunks, found = _ranked(QCGRetrieval(gamma=1.0, h=0, n=10))
    assert sorted(found.rows.tolist()) == [0, 1, 2, 3, 5] and "D" not in chunks


def test_threshold_is_inclusive():
    layer = _layer([0.5, 0.25], ["A", "B"], [[], []])
    chunks, _ = _ranked(QCGRetrieval(gamma=1.5, h=0), layer)
    assert chunks == ["A"]


def test_cap_keeps_the_n_most_similar():
    chunks, found = _ranked(QCGRetrieval(gamma=1.0, h=0, n=2))
    assert sorted(found.rows.tolist()) == [0, 2] and chunks == ["A", "B"]


def test_one_hop_adds_unthresholded_neighbours_and_mean_lowers_a_chunk():
    chunks, found = _ranked(QCGRetrieval(gamma=1.5, h=1, n=2))
    hops = dict(zip(found.rows.tolist(), found.hop.tolist(), strict=True))
    via = dict(zip(found.rows.tolist(), found.via.tolist(), strict=True))
    assert hops == {0: 0, 2: 0, 1: 1, 4: 1, 5: 1}
    assert via[5] == 0 and via[4] == 2 and via[1] == 2
    # A = mean(0.9, 0.3) = 0.6 falls below B = 0.8; E (0.1) and D (-0.2) join.
    assert chunks == ["B", "A", "E", "D"]
    assert np.allclose(found.chunk_scores, [0.8, 0.6, 0.1, -0.2], atol=1e-6)


def test_two_hops_reach_further():
    _, found = _ranked(QCGRetrieval(gamma=1.5, h=2, n=2))
    hops = dict(zip(found.rows.tolist(), found.hop.tolist(), strict=True))
    assert hops[3] == 2  # 2 -> 1 -> 3


def test_top_k_cuts_and_aggregators():
    chunks, _ = _ranked(QCGRetrieval(gamma=1.5, h=1, n=2, K=2))
    assert chunks == ["B", "A"]
    chunks, found = _ranked(QCGRetrieval(gamma=1.5, h=1, n=2, aggregator="max"))
    assert chunks[:2] == ["A", "B"] and found.chunk_scores[0] == pytest.approx(0.9)
    _, found = _ranked(QCGRetrieval(gamma=1.5, h=1, n=2, aggregator="sum"))
    assert found.chunk_scores[0] == pytest.approx(1.2)  # A: 0.9 + 0.3


def test_ties_prefer_more_support_then_the_earlier_chunk():
    # A: one node at 0.5; B: two nodes at 0.5; C: one node at 0.5.
    layer = _layer([0.5, 0.5, 0.5, 0.5], ["A", "B", "B", "C"], [[], [], [], []])
    chunks, _ = _ranked(QCGRetrieval(gamma=1.0, h=0), layer)
    assert chunks == ["B", "A", "C"]


def test_bm25_ranks_join_step_1_and_step_3_by_reciprocal_rank():
    from llama_index_graphrag_ext.qcg.retriever import LexicalRanks

    layer = _layer(COS, CHUNKS, KNN)
    # BM25 ranks node 4 (chunk D, cosine -0.2) first, and chunks E then B.
    lexical = LexicalRanks(nodes=np.array([4]), chunks=np.array([4, 1]))
    params = QCGRetrieval(gamma=0.5, h=0, n=2, bm25_weight=1.0)
    found = collect(layer, QUERY, params, MatrixSearch(layer.matrix), lexical)
    # step 1: cosine's [0, 2] and BM25's [4] fused: 0 and 4 (1/3 each) before 2 (1/4)
    assert sorted(found.rows.tolist()) == [0, 4]
    # step 3: the graph's [A, D] and BM25's [E, B] fused; E joins though no node reached it
    assert [layer.chunks[c] for c in found.chunk_codes] == ["A", "E", "D", "B"]
    assert np.allclose(found.chunk_scores, [1 / 3, 1 / 3, 1 / 4, 1 / 4])
    assert found.bm25_ranks == {4: 1, 1: 2}
    # a node BM25 brings still meets the paper's threshold on its cosine
    strict = collect(
        layer, QUERY, params.model_copy(update={"gamma": 1.0}), MatrixSearch(layer.matrix), lexical
    )
    assert strict.rows.tolist() == [0]
    # weight 0: exactly the paper's steps
    off = QCGRetrieval(gamma=0.5, h=0, n=2)
    plain = collect(layer, QUERY, off, MatrixSearch(layer.matrix))
    given = collect(layer, QUERY, off, MatrixSearch(layer.matrix), lexical)
    assert plain.chunk_codes.tolist() == given.chunk_codes.tolist() == [0, 1]


def test_nothing_passes_or_empty_layer():
    chunks, _ = _ranked(QCGRetrieval(gamma=2.0, h=1))
    assert chunks == []
    empty = QueryLayer.empty(3, dim=2)
    assert len(collect(empty, QUERY, QCGRetrieval(), MatrixSearch(empty.matrix)).chunk_codes) == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"K": 0},
        {"n": 0},
        {"h": -1},
        {"aggregator": "median"},
    ],
)
def test_invalid_parameters(bad):
    with pytest.raises(ValueError):
        QCGRetrieval(**bad)
