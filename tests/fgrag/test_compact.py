"""The flat-array snapshot and the compact store give exactly what the object versions gave."""

from __future__ import annotations

import random
from collections import deque

import numpy as np
import pytest
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import ChunkNode, EntityNode, Relation
from llama_index.core.schema import TextNode

from llama_index_graphrag_ext.fgrag.expansion import EntityGraph, expand, expand_many
from llama_index_graphrag_ext.fgrag.extract import DESCRIPTIONS, SOURCES
from llama_index_graphrag_ext.fgrag.index import build_snapshot
from llama_index_graphrag_ext.fgrag.store import CompactPropertyGraphStore


def reference_bfs(g, lists, seeds, budget, taken, *, query_scores, per_entity, max_depth):
    """The BFS as it was, over per-entity Python lists and (owner, text) string keys."""
    names, descs, srcs, ends, rdescs, rsrcs = lists
    out, visited = [], []
    if budget <= 0 or not seeds:
        return out, visited
    seen = {i for i, _ in seeds}
    queue = deque((i, 0, s) for i, s in seeds)

    def add(text, kind, owner, chunk, depth, score):
        if (owner, text) in taken:
            return False
        taken.add((owner, text))
        out.append((text, kind, owner, chunk, depth, score))
        return True

    while queue and len(out) < budget:
        i, depth, score = queue.popleft()
        visited.append(i)
        taken_here = 0
        for text, chunk in zip(descs[i], srcs[i], strict=False):
            if len(out) >= budget or (per_entity is not None and taken_here >= per_entity):
                break
            taken_here += add(text, "entity", names[i], chunk, depth, score)
        lo, hi = int(g.indptr[i]), int(g.indptr[i + 1])
        if lo == hi or len(out) >= budget:
            continue
        nbrs, rels = g.adj_nbr[lo:hi], g.adj_rel[lo:hi]
        if query_scores is not None:
            order = np.argsort(-query_scores[nbrs], kind="stable")
            nbrs, rels = nbrs[order], rels[order]
        taken_rel = 0
        for j, r in zip(nbrs.tolist(), rels.tolist(), strict=True):
            if len(out) >= budget or (per_entity is not None and taken_rel >= per_entity):
                break
            a, b = ends[r]
            owner = f"{names[a]} -> {names[b]}"
            added = False
            for text, chunk in zip(rdescs[r], rsrcs[r], strict=False):
                if len(out) >= budget:
                    break
                added |= add(text, "relation", owner, chunk, depth, score)
            taken_rel += added
            if j not in seen and (max_depth is None or depth < max_depth):
                seen.add(j)
                queue.append((j, depth + 1, score))
    return out, visited


def random_lists(rng: random.Random, n: int, m: int):
    pool = [f"sentence {k}" for k in range(25)]  # shared texts, as co-occurrence gives
    names = [f"e{i}" for i in range(n)]
    descs = [rng.sample(pool, rng.randint(0, 6)) for _ in range(n)]
    # sources sometimes shorter than descriptions (a store without all of them)
    srcs = [
        [f"c{rng.randint(0, 5)}" for _ in d[: rng.choice([len(d), max(0, len(d) - 2)])]]
        for d in descs
    ]
    ends = [(rng.randrange(n), rng.randrange(n)) for _ in range(m)]
    ends += ends[:3]  # several relations between the same pair (same owner string)
    rdescs = [rng.sample(pool, rng.randint(1, 3)) for _ in ends]
    rsrcs = [[f"c{rng.randint(0, 5)}" for _ in d] for d in rdescs]
    return names, descs, srcs, ends, rdescs, rsrcs


