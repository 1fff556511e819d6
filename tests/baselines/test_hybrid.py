"""The LlamaIndex hybrid baseline (``li-hybrid``): BM25Retriever + vectors, RRF."""

from __future__ import annotations

from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import Document

from llama_index_graphrag_ext.baselines import HybridIndex
from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding

from .test_bm25 import TEXTS  # the same seven-passage river corpus


def _docs() -> list[Document]:
    return [Document(id_=f"d{i}", text=t, metadata={"title": f"T{i}"}) for i, t in enumerate(TEXTS)]


def _rrf(*rankings: list[str], k: float = 60.0) -> dict[str, float]:
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (rank + k)
    return scores


def _index(dim: int = 64) -> HybridIndex:
    from llama_index_graphrag_ext.core.nodes import documents_to_chunks

    return HybridIndex(documents_to_chunks(_docs()), embed_model=HashEmbedding(dim=dim))


def test_hybrid_is_reciprocal_rank_fusion_of_bm25_and_the_vector_retriever():
    from llama_index.retrievers.bm25 import BM25Retriever

    from llama_index_graphrag_ext.core.nodes import documents_to_chunks

    index = _index()
    hybrid = index.as_retriever(similarity_top_k=4)
    fusion = hybrid._inner
    assert isinstance(fusion, QueryFusionRetriever) and fusion.num_queries == 1
    query = "Which river flows through Budapest and Vienna?"
    vectors = index.index.as_retriever(similarity_top_k=4)
    vector = [r.node.ref_doc_id for r in vectors.retrieve(query)]
    chunks = documents_to_chunks(_docs())
    bm25 = [
        r.node.ref_doc_id for r in BM25Retriever(nodes=chunks, similarity_top_k=4).retrieve(query)
    ]
    expected = _rrf(vector, bm25)
    results = hybrid.retrieve(query)
    got = {r.node.ref_doc_id: r.score for r in results}
    # Every result is one passage (the two halves' copies of a node were joined)
    # and carries its fused score; the order is by that score.
    assert len(got) == len(results) == 4
    assert all(abs(got[d] - expected[d]) < 1e-12 for d in got)
    assert sorted(expected.values(), reverse=True)[:4] == sorted(got.values(), reverse=True)
    assert bm25[0] == "d1" and results[0].node.ref_doc_id in {"d1", "d3"}


def test_hybrid_uses_no_llm(monkeypatch):
    from llama_index.core import Settings

    # Settings.llm would resolve to OpenAI (no key here): the hybrid must not touch it.
    monkeypatch.setattr(Settings, "_llm", None)
    hybrid = _index(32).as_retriever(similarity_top_k=3)
    calls = []
    monkeypatch.setattr(type(hybrid._inner._llm), "complete", lambda *a, **k: calls.append(a))
    assert len(hybrid.retrieve("Mozart birthplace")) == 3 and calls == []
