"""Chunk-Selection: knapsack against brute force, budgets, BLEU and cosine values."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from llama_index_graphrag_ext.core.text import bleu, tokenize
from llama_index_graphrag_ext.cue.selection import (
    bleu_values,
    cosine_values,
    knapsack,
    random_values,
    token_budget,
)


def brute_force(weights, values, capacity):
    best = 0.0
    for r in range(len(weights) + 1):
        for combo in itertools.combinations(range(len(weights)), r):
            if sum(weights[i] for i in combo) <= capacity:
                best = max(best, sum(values[i] for i in combo))
    return best


@pytest.mark.parametrize("seed", range(25))
def test_exact_knapsack_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 11))
    weights = rng.integers(1, 40, n).tolist()
    values = rng.random(n).round(3).tolist()
    capacity = int(rng.integers(0, sum(weights) + 1))
    result = knapsack(weights, values, capacity)
    assert result.exact
    assert result.weight == sum(weights[i] for i in result.chosen) <= capacity
    assert result.value == pytest.approx(sum(values[i] for i in result.chosen))
    assert result.value == pytest.approx(brute_force(weights, values, capacity))


@pytest.mark.parametrize("seed", range(15))
def test_rounded_knapsack_is_feasible_and_meets_its_guarantee(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 11))
    weights = rng.integers(5, 200, n).tolist()
    values = rng.random(n).tolist()
    capacity = int(rng.integers(1, sum(weights)))
    result = knapsack(weights, values, capacity, max_cells=max(1, n * (capacity + 1) // 4))
    assert sum(weights[i] for i in result.chosen) == result.weight <= capacity
    # at least the optimum under a budget shrunk by (g - 1) tokens per item
    slack = (result.granularity - 1) * n
    assert result.value + 1e-9 >= brute_force(weights, values, max(0, capacity - slack))
    assert result.value <= brute_force(weights, values, capacity) + 1e-9


def test_rounding_happens_above_max_cells_and_is_reported():
    weights, values = [30, 40, 50, 60], [1.0, 1.5, 2.0, 2.2]
    exact = knapsack(weights, values, 100)
    rounded = knapsack(weights, values, 100, max_cells=40)
    assert exact.exact and not rounded.exact and rounded.granularity == 11
    assert exact.value == pytest.approx(3.7) and exact.chosen == [1, 3]  # 40 + 60 tokens
    assert rounded.weight <= 100 and rounded.value <= exact.value


def test_knapsack_edge_cases():
    assert knapsack([], [], 10).chosen == []
    assert knapsack([5, 5], [1.0, 2.0], 0).chosen == []
    assert knapsack([0, 3], [0.5, 1.0], 2).chosen == [0]  # free item taken, heavy one not
    assert knapsack([2, 2], [-1.0, 1.0], 4).chosen == [1]  # worthless items never
    with pytest.raises(ValueError):
        knapsack([1, 2], [1.0], 3)
    with pytest.raises(ValueError):
        knapsack([-1], [1.0], 3)


def test_token_budget_is_the_ceiling_of_alpha_share():
    assert token_budget([10, 20, 71], 0.5) == 51  # ceil(50.5)
    assert token_budget([10, 20], 0.0) == 0
    assert token_budget([10, 20], 1.0) == 30
    assert token_budget([10] * 10, 0.3) == 30  # no float fuzz: 0.3 * 100 is 30
    with pytest.raises(ValueError):
        token_budget([1], 1.5)


def test_bleu_values_match_a_hand_computation():
    texts = ["the cat sat", "the cat ran", "a dog barked"]
    values = bleu_values(texts, max_n=2)
    # "the cat sat" vs {"the cat ran", "a dog barked"}: p1 = 2/3, p2 = (1+1)/(2+1)
    # (add-one smoothing for n > 1), c = r = 3 so BP = 1.
    expected0 = math.sqrt((2 / 3) * (2 / 3))
    assert values[0] == pytest.approx(expected0)
    assert values[1] == pytest.approx(expected0)
    # "a dog barked" shares no word with the others: p1 = 0, BLEU = 0
    assert values[2] == 0.0
    # and equals the reference implementation on the others
    toks = [tokenize(t, stopwords=False) for t in texts]
    assert values[0] == pytest.approx(bleu(toks[0], [toks[1], toks[2]], max_n=2))


def test_cosine_values_are_mean_similarity_to_the_others():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(6, 5))
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    values = cosine_values(m)
    for i in range(6):
        others = [m[i] @ m[j] for j in range(6) if j != i]
        assert values[i] == pytest.approx(np.mean(others))
    assert cosine_values(m[:1]).tolist() == [0.0]


def test_random_values_are_reproducible():
    assert random_values(5, seed=3).tolist() == random_values(5, seed=3).tolist()