def test_flat_bfs_matches_reference_on_random_graphs() -> None:
    rng = random.Random(7)
    for trial in range(60):
        lists = random_lists(rng, n=rng.randint(2, 14), m=rng.randint(0, 30))
        names, descs, srcs, ends, rdescs, rsrcs = lists
        vectors = np.random.default_rng(trial).normal(size=(len(names), 4)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        g = EntityGraph(names, names, descs, srcs, vectors, np.asarray(ends), rdescs, rsrcs)
        scores = vectors @ vectors[0]
        seeds = [(i, float(scores[i])) for i in rng.sample(range(len(names)), min(3, len(names)))]
        for per_entity in (None, 1, 2):
            for max_depth in (None, 0, 2):
                for qs in (scores, None):
                    budget = rng.randint(1, 20)
                    taken_ref: set = set()
                    taken_new: set = set()
                    for context in ("weak", "strong"):  # two passes share `taken`
                        want = reference_bfs(
                            g, lists, seeds, budget, taken_ref,
                            query_scores=qs, per_entity=per_entity, max_depth=max_depth,
                        )  # fmt: skip
                        got, visited = g.bfs(
                            seeds, budget, taken_new, context,
                            query_scores=qs, per_entity=per_entity, max_depth=max_depth,
                        )  # fmt: skip
                        assert visited == want[1]
                        assert [
                            (d.text, d.kind, d.owner, d.chunk_id, d.depth, d.seed_score)
                            for d in got
                        ] == want[0]
                        seeds = seeds[::-1]


def test_row_views_keep_the_list_api() -> None:
    g = EntityGraph(
        ["a", "b"], ["A", "B"], [["x", "y"], ["y"]], [["c1", "c2"], []],
        np.eye(2, dtype=np.float32), np.asarray([(0, 1)]), [["a-b"]], [["c3"]],
    )  # fmt: skip
    assert g.descriptions[0] == ["x", "y"] and g.descriptions[1] == ["y"]
    assert g.sources[1] == [] and g.rel_descriptions[0] == ["a-b"]
    assert g.texts.count("y") == 1  # held once for both entities
    assert [list(d) for d in g.descriptions] == [["x", "y"], ["y"]]


def test_expand_many_equals_one_at_a_time() -> None:
    rng = random.Random(3)
    names, descs, srcs, ends, rdescs, rsrcs = random_lists(rng, 12, 25)
    vectors = np.random.default_rng(1).normal(size=(12, 5)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    g = EntityGraph(names, names, descs, srcs, vectors, np.asarray(ends), rdescs, rsrcs)
    queries = vectors[[0, 3, 7]] + 0.1
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)

    def strong(text: str) -> np.ndarray:
        v = np.ones(5, dtype=np.float32) + len(text)
        return v / np.linalg.norm(v)

    together = expand_many(
        g, ["p", "q", "r"], queries, strong, top_n=3, strong_top_n=2, description_budget=6
    )
    for exp, name, vec in zip(together, ["p", "q", "r"], queries, strict=True):
        alone = expand(g, name, vec, strong, top_n=3, strong_top_n=2, description_budget=6)
        # Batched and single matrix products round differently in the last bits.
        for got, want in ((exp.weak, alone.weak), (exp.strong, alone.strong)):
            assert [n for n, _ in got] == [n for n, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-6)
        assert exp.visited == alone.visited
        assert [(d.text, d.owner, d.depth) for d in exp.descriptions] == [
            (d.text, d.owner, d.depth) for d in alone.descriptions
        ]


def filled(store) -> None:
    chunk = TextNode(text="Ada met Charles.", id_="c1")
    store.upsert_llama_nodes([chunk])
    ada = EntityNode(
        name="ada", label="PERSON", properties={DESCRIPTIONS: ["Ada met Charles."], SOURCES: ["c1"]}
    )
    ada.embedding = [0.5, 0.75, 0.0]  # float32-exact: the store keeps float32
    charles = EntityNode(
        name="charles", label="PERSON", properties={DESCRIPTIONS: ["x"], SOURCES: ["c1"]}
    )
    charles.embedding = [0.0, 0.0, 2.0]
    store.upsert_nodes([ada, charles])
    store.upsert_relations(
        [
            Relation(
                label="MET",
                source_id="ada",
                target_id="charles",
                properties={DESCRIPTIONS: ["met"], SOURCES: ["c1"]},
            )
        ]
    )


def test_compact_store_behaves_like_the_simple_store(tmp_path) -> None:
    compact, simple = CompactPropertyGraphStore(), SimplePropertyGraphStore()
    filled(compact)
    filled(simple)
    assert compact.get(ids=["ada"])[0] == simple.get(ids=["ada"])[0]
    assert [n.id for n in compact.get()] == [n.id for n in simple.get()]
    assert sorted(str(t) for t in compact.get_triplets(entity_names=["ada"])) == sorted(
        str(t) for t in simple.get_triplets(entity_names=["ada"])
    )
    assert compact.to_dict() == simple.to_dict()
    # the persisted JSON is the stock layout: either class loads it
    path = str(tmp_path / "pg.json")
    compact.persist(path)
    assert SimplePropertyGraphStore.from_persist_path(path).to_dict() == simple.to_dict()
    assert CompactPropertyGraphStore.from_persist_path(path).to_dict() == simple.to_dict()
    compact.delete(ids=["charles"])
    simple.delete(ids=["charles"])
    assert compact.to_dict() == simple.to_dict()


def test_snapshot_of_compact_store_equals_general_path() -> None:
    compact, simple = CompactPropertyGraphStore(), SimplePropertyGraphStore()
    filled(compact)
    filled(simple)
    a, b = build_snapshot(compact, None), build_snapshot(simple, None)
    assert a.names == b.names and np.array_equal(a.vectors, b.vectors)
    assert (
        list(a.descriptions) == list(b.descriptions) and a.rel_ends.tolist() == b.rel_ends.tolist()
    )
    assert list(a.rel_descriptions) == list(b.rel_descriptions)
    assert sorted(a.chunks) == sorted(b.chunks) == ["c1"]
    assert a.chunks["c1"].get_content() == b.chunks["c1"].get_content() == "Ada met Charles."
    assert isinstance(compact.get(ids=["c1"])[0], ChunkNode)
