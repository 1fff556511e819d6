"""Weak and strong context sets and the BFS budgets on a hand-built graph."""

from __future__ import annotations

import numpy as np

from llama_index_graphrag_ext.fgrag.expansion import EntityGraph, expand


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def make_graph() -> EntityGraph:
    # a - b - c - d chain, plus e linked to a; vectors on 3 axes.
    names = ["a", "b", "c", "d", "e"]
    vectors = np.stack(
        [unit(1, 0, 0), unit(0.9, 0.1, 0), unit(0, 1, 0), unit(0, 0, 1), unit(0.5, 0.5, 0)]
    )
    descs = [[f"{n}{k}" for k in range(3)] for n in names]
    srcs = [[f"chunk-{n}"] * 3 for n in names]
    ends = np.asarray([(0, 1), (1, 2), (2, 3), (0, 4)])
    rel_descs = [["a-b"], ["b-c"], ["c-d"], ["a-e"]]
    rel_srcs = [["chunk-ab"], ["chunk-bc"], ["chunk-cd"], ["chunk-ae"]]
    return EntityGraph(
        names, [n.upper() for n in names], descs, srcs, vectors, ends, rel_descs, rel_srcs
    )


def test_adjacency_is_undirected_csr() -> None:
    g = make_graph()
    assert [g.degree(i) for i in range(5)] == [2, 2, 2, 1, 1]
    lo, hi = g.indptr[1], g.indptr[2]
    assert sorted(g.adj_nbr[lo:hi].tolist()) == [0, 2]


def test_weak_and_strong_context_sets() -> None:
    g = make_graph()
    seen = []

    def embed_strong(text: str) -> np.ndarray:
        seen.append(text)
        return unit(0, 1, 0)  # the joined names point at c

    exp = expand(g, "q", unit(1, 0, 0), embed_strong, top_n=2, strong_top_n=1, max_depth=0)
    assert [n for n, _ in exp.weak] == ["a", "b"]  # Eq. 6: nearest to the query entity
    assert seen == ["A\nB"]  # Eq. 7: E_w's names, joined, are the second query
    assert [n for n, _ in exp.strong] == ["c"]
    contexts = {d.context for d in exp.descriptions}
    assert contexts == {"weak", "strong"}
    texts = [d.text for d in exp.descriptions]
    assert len(texts) == len(set(texts))  # deduplicated across the two passes


def test_bfs_budget_per_pass_and_order() -> None:
    g = make_graph()
    exp = expand(
        g,
        "q",
        unit(1, 0, 0),
        lambda _: unit(0, 0, 1),
        top_n=1,
        strong_top_n=1,
        description_budget=4,
    )
    weak = [d for d in exp.descriptions if d.context == "weak"]
    strong = [d for d in exp.descriptions if d.context == "strong"]
    assert len(weak) == 4 and len(strong) == 4  # each pass adds at most the budget
    # the seed's own descriptions first, then its edges, nearest neighbour (b) before e
    assert [d.text for d in weak] == ["a0", "a1", "a2", "a-b"]
    assert weak[0].depth == 0 and weak[0].chunk_id == "chunk-a"
    assert strong[0].text == "d0"


def test_bfs_reaches_further_hops_with_per_entity_cap() -> None:
    g = make_graph()
    exp = expand(
        g,
        "q",
        unit(1, 0, 0),
        lambda _: unit(1, 0, 0),
        top_n=1,
        description_budget=10,
        per_entity=1,
        use_strong=False,
    )
    depths = {d.owner: d.depth for d in exp.descriptions if d.kind == "entity"}
    assert depths["a"] == 0 and depths["b"] == 1 and depths["c"] == 2
    assert exp.strong == []
    assert exp.visited[0] == "a"


def test_bfs_max_depth_and_empty_graph() -> None:
    g = make_graph()
    exp = expand(
        g,
        "q",
        unit(1, 0, 0),
        lambda _: unit(1, 0, 0),
        top_n=1,
        per_entity=1,
        max_depth=1,
        use_strong=False,
        description_budget=50,
    )
    assert max(d.depth for d in exp.descriptions) == 1
    empty = EntityGraph([], [], [], [], np.zeros((0, 3)), np.zeros((0, 2)), [], [])
    assert expand(empty, "q", unit(1, 0, 0), lambda _: unit(1, 0, 0)).descriptions == []


def test_expansion_is_deterministic() -> None:
    g = make_graph()
    runs = [
        [d.text for d in expand(g, "q", unit(1, 1, 0), lambda _: unit(0, 1, 1)).descriptions]
        for _ in range(3)
    ]
    assert runs[0] == runs[1] == runs[2]
