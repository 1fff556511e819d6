"""NumpyVectorStore, the dense baseline's default store: SimpleVectorStore's ranking, faster."""

from __future__ import annotations

import pytest


def test_numpy_store_ranks_like_simple_vector_store(bow_embed, musique_slice, tmp_path):
    """The dense baseline's default store (the scale fix) gives SimpleVectorStore's top-k."""
    from llama_index.core.vector_stores import SimpleVectorStore
    from llama_index.core.vector_stores.types import (
        MetadataFilter,
        MetadataFilters,
        VectorStoreQuery,
    )

    from llama_index_graphrag_ext.baselines import DenseRetriever, build_dense_index
    from llama_index_graphrag_ext.baselines.numpy_store import NumpyVectorStore
    from llama_index_graphrag_ext.eval.data import load_benchmark

    bench = load_benchmark(musique_slice)
    docs = bench.documents()
    fast = build_dense_index(docs, bow_embed)
    store = fast.vector_store
    assert isinstance(store, NumpyVectorStore) and len(store) == len(docs)
    slow = build_dense_index(docs, bow_embed, vector_store=SimpleVectorStore())
    for q in bench.questions:
        got = DenseRetriever(fast, similarity_top_k=5).retrieve(q.question)
        want = DenseRetriever(slow, similarity_top_k=5).retrieve(q.question)
        assert [r.node.ref_doc_id for r in got] == [r.node.ref_doc_id for r in want]
        assert [r.score for r in got] == pytest.approx([r.score for r in want], abs=1e-5)

    vector = bow_embed.get_query_embedding(bench.questions[0].question)
    top = store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3))
    first_doc = fast.docstore.get_node(top.ids[0]).ref_doc_id
    store.delete(first_doc)
    assert len(store) == len(docs) - 1
    assert (
        top.ids[0]
        not in store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3)).ids
    )
    only = store.query(
        VectorStoreQuery(query_embedding=vector, similarity_top_k=5, node_ids=top.ids[1:3])
    )
    assert only.ids == top.ids[1:3]

    store.persist(str(tmp_path / "vectors.json"))
    again = NumpyVectorStore.from_persist_path(str(tmp_path / "vectors.json"))
    assert again.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3)).ids == (
        store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3)).ids
    )
    filters = MetadataFilters(filters=[MetadataFilter(key="title", value="x")])
    with pytest.raises(ValueError, match="does not filter"):
        store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3, filters=filters))
