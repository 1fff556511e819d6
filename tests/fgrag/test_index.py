"""FGRAGIndex: merging across chunks, persistence, insert and delete, and property graph stores."""

from __future__ import annotations

import threading

import pytest
from llama_index.core import Document, load_index_from_storage
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import EntityNode
from llama_index.core.indices.property_graph import SimpleLLMPathExtractor
from llama_index.core.storage.storage_context import StorageContext
from support import ScriptedLLM

from llama_index_graphrag_ext.core.index import GraphIndexBase
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.core.persist import IndexFormatError
from llama_index_graphrag_ext.fgrag import FGRAGExtractor, FGRAGIndex
from llama_index_graphrag_ext.fgrag.stores import StoreNeighbours

DOCS = [
    Document(
        id_="d1",
        text="Marie Curie worked in Paris with Pierre Curie. Pierre Curie taught at the Sorbonne.",
    ),
    Document(
        id_="d2", text="The Sorbonne is a university in Paris. Marie Curie won the Nobel Prize."
    ),
    Document(id_="empty", text="   "),
]
QUERY = "Where did Marie Curie work?"


def build(bow_embed, docs=DOCS, **kwargs) -> FGRAGIndex:
    return FGRAGIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()], **kwargs
    )


def top(index: FGRAGIndex, query: str = QUERY, k: int = 3) -> list[str]:
    return [n.node.node_id for n in index.as_retriever(similarity_top_k=k).retrieve(query)]


@pytest.fixture
def index(bow_embed) -> FGRAGIndex:
    return build(bow_embed)


def test_a_suite_index_with_merged_entities(index: FGRAGIndex) -> None:
    assert isinstance(index, GraphIndexBase)
    assert len(index) == 2  # the empty document was skipped
    curie = index.describe_entity("marie curie")
    assert curie["descriptions"] == [
        "Marie Curie worked in Paris with Pierre Curie.",
        "Marie Curie won the Nobel Prize.",
    ]
    assert len(set(curie["source_chunks"])) == 2  # one description from each chunk
    assert index.extractors_used == ["CooccurrenceExtractor"]
    # LlamaIndex's graph tooling gets the graph as a property graph store.
    store = index.property_graph_store
    stored = store.get(ids=["marie curie"])[0]
    assert isinstance(stored, EntityNode) and stored.embedding is not None
    assert stored.properties["descriptions"] == curie["descriptions"]


def test_llm_extraction_merges_same_name_entities_across_chunks(bow_embed) -> None:
    def answer(prompt: str) -> str:
        if "Answer with one word" in prompt:
            return "NO"
        if "Nobel" in prompt.split("Text:")[-1]:
            return '("entity"<|>MARIE CURIE<|>person<|>Won the Nobel Prize.)<|DONE|>'
        return '("entity"<|>Marie Curie<|>person<|>Worked in Paris.)<|DONE|>'

    extractor = FGRAGExtractor(llm=ScriptedLLM(answer))
    index = build(bow_embed, DOCS[:2], kg_extractors=[extractor])
    graph = index.graph_snapshot()
    assert graph.names == ["marie curie"]
    assert sorted(t for t, _ in graph.descriptions(0)) == [
        "Won the Nobel Prize.",
        "Worked in Paris.",
    ]


def test_graph_from_llamaindex_own_extractor_retrieves(bow_embed) -> None:
    """SimpleLLMPathExtractor writes no descriptions: names and triples stand in, with their chunk."""

    def triples(prompt: str) -> str:
        if "Nobel" in prompt:
            return "(Marie Curie, WON, Nobel Prize)"
        return "(Marie Curie, WORKED_IN, Paris)\n(Pierre Curie, TAUGHT_AT, Sorbonne)"

    extractor = SimpleLLMPathExtractor(llm=ScriptedLLM(triples), num_workers=1)
    index = build(bow_embed, DOCS[:2], kg_extractors=[extractor])
    assert index.stats()["relations"] == 3
    expansions = index.as_retriever().expand("Marie Curie prize")
    gathered = [d for e in expansions for d in e.descriptions]
    assert "Marie curie Won Nobel prize" in {d.text for d in gathered}  # its casing
    assert all(d.chunk_id for d in gathered)  # each from the chunk it was extracted from
    assert set(top(index, "Marie Curie prize")) == {n for n in index.chunk_ids()}


def test_description_cap(bow_embed) -> None:
    text = " ".join(f"Paris hosted event number {i} in Paris." for i in range(8))
    index = build(bow_embed, [Document(text=text)], max_descriptions_per_entity=2)
    # the co-occurrence extractor keeps 5 sentences per chunk; the index caps at 2
    assert len(index.describe_entity("paris")["descriptions"]) == 2
    with pytest.raises(ValueError):
        FGRAGIndex(nodes=[], embed_model=bow_embed, max_descriptions_per_entity=0)


