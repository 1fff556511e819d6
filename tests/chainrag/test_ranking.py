"""The LLM-free retriever's one ranking, its edge ablations and SA's scope (paper §3.1-§3.2).

Hand-made sentence graphs with chosen cosines: each sentence vector is
``c * q + sqrt(1 - c^2) * e_i`` with its own axis ``e_i``, so its cosine to the
query ``q`` is exactly ``c`` and two sentences' cosine is the product of theirs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from llama_index_graphrag_ext.chainrag.config import ChainRAGConfig
from llama_index_graphrag_ext.chainrag.key_entities import KeyCut
from llama_index_graphrag_ext.chainrag.retriever import ranked_chunk_ids
from llama_index_graphrag_ext.chainrag.search import SentenceSearch
from llama_index_graphrag_ext.chainrag.sentence_graph import SentenceGraph
from llama_index_graphrag_ext.chainrag.sentences import SentenceRecord
from llama_index_graphrag_ext.core.arrays import csr
from llama_index_graphrag_ext.core.config import ConfigError
from llama_index_graphrag_ext.core.vectors import MatrixSearch


class _Index:
    """The two things a search reads from its index: the graph and the first-round search."""

    def __init__(self, sg: SentenceGraph) -> None:
        self.sentence_graph = sg
        self.embed_model = None

    def searcher(self, name, snapshot, ids, matrix):
        return MatrixSearch(matrix)


def _graph(rows, ss_pairs=()) -> tuple[SentenceGraph, np.ndarray]:
    """``rows``: (cosine to the query, chunk, position, entities); SS edges as given."""
    n = len(rows)
    q = np.zeros(n + 1, dtype=np.float32)
    q[0] = 1.0
    vectors = np.zeros((n, n + 1), dtype=np.float32)
    for i, (cos, *_rest) in enumerate(rows):
        vectors[i, 0] = cos
        vectors[i, i + 1] = np.sqrt(1.0 - cos * cos)
    records = [
        SentenceRecord(f"sentence {i}", chunk, pos, tuple(ents))
        for i, (_c, chunk, pos, ents) in enumerate(rows)
    ]
    cut = KeyCut(alpha=1.0, max_df=None)
    sg = SentenceGraph.build(records, vectors, m=0, window=3, key_cut=cut)
    a = np.array([i for i, j in ss_pairs] + [j for i, j in ss_pairs], dtype=np.int64)
    b = np.array([j for i, j in ss_pairs] + [i for i, j in ss_pairs], dtype=np.int64)
    ss_ptr, ss_cols = csr(a, b, n)
    return replace(sg, ss_ptr=ss_ptr, ss_cols=ss_cols), q


def _params(**fields):
    """The retrieval settings: the paper's (the class defaults) with ``fields``."""
    return ChainRAGConfig().updated(fields).retrieval


def _chunks(sg, q, top_k=10, rank="one", **kw):
    search = SentenceSearch(_Index(sg), _params(**kw))
    state = search._start(sg, "q", q)
    search.expand(state)
    order, _ = ranked_chunk_ids(state, top_k, rank)
    return order, state


ROWS = [
    (0.95, "seed", 0, ["bridge"]),  # the seed
    (0.05, "low-neighbour", 0, ["bridge"]),  # EC neighbour of the seed, low cosine
    (0.80, "outsider", 0, []),  # high cosine, no edge to the seed
    (0.50, "bridged", 0, ["bridge"]),  # EC neighbour with a middling cosine
    (0.60, "plain", 0, []),  # a middling sentence without edges
]


def test_one_ranking_puts_a_high_cosine_outsider_before_a_low_cosine_neighbour():
    sg, q = _graph(ROWS)
    kw = {"k": 1, "candidate_k": 5, "neighbor_score": "propagate"}
    order, state = _chunks(sg, q, **kw)
    assert state.gathered[1].role == "neighbor" and state.gathered[0].role == "seed"
    assert order.index("outsider") < order.index("low-neighbour")
    # the graph still counts: an EC-bridged middling sentence rises above a plain one
    assert order.index("bridged") < order.index("plain")
    # and never above the sentence that reached it
    assert order[0] == "seed"
    # the earlier graph-first order put every neighbour before the outsider
    graph_first, _ = _chunks(sg, q, rank="graph", **kw)
    assert graph_first.index("low-neighbour") < graph_first.index("outsider")
    # scored against the question alone, expansion cannot reorder the pool
    plain, _ = _chunks(sg, q, k=1, candidate_k=5, neighbor_score="question")
    assert plain == ["seed", "outsider", "plain", "bridged", "low-neighbour"]


def test_neighbours_beyond_the_pool_enter_the_one_ranking():
    sg, q = _graph(ROWS)
    # a pool of 2 (seed, outsider): the bridged sentence is reached only over EC
    order, state = _chunks(sg, q, k=1, candidate_k=2, neighbor_score="propagate")
    assert {r for r, g in state.gathered.items() if g.role == "neighbor"} == {1, 3}
    assert order == ["seed", "bridged", "outsider", "low-neighbour"]
    with pytest.raises(ConfigError, match="no setting 'w_xx'"):
        _params(w_xx=1.0)
    with pytest.raises(ConfigError, match="w_ec"):
        _params(w_ec=-0.1)


# SA then EC: the seed's passage names the bridge in its second sentence only.
CHAIN = [
    (0.90, "film", 0, []),  # seed: matches the question, names no entity
    (0.20, "film", 1, ["director"]),  # same passage, names the bridge entity
    (0.40, "director", 0, ["director"]),  # the second hop's passage
    (0.45, "other", 0, []),  # a distractor between them
    (0.85, "film-like", 0, []),  # SS-close to the seed
]


def _run(kinds, hops=2, w_ss=0.4):
    sg, q = _graph(CHAIN, ss_pairs=[(0, 4)])
    follow = {f"follow_{kind.lower()}": kind in kinds for kind in ("EC", "SS", "SA")}
    params = _params(k=1, candidate_k=5, neighbor_score="propagate", w_ss=w_ss, **follow)
    search = SentenceSearch(_Index(sg), params)
    state = search._start(sg, "q", q)
    for _ in range(hops):
        if not search.expand(state):
            break
    order, _ = ranked_chunk_ids(state, 10)
    return order, {r for r, g in state.gathered.items() if g.role != "seed"}


def test_each_edge_ablation_changes_the_search():
    full, got = _run(("EC", "SS", "SA"))
    assert full.index("director") < full.index("other")  # reached over SA, then EC
    no_sa, got_sa = _run(("EC", "SS"))
    no_ec, got_ec = _run(("SS", "SA"))
    no_ss, got_ss = _run(("EC", "SA"))
    assert no_sa.index("other") < no_sa.index("director")  # the bridge sentence is never reached
    assert no_ec.index("other") < no_ec.index("director")
    assert len({frozenset(got), frozenset(got_sa), frozenset(got_ec), frozenset(got_ss)}) == 4
    assert 4 in got and 4 not in got_ss  # SS brings the seed's nearest sentence


def test_sa_links_sentences_of_one_passage_only():
    # SA's span is a passage's own sentence sequence: two passages next to each
    # other in the corpus (benchmark files list a question's passages together)
    # are never linked by position.
    sg, _ = _graph(CHAIN)
    assert sg.neighbors([1], ("SA",)) == {0: {"SA": [1]}}
    assert sg.neighbors([2], ("SA",)) == {}
    assert sg.sa.nnz == 2  # one pair, both directions
