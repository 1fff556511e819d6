"""The BM25 baseline (baselines/bm25.py): nodes in a compact docstore, tokens not kept."""

from __future__ import annotations

import numpy as np
from llama_index.core.schema import Document

from llama_index_graphrag_ext.baselines import BM25Retriever
from llama_index_graphrag_ext.baselines import bm25 as bm25_module
from llama_index_graphrag_ext.core.nodes import EVIDENCE_KEY, documents_to_chunks
from llama_index_graphrag_ext.core.text import BM25, tokenize

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


def test_bm25_fit_reads_any_iterable_once():
    tokens = [tokenize(t) for t in TEXTS]
    from_list = BM25().fit(tokens)
    from_generator = BM25().fit(tokenize(t) for t in TEXTS)
    query = tokenize("Warsaw river Poland")
    np.testing.assert_array_equal(from_list.scores(query), from_generator.scores(query))
    assert from_list.vocabulary == from_generator.vocabulary


def test_terms_in_a_document():
    bm25 = BM25().fit([tokenize(t) for t in TEXTS])
    assert bm25.terms_in(0, ["poland", "warsaw", "danube", "poland"]) == ["poland", "warsaw"]
    assert bm25.terms_in(-1, ["mozart", "unknown"]) == ["mozart"]
