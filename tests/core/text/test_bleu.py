"""BLEU and leave-one-out corpus BLEU (core.text.bleu)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from llama_index_graphrag_ext.core.text import (
    CorpusNgramIndex,
    bleu,
)

CURIE = "Marie Curie was born in Warsaw. She moved to Paris in 1891."


# --- BLEU ------------------------------------------------------------------------------

CAT = ["the", "cat", "sat", "on", "the", "mat"]
CAT_REF = ["the", "cat", "is", "on", "the", "mat"]


def test_bleu_hand_computed():
    # Unigrams: the x2, cat, on, mat match (sat does not): p1 = 5/6.
    # Bigrams: "the cat", "on the", "the mat" of 5: p2 = 3/5. c = r = 6, so BP = 1.
    assert bleu(CAT, [CAT_REF], max_n=2, smoothing="none") == pytest.approx(math.sqrt(0.5))
    # With add-1 smoothing and max_n = 4: p2 = (3+1)/(5+1); trigrams: only "on the mat"
    # matches, p3 = (1+1)/(4+1); 4-grams: none of 3, p4 = (0+1)/(3+1).
    expected = (5 / 6 * 4 / 6 * 2 / 5 * 1 / 4) ** 0.25  # 0.48549
    assert bleu(CAT, [CAT_REF]) == pytest.approx(expected)
    assert expected == pytest.approx(0.485492, abs=1e-6)
    assert bleu(CAT, [CAT_REF], smoothing="none") == 0.0  # no 4-gram match


def test_bleu_identical_and_disjoint():
    assert bleu(CAT, [CAT]) == pytest.approx(1.0)
    assert bleu(CAT, [CAT_REF, CAT]) == pytest.approx(1.0)
    assert bleu(CAT, [["dog", "runs", "fast"]]) == 0.0
    assert bleu([], [CAT]) == 0.0
    assert bleu(CAT, []) == 0.0


def test_bleu_clipping_and_brevity_penalty():
    # clipped by the most generous single reference: "the" counts 2 of 3
    assert bleu(["the"] * 3, [["the"], ["the", "the"]], max_n=1) == pytest.approx(2 / 3)
    # c = 2, closest reference length 3: BP = exp(1 - 3/2)
    short = bleu(["the", "cat"], [["the", "cat", "sat"], ["the", "cat", "sat", "on", "mat"]], 1)
    assert short == pytest.approx(math.exp(-0.5))
    # c = 4 equally close to 3 and 5: the shorter wins, so c > r and BP = 1
    tie = bleu(list("abcd"), [list("abc"), list("abcde")], max_n=1)
    assert tie == pytest.approx(1.0)
    with pytest.raises(ValueError):
        bleu(CAT, [CAT], smoothing="bogus")
    with pytest.raises(ValueError):
        bleu(CAT, [CAT], max_n=0)


def test_corpus_ngram_index_equals_leave_one_out_bleu():
    docs = [
        ["the", "cat", "sat", "on", "the", "mat"],
        ["the", "cat", "is", "on", "the", "mat"],
        ["a", "dog", "sat", "on", "the", "log"],
        ["the", "cat", "sat"],
        ["mat", "the", "on", "sat", "cat", "the"],
    ]
    for smoothing in ("add1", "none"):
        for max_n in (1, 2, 4):
            index = CorpusNgramIndex(docs, max_n=max_n, smoothing=smoothing)
            expected = [
                bleu(doc, docs[:i] + docs[i + 1 :], max_n=max_n, smoothing=smoothing)
                for i, doc in enumerate(docs)
            ]
            np.testing.assert_allclose(index.bleu_all(), expected, rtol=1e-12)
    assert len(CorpusNgramIndex(docs)) == 5


def test_corpus_ngram_index_random_corpora():
    rng = random.Random(3)
    docs = [[rng.choice("abcd") for _ in range(rng.randint(0, 9))] for _ in range(30)]
    docs.append(list(docs[4]))  # an exact duplicate scores 1 against the rest
    index = CorpusNgramIndex(docs)
    for i, doc in enumerate(docs):
        assert index.bleu(i) == pytest.approx(bleu(doc, docs[:i] + docs[i + 1 :]), rel=1e-12)
    if docs[4]:
        assert index.bleu(len(docs) - 1) == pytest.approx(1.0)
    assert CorpusNgramIndex([["a", "b"]]).bleu(0) == 0.0
    with pytest.raises(IndexError):
        index.bleu(len(docs))
