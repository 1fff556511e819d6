"""Weak and strong context sets, the BFS budgets and the relation sources on a hand-built graph."""

from __future__ import annotations

import numpy as np
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import EntityNode, Relation

from llama_index_graphrag_ext.fgrag.expansion import GraphNeighbours, expand_many
from llama_index_graphrag_ext.fgrag.graph import EntityGraph, GraphBuilder
from llama_index_graphrag_ext.fgrag.stores import StoreNeighbours, write_graph

AXES = {
    "A": (1, 0, 0),
    "B": (0.9, 0.1, 0),
    "C": (0, 1, 0),
    "D": (0, 0, 1),
    "E": (0.5, 0.5, 0),
}


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def by_name(texts: list[str]) -> np.ndarray:
    """Entity vectors from the display name that starts each embedded text."""
    return np.stack([unit(*AXES[t.split(":")[0]]) for t in texts])


def entity(name: str, descriptions: list[str]) -> EntityNode:
    return EntityNode(
        name=name,
        label="THING",
        properties={"display_name": name.upper(), "descriptions": descriptions},
    )


def relation(a: str, b: str, text: str) -> Relation:
    return Relation(label="LINK", source_id=a, target_id=b, properties={"descriptions": [text]})


def make_graph() -> EntityGraph:
    """A chain a - b - c - d plus e linked to a; three descriptions per entity."""
    builder = GraphBuilder(None, cap=50)
    for name in "abcde":
        builder.add(f"chunk-{name}", [entity(name, [f"{name}{k}" for k in range(3)])], [])
    for a, b in ("ab", "bc", "cd", "ae"):
        builder.add(f"chunk-{a}{b}", [], [relation(a, b, f"{a}-{b}")])
    return builder.finish(by_name)[0]


def expand(graph: EntityGraph, vector: np.ndarray, strong: np.ndarray, **kwargs):
    return expand_many(graph, ["q"], vector[None, :], lambda texts: strong[None, :], **kwargs)[0]


def test_adjacency_is_undirected_csr() -> None:
    g = make_graph()
    assert [g.degree(i) for i in range(5)] == [2, 2, 2, 1, 1]
    nbrs, rels = GraphNeighbours(g).of(1)
    assert sorted(nbrs.tolist()) == [0, 2]
    assert rels.tolist() == sorted(rels.tolist())  # by relation row


def test_weak_and_strong_context_sets() -> None:
    g = make_graph()
    seen = []

    def embed_strong(texts: list[str]) -> np.ndarray:
        seen.extend(texts)
        return unit(0, 1, 0)[None, :]  # the joined names point at c

    exp = expand_many(
        g, ["q"], unit(1, 0, 0)[None, :], embed_strong, top_n=2, strong_top_n=1, max_depth=0
    )[0]
    assert [n for n, _ in exp.weak] == ["a", "b"]  # Eq. 6: nearest to the query entity
    assert seen == ["A\nB"]  # Eq. 7: E_w's names, joined, are the second query
    assert [n for n, _ in exp.strong] == ["c"]
    assert {d.context for d in exp.descriptions} == {"weak", "strong"}
    texts = [d.text for d in exp.descriptions]
    assert len(texts) == len(set(texts))  # deduplicated across the two passes


def test_bfs_budget_per_pass_and_order() -> None:
    g = make_graph()
    exp = expand(g, unit(1, 0, 0), unit(0, 0, 1), top_n=1, strong_top_n=1, description_budget=4)
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
        unit(1, 0, 0),
        unit(1, 0, 0),
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
        unit(1, 0, 0),
        unit(1, 0, 0),
        top_n=1,
        per_entity=1,
        max_depth=1,
        use_strong=False,
        description_budget=50,
    )
    assert max(d.depth for d in exp.descriptions) == 1
    empty = EntityGraph.empty(3)
    assert expand(empty, unit(1, 0, 0), unit(1, 0, 0)).descriptions == []


def test_a_sentence_shared_by_entities_and_relations_is_gathered_once() -> None:
    # The co-occurrence graph's shape: one sentence describes both entities and their relation.
    sentence = "A met B in C."
    builder = GraphBuilder(None, cap=50)
    builder.add(
        "chunk-1",
        [entity("a", [sentence]), entity("b", [sentence]), entity("c", [sentence])],
        [relation("a", "b", sentence), relation("b", "c", sentence)],
    )
    g = builder.finish(by_name)[0]
    exp = expand(g, unit(1, 0, 0), unit(0, 1, 0), top_n=3, strong_top_n=3)
    assert [d.text for d in exp.descriptions] == [sentence]  # what the summary reads
    # every owner's copy stays a hit: the chunk ranking's evidence, as the budget counts them
    assert len(exp.hits) == 5 and {d.owner for d in exp.hits} >= {"a", "b", "c", "a -> b"}


def test_store_neighbours_walk_like_the_in_memory_arrays() -> None:
    g = make_graph()
    store = SimplePropertyGraphStore()
    write_graph(store, g)
    from_store = StoreNeighbours(store, g)
    for vector in (unit(1, 0, 0), unit(0, 1, 1), unit(0.2, 0.1, 1)):
        kwargs = {"top_n": 2, "strong_top_n": 2, "description_budget": 6}
        in_memory = expand(g, vector, unit(0, 0, 1), **kwargs)
        stored = expand(g, vector, unit(0, 0, 1), neighbours=from_store, **kwargs)
        assert stored.descriptions == in_memory.descriptions
    assert from_store.calls >= 1


def test_expansion_is_deterministic() -> None:
    g = make_graph()
    runs = [
        [d.text for d in expand(g, unit(1, 1, 0), unit(0, 1, 1)).descriptions] for _ in range(3)
    ]
    assert runs[0] == runs[1] == runs[2]


def test_relation_ends_named_with_quotes_join_their_entities() -> None:
    # LlamaIndex writes a '"' in a name as a space in the node id; relations name the ends.
    builder = GraphBuilder(None, cap=50)
    quoted = EntityNode(name='david "tarw" jones', label="PERSON", properties={})
    other = EntityNode(name="wales", label="GPE", properties={})
    rel = Relation(label="PLAYED_FOR", source_id='david "tarw" jones', target_id="wales")
    builder.add("chunk-1", [quoted, other], [rel])
    g = builder.finish(lambda texts: np.ones((len(texts), 3), dtype=np.float32))[0]
    assert len(g) == 2 and g.num_relations == 1
    assert g.relation_key(0) == (quoted.id, "PLAYED_FOR", "wales")
