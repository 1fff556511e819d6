"""The compact chunk-unit-entity layers against the networkx TypedGraph they replaced.

The index used to keep a :class:`TypedGraph` and read its view from it. These
tests rebuild that graph the old way (a copy of the old ``_add_chunks`` and
``_remove_chunks``) and check that the arrays, the graph made from them, the
retrieval view, persistence and batched extraction all agree with it.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.graph import TypedGraph
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.cue import KnowledgeUnitExtractor, MultiPartiteIndex
from llama_index_graphrag_ext.cue.layers import CHUNK, ENTITY, HAS_UNIT, MENTIONS, UNIT, Layers
from llama_index_graphrag_ext.cue.view import Adjacency, entity_id

DOCS = [
    Document(
        id_="green",
        text="Green\nGreen is an album by Steve Hillage. It was released in 1978.",
        metadata={"title": "Green"},
    ),
    Document(
        id_="hillage",
        text="Steve Hillage\nSteve Hillage is an English guitarist. He was born in Chingford.",
        metadata={"title": "Steve Hillage"},
    ),
    # the same statement under two titles: one unit, mentioning both title entities
    Document(
        id_="chingford",
        text="Chingford\nChingford is a town in London. It was released in 1978.",
        metadata={"title": "Chingford"},
    ),
    Document(
        id_="paris",
        text="Paris\nParis is the capital of France. The Seine flows through Paris.",
        metadata={"title": "Paris"},
    ),
    Document(
        id_="seine",
        text="The Seine flows through Paris. The Seine is a river in France.",
        metadata={"title": "Seine"},
    ),
]


# ------------------------------------------------------------ the old graph


def reference_add(g: TypedGraph, nodes, units_per_chunk) -> None:
    """The old ``_add_chunks``: nodes on first sight, edges for every mention."""
    g.add_nodes([n.node_id for n in nodes], CHUNK)
    chunk_unit, unit_entity = [], []
    for node, units in zip(nodes, units_per_chunk, strict=True):
        for unit in units:
            uid = unit.unit_id
            if uid not in g:
                g.add_node(uid, UNIT, text=unit.text, source=unit.source)
            chunk_unit.append((node.node_id, uid))
            for ent in unit.entities:
                eid = entity_id(ent.key)
                if eid not in g:
                    g.add_node(eid, ENTITY, name=ent.name, key=ent.key, label=ent.label)
                unit_entity.append((uid, eid))
    g.add_edges(chunk_unit, HAS_UNIT)
    g.add_edges(unit_entity, MENTIONS)


def reference_remove(g: TypedGraph, chunk_ids) -> None:
    """The old ``_remove_chunks``: orphaned units, then orphaned entities, go too."""
    touched = {u for c in chunk_ids for u in g.neighbors(c, HAS_UNIT)}
    g.remove_nodes(chunk_ids)
    dead_units = [u for u in touched if not g.neighbors(u, HAS_UNIT)]
    touched_entities = {e for u in dead_units for e in g.neighbors(u, MENTIONS)}
    g.remove_nodes(dead_units)
    g.remove_nodes([e for e in touched_entities if not g.neighbors(e, MENTIONS)])


def graph_content(g: TypedGraph):
    nodes = {n: (g.node_kind(n), g.node_attrs(n)) for n in g.nodes()}
    edges = {
        kind: {frozenset((u, v)) for u, v, k, _ in g.edges() if k == kind}
        for kind in (HAS_UNIT, MENTIONS)
    }
    return nodes, edges


def reference_view_rows(index: MultiPartiteIndex, g: TypedGraph):
    """The old ``_build_view``'s adjacency, read from the graph."""
    units, entities, chunks = index._units.ids, index._entities.ids, index._chunks.ids
    entity_row = {e: j for j, e in enumerate(entities)}
    chunk_row = {c: i for i, c in enumerate(chunks)}
    unit_entities = [sorted(entity_row[e] for e in g.neighbors(u, MENTIONS)) for u in units]
    unit_chunks = [[chunk_row[c] for c in g.neighbors(u, HAS_UNIT)] for u in units]
    texts = [g.node_attrs(u)["text"] for u in units]
    names = [g.node_attrs(e)["name"] for e in entities]
    return unit_entities, unit_chunks, texts, names


