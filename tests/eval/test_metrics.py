import pytest

from llama_index_graphrag_ext.eval.metrics import (
    accuracy,
    all_at_k,
    exact_match,
    normalize_answer,
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
