"""Milvus for llama-index-graphrag-ext: one helper that opens a Milvus collection as a
LlamaIndex vector store, on a Milvus Lite file or on a Milvus cluster.

Every index of the suite takes ``vector_store=``; pass the store this module
makes::

    from graphrag_ext_milvus import milvus_store

    store = milvus_store("./graphrag.db", dim=384, collection_name="qcg")
    index = QueryCentricGraphIndex.from_documents(docs, vector_store=store, ...)

Moving to a cluster changes only the address (and a token)::

    store = milvus_store("https://milvus.example.org:19530", dim=384,
                         collection_name="qcg", token="user:password")
"""

from __future__ import annotations

from .store import is_lite_uri, milvus_store

__all__ = ["is_lite_uri", "milvus_store"]