def nodes_of(docs):
    return PassageParser()(docs)


@pytest.fixture
def extractor():
    return KnowledgeUnitExtractor()


def build(bow_embed, docs, **kw):
    return MultiPartiteIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()], **kw
    )


# ---------------------------------------------------------------- tests


def test_layers_hold_what_the_typed_graph_held_through_inserts_and_deletes(bow_embed, extractor):
    index = build(bow_embed, DOCS[:3])
    ref = TypedGraph()
    first = nodes_of(DOCS[:3])
    reference_add(ref, first, extractor.extract(first).units)
    assert graph_content(index.graph) == graph_content(ref)

    index.insert_nodes(nodes_of(DOCS[3:]))
    later = nodes_of(DOCS[3:])
    reference_add(ref, later, extractor.extract(later).units)
    assert graph_content(index.graph) == graph_content(ref)

    for doc_id in ("chingford", "paris"):
        gone = [c for c in index.chunk_ids() if c.startswith(f"{doc_id}#")]
        index.delete_ref_doc(doc_id)
        reference_remove(ref, gone)
        assert graph_content(index.graph) == graph_content(ref)
        stats = index.stats()
        assert stats["units"] == ref.num_nodes(UNIT) and stats["entities"] == ref.num_nodes(ENTITY)
        assert stats["has_unit_edges"] == ref.num_edges(HAS_UNIT)
        assert stats["mentions_edges"] == ref.num_edges(MENTIONS)

    view = index.view()
    unit_entities, unit_chunks, texts, names = reference_view_rows(index, ref)
    assert [a.tolist() for a in view.unit_entities] == unit_entities
    assert [a.tolist() for a in view.unit_chunks] == unit_chunks
    assert list(view.unit_texts) == texts and list(view.entity_names) == names
    for j, units in enumerate(view.entity_units):
        assert all(j in unit_entities[u] for u in units.tolist())
    assert view.entity_of("steve hillage") == index._entities.row_of(entity_id("steve hillage"))
    assert view.entity_of("no such entity") is None


def test_a_shared_statement_is_one_unit_linked_to_both_titles(bow_embed):
    index = build(bow_embed, DOCS)
    g = index.graph
    shared = [u for u in g.nodes(UNIT) if g.node_attrs(u)["text"] == "It was released in 1978."]
    assert len(shared) == 1
    assert len(g.neighbors(shared[0], HAS_UNIT)) == 2
    assert {entity_id("green"), entity_id("chingford")} <= set(g.neighbors(shared[0], MENTIONS))


def test_batched_extraction_builds_the_same_index_as_one_batch(bow_embed, monkeypatch):
    whole = build(bow_embed, DOCS)
    monkeypatch.setattr(MultiPartiteIndex, "extract_batch", 2)
    batched = build(bow_embed, DOCS)
    a, b = whole._layers, batched._layers
    assert a.unit_texts == b.unit_texts and a.entity_names == b.entity_names
    assert a.entity_labels == b.entity_labels
    np.testing.assert_array_equal(a.unit_from_llm, b.unit_from_llm)
    np.testing.assert_array_equal(a.unit_chunk, b.unit_chunk)
    np.testing.assert_array_equal(a.unit_entity, b.unit_entity)
    for name in ("_units", "_entities", "_chunks"):
        assert getattr(whole, name).ids == getattr(batched, name).ids
        np.testing.assert_array_equal(getattr(whole, name).matrix, getattr(batched, name).matrix)
    assert whole.stats() == batched.stats()
    q = "Where was the guitarist of Green born?"
    got = [(r.node.node_id, r.score) for r in batched.as_retriever(similarity_top_k=4).retrieve(q)]
    assert got == [
        (r.node.node_id, r.score) for r in whole.as_retriever(similarity_top_k=4).retrieve(q)
    ]


