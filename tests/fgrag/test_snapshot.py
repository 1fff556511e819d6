"""The snapshot computed from the compact store's columns equals the general path's."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import EntityNode, Relation
from llama_index.core.schema import TextNode

from llama_index_graphrag_ext.fgrag.expansion import EntityGraph, StringColumn, expand
from llama_index_graphrag_ext.fgrag.extract import BUILT_BY, DESCRIPTIONS, DISPLAY_NAME, SOURCES
from llama_index_graphrag_ext.fgrag.snapshot import _from_compact_records, build_snapshot
from llama_index_graphrag_ext.fgrag.store import CompactPropertyGraphStore


def entity(name: str, descs=(), srcs=(), display=None, vector=None) -> EntityNode:
    props = {BUILT_BY: "test"}
    if display is not None:
        props[DISPLAY_NAME] = display
    props[DESCRIPTIONS] = list(descs)
    props[SOURCES] = list(srcs)
    node = EntityNode(name=name, label="THING", properties=props)
    node.embedding = vector
    return node


def relation(a: str, b: str, descs=None, srcs=(), built_by=True, label="REL") -> Relation:
    props = {} if not built_by else {BUILT_BY: "test"}
    if descs is not None:
        props[DESCRIPTIONS] = list(descs)
        props[SOURCES] = list(srcs)
    return Relation(label=label, source_id=a, target_id=b, properties=props)


def fill(store, embed) -> None:
    """Every rule of the snapshot at least once (the cases FG-RAG's real graphs hit, too)."""
    rng = np.random.default_rng(0)
    dim = len(embed.get_text_embedding("x"))
    vec = lambda: rng.normal(size=dim).astype(np.float32).tolist()  # noqa: E731
    mill = vec()  # the two rows named 'the  mill ' match a query together
    store.upsert_llama_nodes([TextNode(text="One.", id_="c1"), TextNode(text="Two.", id_="c2")])
    store.upsert_nodes(
        [
            entity("ada", ["Ada met Bob.", "Ada wrote."], ["c1", "c2"], "Ada", vec()),
            entity("bob", ["Ada met Bob."], ["c1"], "", vec()),  # empty display: the name
            entity("carl", [], [], None, vec()),  # no description: the name
            entity('the "mill"', ["The Mill."], [], "The Mill", vec()),  # id 'the  mill '
            # the same id as above (it replaces it); its second text is the
            # description of the bare end node 'the "mill"' below, which has
            # the same snapshot name: one owner, so the BFS takes it once
            entity("the  mill ", ["Same id.", 'the "mill"'], ["c2", "c1"], None, mill),
            entity("dora", ["Dora.", "Dora again.", "Dora 3."], ["c1"], "Dora", None),  # no vector
        ]
    )
    store.upsert_relations(
        [
            relation("ada", "bob", ["Ada met Bob."], ["c1"]),
            # another label, the same owner "ada -> bob": its first text is taken once
            relation("ada", "bob", ["Ada met Bob.", "Again."], ["c1", "c2"], label="OTHER"),
            relation("bob", "ada", ["Bob met Ada."], ["c2"]),  # the other owner
            relation("ada", "carl"),  # no descriptions, no built_by: "Ada REL carl"
            relation("carl", "dora", [], [], built_by=True),  # emptied by a deletion: skipped
            relation("ada", "ada", ["Self."], ["c1"]),  # a loop: skipped
            relation("ada", "c1", ["To a chunk."], ["c1"]),  # a chunk end: skipped
            relation('the "mill"', "ada", ["Quoted end."], ["c2"]),  # bare end node, no match
            relation("the  mill ", "dora", ["Mill and Dora."], ["c1", "c2"]),
            relation("dora", "bob", ["Dora knew Bob.", "Twice."], ["c2"]),
        ]
    )
    # The bare end node under its key 'the "mill"' (not its id), given a
    # description from a chunk: two rows named 'the  mill ' then offer the
    # same text, which the BFS takes once (one owner).
    store.graph.nodes['the "mill"'] = entity('the "mill"', ['the "mill"'], ["c2"], None, mill)


def summary(graph: EntityGraph) -> dict:
    return {
        "names": list(graph.names),
        "displays": list(graph.display_names),
        "descriptions": list(graph.descriptions),
        "sources": list(graph.sources),
        "rel_ends": graph.rel_ends.tolist(),
        "rel_descriptions": list(graph.rel_descriptions),
        "rel_sources": list(graph.rel_sources),
        "index_of": {name: graph.index_of[name] for name in graph.names},
        "chunks": sorted(graph.chunks),
    }


def expansions(graph: EntityGraph) -> list:
    out = []
    vectors = np.asarray(graph.vectors)
    for row in range(len(graph)):
        for budget in (3, 50):
            exp = expand(
                graph,
                "q",
                vectors[row],
                lambda text: vectors[len(text) % len(graph)],
                top_n=3,
                strong_top_n=2,
                description_budget=budget,
            )
            out.append((exp.weak, exp.strong, exp.descriptions, exp.visited))
    return out


@pytest.fixture
def stores(bow_embed):
    """The compact store, and a stock store with the very same content.

    (Filled the same way, the stock store would differ: its upsert_relations
    writes each end node back under ``node.id``, which for a name with ``"``
    is not its key, so the bare end node replaces the entity of that id. The
    compact store, as before, adds missing ends only.)
    """
    compact = CompactPropertyGraphStore()
    fill(compact, bow_embed)
    return compact, SimplePropertyGraphStore.from_dict(compact.to_dict())


def test_columns_path_equals_general_path(stores, bow_embed) -> None:
    compact, simple = stores
    general = build_snapshot(simple, bow_embed)
    fast = build_snapshot(compact, bow_embed)
    assert isinstance(fast.names, StringColumn)  # the columns path was taken
    assert summary(fast) == summary(general)
    assert np.array_equal(fast.vectors, general.vectors)
    assert expansions(fast) == expansions(general)
    # the entity without a vector was embedded once and kept in the store
    assert compact.get(ids=["dora"])[0].embedding is not None
    assert np.array_equal(build_snapshot(compact, bow_embed).vectors, general.vectors)


def test_decoded_records_path_equals_general_path(stores, bow_embed) -> None:
    compact, simple = stores
    general = build_snapshot(simple, bow_embed)
    slow = _from_compact_records(compact, compact.columns(), bow_embed)
    assert summary(slow) == summary(general)
    assert np.array_equal(slow.vectors, general.vectors)
    assert expansions(slow) == expansions(general)


def test_names_with_arrows_take_the_decoded_path(bow_embed) -> None:
    compact = CompactPropertyGraphStore()
    one_hot = np.eye(len(bow_embed.get_text_embedding("x")), dtype=np.float32)
    compact.upsert_nodes(
        [
            entity("a -> b", ["x"], ["c"], None, one_hot[0].tolist()),
            entity("a", ["y"], [], None, one_hot[1].tolist()),
        ]
    )
    compact.upsert_relations([relation("a", "b", ["x"], ["c"]), relation("a", "a -> b", ["x"])])
    simple = SimplePropertyGraphStore.from_dict(compact.to_dict())
    general = build_snapshot(simple, bow_embed)
    fast = build_snapshot(compact, bow_embed)
    assert not isinstance(fast.names, StringColumn)
    assert summary(fast) == summary(general)
    assert expansions(fast) == expansions(general)


def test_snapshot_survives_changes_to_the_store(stores, bow_embed) -> None:
    compact, _ = stores
    before = build_snapshot(compact, bow_embed)
    frozen = summary(before), np.array(before.vectors)
    dim = before.vectors.shape[1]
    compact.upsert_nodes([entity("ada", ["Changed."], ["c9"], "Ada", [0.0] * (dim - 1) + [1.0])])
    compact.delete(ids=["bob"])
    compact.upsert_nodes([entity("new", ["New."], ["c1"], None, [1.0] * dim)])
    assert summary(before) == frozen[0] and np.array_equal(before.vectors, frozen[1])
    after = build_snapshot(compact, bow_embed)
    assert "bob" not in after.index_of and "new" in after.index_of


def test_chunk_membership_in_one_batch_equals_one_at_a_time(bow_embed) -> None:
    from llama_index.core.storage.docstore.utils import doc_to_json

    from llama_index_graphrag_ext.core.compact_store import encode_value
    from llama_index_graphrag_ext.fgrag.retriever import _present_chunks

    store = CompactPropertyGraphStore()
    fill(store, bow_embed)  # chunks c1, c2 held as the store's own records
    shared = [TextNode(text=f"Shared {i}.", id_=f"s{i}") for i in range(5)]
    store.upsert_docstore_chunks(
        [n.id_ for n in shared], [encode_value(doc_to_json(n)) for n in shared]
    )
    store.delete(ids=["s3"])
    chunks = build_snapshot(store, bow_embed).chunks
    asked = ["c1", "c2", "s0", "s3", "s4", "ada", "nope", "s1"]
    expected = {i for i in asked if i in chunks}
    assert expected == {"c1", "c2", "s0", "s1", "s4"}  # not deleted chunks, not entities
    assert chunks.present(asked) == expected
    assert _present_chunks(chunks, set(asked) | {""}) == expected
    assert _present_chunks(dict.fromkeys(expected), set(asked)) == expected  # any mapping
