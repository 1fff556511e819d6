import numpy as np
import pytest

from llama_index_graphrag_ext.core.embeddings import (
    embed_texts,
    knn_graph,
    mutual_knn_edges,
    normalize_rows,
    top_k,
    top_k_of_scores,
    union_knn_edges,
)


def _random_unit(n, d=16, seed=0):
    return normalize_rows(np.random.default_rng(seed).normal(size=(n, d)))


def test_normalize_rows_unit_and_zero_rows():
    m = normalize_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert m.dtype == np.float32
    assert np.allclose(m[0], [0.6, 0.8]) and np.allclose(m[1], 0.0)


def test_top_k_matches_full_sort_and_breaks_ties_by_index():
    scores = np.array([0.5, 0.9, 0.5, 0.1, 0.9, 0.5], dtype=np.float32)
    idx, vals = top_k_of_scores(scores, 4)
    assert idx.tolist() == [1, 4, 0, 2]
    assert np.allclose(vals, [0.9, 0.9, 0.5, 0.5])
    assert top_k_of_scores(scores, 99)[0].tolist() == [1, 4, 0, 2, 5, 3]
    assert top_k_of_scores(scores, 0)[0].size == 0


def test_top_k_with_mask():
    m = _random_unit(50)
    q = m[7]
    mask = np.zeros(50, dtype=bool)
    mask[[3, 9, 11]] = True
    idx, _ = top_k(m, q, 10, mask=mask)
    assert sorted(idx.tolist()) == [3, 9, 11]


@pytest.mark.parametrize("block", [1, 7, 64, 4096])
def test_knn_graph_equals_brute_force(block):
    m = _random_unit(203, seed=1)
    idx, sims = knn_graph(m, 5, block_size=block)
    full = m @ m.T
    np.fill_diagonal(full, -np.inf)
    for i in range(m.shape[0]):
        expected = np.lexsort((np.arange(203), -full[i]))[:5]
        assert idx[i].tolist() == expected.tolist()
        assert np.allclose(sims[i], full[i, expected], atol=1e-6)


def test_knn_graph_against_other_rows_and_small_inputs():
    a, b = _random_unit(10, seed=2), _random_unit(4, seed=3)
    idx, _ = knn_graph(a, 10, others=b)
    assert idx.shape == (10, 4)  # capped at the candidates
    assert knn_graph(a[:1], 3)[0].shape == (1, 0)  # one row has no neighbour but itself
    assert knn_graph(np.zeros((0, 4), np.float32), 3)[0].shape == (0, 0)


def test_mutual_and_union_edges():
    # 0 lists 1, 1 lists 0, 2 lists 1: only 0-1 is mutual
    idx = np.array([[1], [0], [1]])
    sims = np.array([[0.9], [0.9], [0.8]], dtype=np.float32)
    r, c, s = mutual_knn_edges(idx, sims)
    assert list(zip(r.tolist(), c.tolist(), strict=True)) == [(0, 1)]
    assert s.tolist() == pytest.approx([0.9])
    # 0 lists 1, 1 lists 2, 2 lists 1: mutual 1-2; the union adds 0-1
    idx2 = np.array([[1], [2], [1]])
    r, c, _ = mutual_knn_edges(idx2, sims)
    assert list(zip(r.tolist(), c.tolist(), strict=True)) == [(1, 2)]
    r, c, _ = union_knn_edges(idx2, sims)
    assert sorted(zip(r.tolist(), c.tolist(), strict=True)) == [(0, 1), (1, 2)]


def test_embed_texts_keeps_order_whatever_the_length_sorting(bow_embed):
    texts = ["a b c d e f", "x", "", "a b", "quite a long text with many words in it", "x y"]
    got = embed_texts(bow_embed, texts, batch_size=2)
    expected = normalize_rows(np.array([bow_embed.get_text_embedding(t or " ") for t in texts]))
    assert got.shape == (6, 64) and got.dtype == np.float32
    assert np.allclose(got, expected, atol=1e-6)
    assert embed_texts(bow_embed, []).shape == (0, 64)


async def test_aembed_texts_matches_sync(bow_embed):
    from llama_index_graphrag_ext.core.embeddings import aembed_texts

    texts = ["one two", "", "three four five six", "x"]
    assert np.allclose(
        await aembed_texts(bow_embed, texts, batch_size=3), embed_texts(bow_embed, texts)
    )