def test_extraction_run_batches_give_the_units_of_extract(extractor):
    nodes = nodes_of(DOCS)
    whole = extractor.extract(nodes)
    run = extractor.start(nodes)
    batches = list(run.batches(2))
    assert [start for start, _ in batches] == [0, 2, 4]
    units = [u for _, batch in batches for u in batch]
    assert [[(u.text, u.source, u.entities) for u in us] for us in units] == [
        [(u.text, u.source, u.entities) for u in us] for us in whole.units
    ]
    assert run.stats() == whole.stats
    with pytest.raises(ValueError):
        next(run.batches(0))


def test_persisted_graph_reads_back_into_the_same_layers(bow_embed, tmp_path):
    index = build(bow_embed, DOCS)
    index.persist(tmp_path / "cue")
    loaded = MultiPartiteIndex.load(tmp_path / "cue", embed_model=bow_embed)
    a, b = index._layers, loaded._layers
    assert a.unit_texts == b.unit_texts and a.entity_names == b.entity_names
    assert a.entity_labels == b.entity_labels
    np.testing.assert_array_equal(a.unit_chunk, b.unit_chunk)
    np.testing.assert_array_equal(a.unit_entity, b.unit_entity)
    assert loaded._graph is None  # the file's graph is read into arrays, then dropped
    assert graph_content(loaded.graph) == graph_content(
        TypedGraph.load(tmp_path / "cue" / "graph.json.gz")
    )


def test_a_graph_written_by_the_old_index_loads(bow_embed, extractor):
    """Old files hold nodes and edges in insertion order, interleaved: any order reads back."""
    index = build(bow_embed, DOCS)
    ref = TypedGraph()
    nodes = nodes_of(DOCS)
    reference_add(ref, nodes, extractor.extract(nodes).units)
    layers = Layers.from_typed_graph(
        TypedGraph.from_dict(ref.to_dict()),
        index._chunks.ids,
        index._units.ids,
        index._entities.ids,
    )
    assert layers.unit_texts == index._layers.unit_texts
    np.testing.assert_array_equal(layers.unit_chunk, index._layers.unit_chunk)
    np.testing.assert_array_equal(layers.unit_entity, index._layers.unit_entity)


def test_graph_is_made_on_demand_and_not_kept(bow_embed):
    index = build(bow_embed, DOCS)
    g = index.graph
    assert index.graph is g  # the same snapshot while someone holds it
    del g
    gc.collect()
    assert index._graph_ref is not None and index._graph_ref() is None  # not kept alive
    g = index.graph
    index.delete_ref_doc("paris")
    assert index.graph is not g  # a change makes a new one


def test_adjacency_rows_slices_and_bounds():
    adj = Adjacency.from_pairs(np.array([2, 0, 2, 0]), np.array([5, 7, 1, 3]), 4)
    assert [a.tolist() for a in adj] == [[3, 7], [], [1, 5], []]
    assert adj[-2].tolist() == [1, 5] and [a.tolist() for a in adj[1:3]] == [[], [1, 5]]
    assert len(adj) == 4 and adj.num_edges() == 4 and adj[0].dtype == np.int32
    with pytest.raises(IndexError):
        adj[4]
    with pytest.raises(ValueError):
        adj[0][0] = 1  # rows are read-only slices of one shared array
    empty = Adjacency.from_pairs(np.zeros(0), np.zeros(0), 2)
    assert [a.tolist() for a in empty] == [[], []]


def test_a_vector_store_finds_what_memory_finds_after_a_delete(bow_embed):
    from llama_index.core.vector_stores import SimpleVectorStore

    with_store = build(bow_embed, DOCS, vector_store=SimpleVectorStore())
    memory = build(bow_embed, DOCS)
    questions = ["Where was the guitarist of Green born?", "the river through Paris"]

    def top(index):
        retriever = index.as_retriever(similarity_top_k=3)
        return [[r.node.node_id for r in retriever.retrieve(q)] for q in questions]

    assert top(with_store) == top(memory)
    with_store.delete_ref_doc("hillage")
    memory.delete_ref_doc("hillage")
    assert top(with_store) == top(memory)
    assert len(with_store._store_tables.table("units")) == with_store.stats()["units"]
