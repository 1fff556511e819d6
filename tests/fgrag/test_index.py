"""FGRAGIndex on PropertyGraphIndex: merging across chunks, persistence, insert and delete."""

from __future__ import annotations

import threading

import pytest
from llama_index.core import Document
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import EntityNode
from llama_index.core.indices.property_graph import PropertyGraphIndex

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.core.persist import IndexFormatError
from llama_index_graphrag_ext.fgrag import FGRAGExtractor, FGRAGIndex
from llama_index_graphrag_ext.fgrag.index import describe_entity
from llama_index_graphrag_ext.testing import ScriptedLLM

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


@pytest.fixture
def index(bow_embed) -> FGRAGIndex:
    return FGRAGIndex.from_documents(DOCS, embed_model=bow_embed, transformations=[PassageParser()])


def test_is_a_property_graph_index_with_merged_entities(index: FGRAGIndex) -> None:
    assert isinstance(index, PropertyGraphIndex)
    assert isinstance(index.property_graph_store, SimplePropertyGraphStore)
    graph = index.graph_snapshot()
    assert len(graph.chunks) == 2  # the empty document was skipped
    curie = describe_entity(graph, "marie curie")
    assert curie["descriptions"] == [
        "Marie Curie worked in Paris with Pierre Curie.",
        "Marie Curie won the Nobel Prize.",
    ]
    assert len(set(curie["source_chunks"])) == 2  # one description from each chunk
    stored = index.property_graph_store.get(ids=["marie curie"])[0]
    assert isinstance(stored, EntityNode) and stored.embedding is not None
    assert index.extractors_used == ["CooccurrenceExtractor"]


def test_llm_extraction_merges_same_name_entities_across_chunks(bow_embed) -> None:
    def answer(prompt: str) -> str:
        if "Answer with one word" in prompt:
            return "NO"
        if "Nobel" in prompt.split("Text:")[-1]:
            return '("entity"<|>MARIE CURIE<|>person<|>Won the Nobel Prize.)<|DONE|>'
        return '("entity"<|>Marie Curie<|>person<|>Worked in Paris.)<|DONE|>'

    extractor = FGRAGExtractor(llm=ScriptedLLM(answer))
    index = FGRAGIndex.from_documents(
        DOCS[:2],
        kg_extractors=[extractor],
        embed_model=bow_embed,
        transformations=[PassageParser()],
    )
    graph = index.graph_snapshot()
    assert graph.names == ["marie curie"]
    assert sorted(graph.descriptions[0]) == ["Won the Nobel Prize.", "Worked in Paris."]


def test_description_cap(bow_embed) -> None:
    text = " ".join(f"Paris hosted event number {i} in Paris." for i in range(8))
    index = FGRAGIndex.from_documents(
        [Document(text=text)],
        embed_model=bow_embed,
        max_descriptions_per_entity=2,
        transformations=[PassageParser()],
    )
    # the co-occurrence extractor keeps 5 sentences per chunk; the index caps at 2
    assert len(describe_entity(index.graph_snapshot(), "paris")["descriptions"]) == 2
    with pytest.raises(ValueError):
        FGRAGIndex(nodes=[], embed_model=bow_embed, max_descriptions_per_entity=0)


def test_persist_load_roundtrip(index: FGRAGIndex, bow_embed, tmp_path) -> None:
    index.persist(tmp_path / "idx")
    loaded = FGRAGIndex.load(tmp_path / "idx", embed_model=bow_embed)
    assert loaded.stats()["entities"] == index.stats()["entities"]
    assert loaded.stats()["relations"] == index.stats()["relations"]
    a = index.as_retriever(similarity_top_k=2).retrieve("Where did Marie Curie work?")
    b = loaded.as_retriever(similarity_top_k=2).retrieve("Where did Marie Curie work?")
    assert [n.node.node_id for n in a] == [n.node.node_id for n in b]
    with pytest.raises(IndexFormatError):
        FGRAGIndex.load(tmp_path, embed_model=bow_embed)


def test_delete_and_reinsert(index: FGRAGIndex) -> None:
    index.delete_ref_doc("d2")
    graph = index.graph_snapshot()
    assert "nobel prize" not in graph.index_of
    assert describe_entity(graph, "marie curie")["descriptions"] == [
        "Marie Curie worked in Paris with Pierre Curie."
    ]
    assert {c.ref_doc_id for c in graph.chunks.values()} == {"d1"}
    index.delete_ref_doc("missing")  # logged, nothing happens
    index.insert(DOCS[1])
    assert "nobel prize" in index.graph_snapshot().index_of


def test_snapshot_is_shared_by_threads(index: FGRAGIndex) -> None:
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


def test_plain_property_graph_store_without_vectors(bow_embed) -> None:
    """A store filled by someone else (no FG-RAG properties, no vectors) still works."""
    store = SimplePropertyGraphStore()
    store.upsert_nodes([EntityNode(name="Ada"), EntityNode(name="Babbage")])
    index = FGRAGIndex(nodes=[], property_graph_store=store, embed_model=bow_embed)
    graph = index.graph_snapshot()
    assert sorted(graph.names) == ["Ada", "Babbage"]
    assert graph.vectors.shape[0] == 2


def test_build_shares_the_docstore_chunks(index: FGRAGIndex) -> None:
    """The graph store's chunk nodes are the docstore's values, read as ``upsert_llama_nodes`` writes them."""
    store = index.property_graph_store
    assert store.nbytes()["chunks"] == 0 and store.nbytes()["shared_chunks"] > 0
    ids = list(index.docstore.docs)
    stock = SimplePropertyGraphStore()
    stock.upsert_llama_nodes(index.docstore.get_nodes(ids))
    assert store.get(ids=ids) == stock.get(ids=ids)
    graph = index.graph_snapshot()
    for chunk_id in ids:
        assert (
            graph.chunks[chunk_id].get_content() == index.docstore.get_node(chunk_id).get_content()
        )
