"""Q-Iter on a hand-built graph: anchoring, constrained expansion, query updating, pruning."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.core.search import MatrixSearch
from llama_index_graphrag_ext.cue.qiter import anchor_entities, beam_search
from llama_index_graphrag_ext.cue.scoring import EmbeddingScorer
from llama_index_graphrag_ext.cue.view import build_view


def unit(*xs):
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


Q = unit(1, 1, 0)
UNITS = np.stack(
    [
        unit(1, 0.05, 0),  # 0 uA: close to q without updating
        unit(1, 0.9, 0),  # 1 uB: nearest q
        unit(0, 1, 0),  # 2 uC: what q - uB points to
        unit(0, 0, 1),  # 3 uD: unrelated, reached through entity 1
        unit(0.2, 0.2, 1),  # 4 uE: entity 2 only
    ]
)
# entity 0 -> uA, uB, uC; entity 1 -> uC, uD; entity 2 -> uD, uE
EDGES = [(0, 0), (1, 0), (2, 0), (2, 1), (3, 1), (3, 2), (4, 2)]


def make_view():
    return build_view(
        unit_ids=[f"u{i}" for i in range(5)],
        unit_texts=["uA", "uB", "uC", "uD", "uE"],
        unit_matrix=UNITS,
        entity_ids=["entity:e0", "entity:e1", "entity:e2"],
        entity_names=["E0", "E1", "E2"],
        entity_matrix=np.eye(3, dtype=np.float32),
        edges_unit_entity=EDGES,
        unit_chunks=[("c0",), ("c0",), ("c1",), ("c2",), ("c2",)],
        chunk_ids=["c0", "c1", "c2"],
        chunk_matrix=np.eye(3, dtype=np.float32),
    )


class TableScorer:
    """Path score = sum of fixed per-unit values (so pruning is checkable by hand)."""

    name = "table"

    def __init__(self, values):
        self.values = values
        self.calls = []

    def score_paths(self, query, query_vec, view, paths):
        self.calls.append(list(paths))
        return np.array([sum(self.values[u] for u in p) for p in paths])

    def score_chunks(self, query, query_vec, view, rows, texts):
        return np.zeros(len(rows))


def test_view_adjacency_both_ways():
    view = make_view()
    assert [a.tolist() for a in view.entity_units] == [[0, 1, 2], [2, 3], [3, 4]]
    assert [a.tolist() for a in view.unit_entities] == [[0], [0], [0, 1], [1, 2], [2]]


def test_depth_one_takes_the_top_k_linked_units_by_cosine():
    view = make_view()
    kept = beam_search(view, "q", Q, [0], EmbeddingScorer(), top_k=2, depth=1, beam=5)
    assert [p.units for p in kept[0]] == [(1,), (0,)]  # uB then uA; uC (0.707) cut by K=2
    assert kept[0][0].score == pytest.approx(float(UNITS[1] @ Q))


def test_query_updating_moves_the_second_hop_to_uncovered_content():
    view = make_view()
    with_qu = beam_search(view, "q", Q, [0], EmbeddingScorer(), top_k=1, depth=2, beam=1)
    without = beam_search(
        view, "q", Q, [0], EmbeddingScorer(), top_k=1, depth=2, beam=1, use_qu=False
    )
    # depth 1 is the same: uB; depth 2 from entity 0 ranks {uA, uC} by phi
    assert with_qu[0][0].units == without[0][0].units == (1,)
    assert with_qu[1][0].units == (1, 2)  # phi = q - uB favours uC
    assert without[1][0].units == (0, 1)  # phi = q favours uA
    assert np.allclose(with_qu[1][0].vector, Q - UNITS[1] - UNITS[2])
    assert np.allclose(without[1][0].vector, Q)
    assert with_qu[1][0].trail() == [(0, 1), (0, 2)]


def test_beam_keeps_the_global_top_m_and_anchors_on_all_entities_of_the_new_unit():
    view = make_view()
    scorer = TableScorer({0: 0.1, 1: 0.2, 2: 0.9, 3: 0.5, 4: 0.3})
    kept = beam_search(view, "q", Q, [0, 1, 2], scorer, top_k=3, depth=2, beam=2)
    # depth 1: candidates (0,),(1,),(2,),(3,),(4,) (uC reached twice, scored once)
    assert sorted(scorer.calls[0]) == [(0,), (1,), (2,), (3,), (4,)]
    assert [p.units for p in kept[0]] == [(2,), (3,)]  # 0.9 and 0.5; the rest pruned
    # depth 2 expands from every entity of uC (e0, e1) and of uD (e1, e2), never
    # re-adding a unit already on the path
    expected = {(0, 2), (1, 2), (2, 3), (3, 4)}
    assert set(scorer.calls[1]) == expected
    assert [p.units for p in kept[1]] == [(2, 3), (1, 2)]  # 1.4 then 1.1
    assert all(len(set(p.units)) == len(p.units) for level in kept for p in level)


def test_search_stops_when_nothing_is_left_to_expand():
    view = make_view()
    kept = beam_search(view, "q", Q, [2], EmbeddingScorer(), top_k=5, depth=5, beam=10)
    assert len(kept[-1][0].units) <= 5 and len(kept) <= 5
    assert beam_search(view, "q", Q, [], EmbeddingScorer()) == []


def test_entity_anchoring_spreading_activation_and_knowledge_anchoring():
    view = make_view()
    # SA: a query entity vector nearest e1, then e0 (top-K = 2)
    query_entities = {"thing": unit(0.3, 1, 0)}
    search = {
        "entity_search": MatrixSearch(view.entity_matrix),
        "unit_search": MatrixSearch(view.unit_matrix),
    }
    sa = anchor_entities(view, Q, query_entities, 2, use_ka=False, **search)
    assert sa.spreading == {"thing": [1, 0]} and sa.seeds == [1, 0]
    # KA: the top-2 units nearest q are uB, uA -> their entities {e0}
    ka = anchor_entities(view, Q, query_entities, 2, use_sa=False, **search)
    assert ka.knowledge_units == [1, 0] and ka.seeds == [0]
    both = anchor_entities(view, Q, query_entities, 2, **search)
    assert set(both.seeds) == {0, 1}
    assert anchor_entities(view, Q, {}, 2, use_ka=False, **search).seeds == []
