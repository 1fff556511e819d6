"""Okapi BM25 (core.text.bm25)."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from llama_index_graphrag_ext.core.text import (
    BM25,
)

CURIE = "Marie Curie was born in Warsaw. She moved to Paris in 1891."


# --- BM25 --------------------------------------------------------------------------------

CORPUS = [["a", "b", "a"], ["b", "c"], ["c", "d", "e", "f"]]


def _idf(n, df):
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def test_bm25_hand_computed():
    k1, b = 1.5, 0.75
    bm = BM25(k1=k1, b=b).fit(CORPUS)
    assert len(bm) == 3
    # N = 3, avgdl = (3 + 2 + 4) / 3 = 3; df(a) = 1, df(c) = 2.
    idf_a = _idf(3, 1)  # log(1 + 2.5 / 1.5) = 0.98083
    idf_c = _idf(3, 2)  # log(1 + 1.5 / 2.5) = 0.47000
    assert idf_a == pytest.approx(0.980829, abs=1e-6)
    assert idf_c == pytest.approx(0.470004, abs=1e-6)
    # doc 0: tf(a) = 2, |d| = 3 -> 0.98083 * 2 * 2.5 / (2 + 1.5 * (0.25 + 0.75 * 3 / 3))
    s0 = idf_a * 2 * (k1 + 1) / (2 + k1 * (1 - b + b * 3 / 3))
    # doc 1: tf(c) = 1, |d| = 2 -> 0.47 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2 / 3))
    s1 = idf_c * 1 * (k1 + 1) / (1 + k1 * (1 - b + b * 2 / 3))
    # doc 2: tf(c) = 1, |d| = 4
    s2 = idf_c * 1 * (k1 + 1) / (1 + k1 * (1 - b + b * 4 / 3))
    assert (s0, s1, s2) == pytest.approx((1.401185, 0.552946, 0.408699), abs=1e-5)
    scores = bm.scores(["a", "c", "zzz"])
    assert scores.dtype == np.float32
    np.testing.assert_allclose(scores, [s0, s1, s2], rtol=1e-6)
    # a repeated query term counts once per occurrence
    np.testing.assert_allclose(bm.scores(["c", "c"]), [0, 2 * s1, 2 * s2], rtol=1e-6)
    assert bm.score(["a", "c"], 1) == pytest.approx(s1, rel=1e-6)
    weights = bm.term_weights(0)
    assert set(weights) == {"a", "b"}
    assert weights["a"] == pytest.approx(s0, rel=1e-6)
    assert bm.term_weights(-1).keys() == {"c", "d", "e", "f"}
    with pytest.raises(IndexError):
        bm.term_weights(3)


def test_bm25_top_k_order_ties_and_bounds():
    bm = BM25().fit([["x"], ["a", "b"], ["a", "b"], ["a"], ["a", "b"]])
    idx, scores = bm.top_k(["b"], 2)
    assert idx.tolist() == [1, 2]  # three-way tie at the top: lower indices first
    assert scores[0] == scores[1] > 0
    idx, scores = bm.top_k(["a", "b"], 10)  # k > n returns all, descending
    assert idx.tolist() == [1, 2, 4, 3, 0]
    assert np.all(np.diff(scores) <= 0)
    assert bm.top_k(["a"], 0)[0].size == 0


def test_bm25_top_k_matches_stable_sort():
    rng = random.Random(7)
    corpus = [[rng.choice("abcdef") for _ in range(rng.randint(1, 5))] for _ in range(200)]
    bm = BM25().fit(corpus)
    query = ["a", "c"]
    scores = bm.scores(query)
    expected = np.argsort(-scores, kind="stable")
    for k in (1, 5, 37, 200, 500):
        idx, top = bm.top_k(query, k)
        assert idx.tolist() == expected[:k].tolist()
        np.testing.assert_array_equal(top, scores[expected[:k]])


def test_bm25_empty_inputs():
    bm = BM25().fit(CORPUS)
    assert bm.scores([]).tolist() == [0.0, 0.0, 0.0]
    assert bm.scores(["unknown"]).tolist() == [0.0, 0.0, 0.0]
    empty = BM25().fit([])
    assert len(empty) == 0
    assert empty.scores(["a"]).shape == (0,)
    idx, scores = empty.top_k(["a"], 3)
    assert idx.size == 0 and scores.size == 0
    blank_docs = BM25().fit([[], []])
    assert blank_docs.scores(["a"]).tolist() == [0.0, 0.0]
    assert blank_docs.term_weights(0) == {}
    with pytest.raises(TypeError):
        BM25().fit(["not", "tokenised"])


def test_bm25_add_equals_fit_and_roundtrip():
    full = BM25().fit(CORPUS + [["a", "g"]])
    grown = BM25().fit(CORPUS[:1]).add(CORPUS[1:]).add([["a", "g"]])
    for query in (["a"], ["c", "g"], ["b", "f", "a"]):
        np.testing.assert_allclose(grown.scores(query), full.scores(query), rtol=1e-6)
    restored = BM25.from_dict(json.loads(json.dumps(grown.to_dict())))
    assert len(restored) == 4 and (restored.k1, restored.b) == (grown.k1, grown.b)
    np.testing.assert_array_equal(restored.scores(["a", "g"]), grown.scores(["a", "g"]))
    assert restored.term_weights(3) == grown.term_weights(3)
    with pytest.raises(ValueError):
        BM25.from_dict({"format": "other"})
