import numpy as np
import pytest

from llama_index_graphrag_ext.eval.metrics import (
    accuracy,
    all_at_k,
    exact_match,
    normalize_answer,
    paired_bootstrap,
    percentile,
    recall_at_k,
    token_f1,
)


def test_recall_and_all_at_k_hand_computed():
    ranked = ["p3", "p1", "p9", "p2", "p7"]
    gold = ["p1", "p2", "p4"]
    assert recall_at_k(ranked, gold, 2) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, gold, 5) == pytest.approx(2 / 3)
    assert all_at_k(ranked, gold, 5) == 0.0
    assert all_at_k(ranked, ["p3", "p2"], 5) == 1.0
    assert all_at_k(ranked, ["p3", "p2"], 3) == 0.0
    with pytest.raises(ValueError):
        recall_at_k(ranked, [], 5)


def test_answer_metrics_hand_computed():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert exact_match("the Anglican Communion", ["Anglican Communion"]) == 1.0
    assert exact_match("Anglican", ["Anglican Communion"]) == 0.0
    # prediction "stanley hall was president" vs gold "g stanley hall":
    # common = {stanley, hall} = 2; precision 2/4, recall 2/3, F1 = 2*(.5*.6667)/(1.1667) = 0.5714
    assert token_f1("Stanley Hall was president", ["G. Stanley Hall"]) == pytest.approx(4 / 7)
    assert token_f1("nothing", ["Hall"]) == 0.0
    assert accuracy("It was G. Stanley Hall.", ["G. Stanley Hall", "x"]) == 1.0
    assert accuracy("Hall", ["G. Stanley Hall"]) == 0.0
    assert percentile([1, 2, 3, 4], 50) == 2.5 and percentile([], 95) == 0.0


def test_paired_bootstrap_of_a_method_against_itself_is_zero():
    scores = [0.0, 0.5, 1.0, 1.0, 0.5, 0.0, 1.0]
    assert paired_bootstrap(scores, scores) == {"mean": 0.0, "low": 0.0, "high": 0.0, "n": 7}


def test_paired_bootstrap_interval_of_a_method_better_on_every_question_is_above_zero():
    rng = np.random.default_rng(3)
    base = rng.uniform(0, 0.5, size=100)
    better = base + rng.uniform(0.01, 0.3, size=100)
    result = paired_bootstrap(better, base, resamples=2000)
    assert 0 < result["low"] <= result["mean"] <= result["high"]
    assert result["mean"] == pytest.approx(float(np.mean(better - base)))
    # And the mirror image: worse everywhere, the interval is below zero.
    worse = paired_bootstrap(base, better, resamples=2000)
    assert worse["high"] < 0


def test_paired_bootstrap_is_deterministic_with_the_seed_and_brackets_noise():
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 3, size=80) / 2, rng.integers(0, 3, size=80) / 2
    first, again = paired_bootstrap(a, b, seed=7), paired_bootstrap(a, b, seed=7)
    assert first == again
    assert paired_bootstrap(a, b, seed=8) != first  # the seed is what fixes it
    assert first["low"] < first["mean"] < first["high"]
    assert first["n"] == 80
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [1.0, 0.0])