def test_persist_load_roundtrip(index: FGRAGIndex, bow_embed, tmp_path) -> None:
    index.persist(tmp_path / "idx")
    loaded = FGRAGIndex.load(tmp_path / "idx", embed_model=bow_embed)
    assert loaded.stats()["entities"] == index.stats()["entities"]
    assert loaded.stats()["relations"] == index.stats()["relations"]
    assert loaded.extractors_used == ["CooccurrenceExtractor"]
    assert top(loaded) == top(index)
    with pytest.raises(IndexFormatError):
        FGRAGIndex.load(tmp_path, embed_model=bow_embed)
    # LlamaIndex's generic loader says how to load it instead of a plain index.
    with pytest.raises(IndexFormatError, match="FGRAGIndex.load"):
        load_index_from_storage(StorageContext.from_defaults(persist_dir=str(tmp_path / "idx")))


def test_delete_and_reinsert(index: FGRAGIndex) -> None:
    before = index.graph_snapshot()
    index.delete_ref_doc("d2")
    graph = index.graph_snapshot()
    assert graph is not before  # readers of the old graph are undisturbed
    assert graph.row_of("nobel prize") is None
    assert index.describe_entity("marie curie")["descriptions"] == [
        "Marie Curie worked in Paris with Pierre Curie."
    ]
    assert {c.ref_doc_id for c in index.get_chunks(index.chunk_ids())} == {"d1"}
    index.insert(DOCS[1])
    assert index.graph_snapshot().row_of("nobel prize") is not None


def test_graph_is_shared_by_threads(index: FGRAGIndex) -> None:
    retriever = index.as_retriever(similarity_top_k=3)
    results: list[list[str]] = []

    def work() -> None:
        results.append([n.node.node_id for n in retriever.retrieve("Pierre Curie Sorbonne")])

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 6 and all(r == results[0] for r in results)


class StructureOnlyStore(SimplePropertyGraphStore):
    """Reads back like Neo4j's or LadybugDB's: no embeddings, relations without properties."""

    def get(self, properties=None, ids=None):
        nodes = super().get(properties=properties, ids=ids)
        out = []
        for node in nodes:
            node = node.model_copy(deep=True)
            node.embedding = None
            node.properties = {}
            out.append(node)
        return out

    def get_rel_map(self, graph_nodes, depth=2, limit=30, ignore_rels=None):
        triplets = super().get_rel_map(graph_nodes, depth=depth, limit=limit)
        out = []
        for source, rel, target in triplets:
            rel = rel.model_copy(deep=True)
            rel.properties = {}
            out.append((source, rel, target))
        return out


@pytest.mark.parametrize("store_class", [SimplePropertyGraphStore, StructureOnlyStore])
def test_external_store_holds_the_structure_and_retrieval_matches(bow_embed, store_class) -> None:
    in_memory = build(bow_embed)
    store = store_class()
    index = build(bow_embed, property_graph_store=store)
    assert index.property_graph_store is store
    assert len(SimplePropertyGraphStore.get(store)) == index.stats()["entities"] + 2  # + chunks
    for query in (QUERY, "Pierre Curie Sorbonne", "Nobel Prize"):
        assert top(index, query) == top(in_memory, query)
        gathered = index.as_retriever().expand(query)
        expected = in_memory.as_retriever().expand(query)
        assert [e.descriptions for e in gathered] == [e.descriptions for e in expected]
    search, neighbours = index.search_path(index.graph_snapshot())
    assert isinstance(neighbours, StoreNeighbours)
    index.as_retriever().retrieve(QUERY)


def test_external_store_follows_inserts_and_deletes(bow_embed, tmp_path) -> None:
    store = SimplePropertyGraphStore()
    index = build(bow_embed, DOCS[:1], property_graph_store=store)
    index.insert(DOCS[1])
    assert store.get(ids=["nobel prize"])
    index.delete_ref_doc("d2")
    assert not store.get(ids=["nobel prize"])  # emptied entities leave the store
    assert top(index) == top(build(bow_embed, DOCS[:1]))
    index.persist(tmp_path / "idx")
    fresh = SimplePropertyGraphStore()
    loaded = FGRAGIndex.load(tmp_path / "idx", embed_model=bow_embed, property_graph_store=fresh)
    assert fresh.get(ids=["marie curie"])  # an empty store is filled on load
    assert top(loaded) == top(index)
