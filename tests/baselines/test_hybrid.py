"""The LlamaIndex hybrid baseline (baselines/hybrid.py): BM25Retriever + vectors, RRF."""

from __future__ import annotations

from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import Document

from llama_index_graphrag_ext.baselines import build_dense_index, llama_index_hybrid
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


def test_hybrid_is_reciprocal_rank_fusion_of_bm25_and_the_vector_retriever():
    from llama_index.retrievers.bm25 import BM25Retriever

    from llama_index_graphrag_ext.core.nodes import documents_to_chunks, prepare_documents

    embed = HashEmbedding(dim=64)
    index = build_dense_index(_docs(), embed)
    hybrid = llama_index_hybrid(_docs(), embed, similarity_top_k=4, index=index)
    assert isinstance(hybrid, QueryFusionRetriever) and hybrid.num_queries == 1
    query = "Which river flows through Budapest and Vienna?"
    vector = [r.node.ref_doc_id for r in index.as_retriever(similarity_top_k=4).retrieve(query)]
    docs, _ = prepare_documents(_docs())
    bm25 = [
        r.node.ref_doc_id
        for r in BM25Retriever(nodes=documents_to_chunks(docs), similarity_top_k=4).retrieve(query)
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
    hybrid = llama_index_hybrid(_docs(), HashEmbedding(dim=32), similarity_top_k=3)
    calls = []
    monkeypatch.setattr(type(hybrid._llm), "complete", lambda *a, **k: calls.append(a))
    assert len(hybrid.retrieve("Mozart birthplace")) == 3 and calls == []
