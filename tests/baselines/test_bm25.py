"""The BM25 baseline (baselines/bm25.py, scored by bm25s): nodes in a compact docstore."""

from __future__ import annotations

import math

from llama_index.core.schema import Document

from llama_index_graphrag_ext.baselines import BM25Retriever
from llama_index_graphrag_ext.baselines import bm25 as bm25_module
from llama_index_graphrag_ext.core.nodes import EVIDENCE_KEY, documents_to_chunks
from llama_index_graphrag_ext.core.text import tokenize

TEXTS = [
    "Warsaw is the capital of Poland on the Vistula.",
    "The Danube flows through Vienna and Budapest.",
    "Marie Curie was born in Warsaw and won two Nobel prizes.",
    "Budapest has thermal baths along the Danube.",
    "The Vistula is the longest river in Poland.",
    "Chopin left Warsaw for Paris in 1830.",
    "Salzburg is the birthplace of Mozart.",
]


def _docs() -> list[Document]:
    return [Document(id_=f"d{i}", text=t) for i, t in enumerate(TEXTS)]


def _ranked(retriever: BM25Retriever, query: str):
    return [(r.node.node_id, round(r.score, 6)) for r in retriever.retrieve(query)]


def test_streamed_build_equals_a_build_from_a_node_list(monkeypatch):
    monkeypatch.setattr(bm25_module, "_BATCH", 2)  # four batches, the last short
    streamed = BM25Retriever.from_documents(_docs(), similarity_top_k=4)
    listed = BM25Retriever(documents_to_chunks(_docs()), similarity_top_k=4)
    assert len(streamed) == len(listed) == len(TEXTS)
    for query in ("Warsaw Poland", "Danube Budapest baths", "Mozart"):
        assert _ranked(streamed, query) == _ranked(listed, query)
    assert {n.get_content() for n in streamed.docstore.docs.values()} == set(TEXTS)


def test_results_are_the_stored_nodes_with_the_terms_they_matched():
    retriever = BM25Retriever.from_documents(_docs(), similarity_top_k=2)
    top = retriever.retrieve("Which river flows through Budapest and Vienna?")
    assert top[0].node.ref_doc_id == "d1"
    evidence = top[0].node.metadata[EVIDENCE_KEY]
    # The query's terms that occur in the passage, as when the tokens were kept.
    assert evidence["matched_terms"] == ["budapest", "flows", "vienna"]


def _okapi(query: str, k1: float = 1.5, b: float = 0.75) -> list[float]:
    """Okapi BM25 with Lucene's non-negative IDF, written out (Lucene drops the (k1 + 1))."""
    docs = [tokenize(t) for t in TEXTS]
    avgdl = sum(map(len, docs)) / len(docs)
    scores = []
    for doc in docs:
        total = 0.0
        for term in tokenize(query):
            df = sum(term in d for d in docs)
            idf = math.log(1 + (len(docs) - df + 0.5) / (df + 0.5))
            tf = doc.count(term)
            total += idf * tf / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        scores.append(total)
    return scores


def test_scores_are_okapi_bm25_and_ties_go_to_the_earlier_passage():
    retriever = BM25Retriever.from_documents(_docs(), similarity_top_k=len(TEXTS))
    for query in ("Warsaw river Poland", "Danube Danube Vienna", "Mozart"):
        expected = _okapi(query)
        got = {r.node.ref_doc_id: r.score for r in retriever.retrieve(query)}
        assert all(abs(got[f"d{i}"] - s) < 1e-5 for i, s in enumerate(expected))
    ranked = [r.node.ref_doc_id for r in retriever.retrieve("unknownword")]
    assert ranked == [f"d{i}" for i in range(len(TEXTS))]  # all zero: passage order
