"""FGRAGRetriever: query entities, evidence and original chunk nodes."""

from __future__ import annotations

import pytest
from llama_index.core import Document

from llama_index_graphrag_ext.core.nodes import EVIDENCE_KEY, PassageParser
from llama_index_graphrag_ext.fgrag import FGRAGIndex, FGRAGRetriever, spacy_query_entities

DOCS = [
    Document(id_="curie", text="Marie Curie studied radioactivity in Paris with Pierre Curie."),
    Document(id_="sorbonne", text="Pierre Curie taught physics at the Sorbonne in Paris."),
    Document(id_="nile", text="The Nile flows through Egypt and Sudan into the Mediterranean."),
]


@pytest.fixture
def index(bow_embed) -> FGRAGIndex:
    return FGRAGIndex.from_documents(DOCS, embed_model=bow_embed, transformations=[PassageParser()])


def test_spacy_query_entities() -> None:
    ents = spacy_query_entities("Where did Marie Curie teach physics in Paris?")
    keys = [e.lower() for e in ents]
    assert "marie curie" in keys and "paris" in keys
    assert all(k not in ("where", "did") for k in keys)


def test_query_entities_capped_plus_query(index: FGRAGIndex) -> None:
    r = FGRAGRetriever(index, max_query_entities=2)
    units = r.query_entities("q about things", ["A", "a", "B", "C"])
    assert units == ["A", "B", "q about things"]
    r2 = FGRAGRetriever(index, include_query=False)
    assert r2.query_entities("x", ["A"]) == ["A"]
    with pytest.raises(ValueError):
        FGRAGRetriever(index, top_n=0)


def test_retrieve_returns_original_chunks_with_evidence(index: FGRAGIndex) -> None:
    results = index.as_retriever(similarity_top_k=2).retrieve("Pierre Curie Sorbonne")
    assert results and len(results) <= 2
    assert results[0].node.ref_doc_id == "sorbonne"
    evidence = results[0].node.metadata[EVIDENCE_KEY]
    assert evidence["method"] == "fgrag"
    assert "Pierre Curie Sorbonne" in evidence["query_entities"]
    assert evidence["descriptions"] and "weak_context" in next(iter(evidence["expansion"].values()))
    assert EVIDENCE_KEY in results[0].node.excluded_llm_metadata_keys
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)


async def test_aretrieve_matches_retrieve(index: FGRAGIndex) -> None:
    retriever = index.as_retriever(similarity_top_k=3)
    sync = [n.node.node_id for n in retriever.retrieve("Nile Egypt")]
    asynchronous = [n.node.node_id for n in await retriever.aretrieve("Nile Egypt")]
    assert sync == asynchronous and sync


def test_empty_index_retrieves_nothing(bow_embed) -> None:
    index = FGRAGIndex(nodes=[], embed_model=bow_embed)
    assert index.as_retriever().retrieve("anything") == []
