"""Fixtures of the reliability suites: a cheap counting embedder, a tiny corpus, index builders.

Every index of the suite is built here the same way, LLM-free and small, so the
bad-input and concurrency suites can run each check against all seven.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.hash_embedding import HashEmbedding
from llama_index_graphrag_ext.core.nodes import PassageParser

#: Every index of the suite, as the reliability tests name them.
METHODS = ("dense", "bm25", "qcg", "cue", "chainrag", "lprag", "fgrag")

TEXTS = {
    "curie": "Marie Curie was a physicist born in Warsaw. Marie Curie won two Nobel Prizes.",
    "warsaw": "Warsaw is the capital of Poland. Warsaw lies on the river Vistula.",
    "paris": "Paris is the capital of France. The Seine flows through Paris.",
    "tea": "Green tea is made from unoxidised leaves. Tea is popular in Japan and China.",
}

#: Small LP-RAG training so a build takes a fraction of a second.
LPRAG_SMALL = {"hidden": 16, "epochs": 5, "threads": 1, "k": 2, "M": 2}


@pytest.fixture
def hash_embed() -> HashEmbedding:
    """The suite's hashed embedder: cheap for a 10 MB text, and it counts what it embeds."""
    return HashEmbedding(embed_batch_size=16)


def corpus(extra: Sequence[Document] = ()) -> list[Document]:
    """The tiny corpus (titles in metadata) plus ``extra`` documents."""
    docs = [Document(id_=k, text=v, metadata={"title": k}) for k, v in TEXTS.items()]
    return docs + list(extra)


def build_index(method: str, documents: Sequence[Document], embed: BaseEmbedding, **kw: Any):
    """Build one index of the suite, LLM-free, one chunk per document.

    Returns the index (``VectorStoreIndex`` for ``dense``; the retriever itself
    for ``bm25``, which has no index object).
    """
    from llama_index_graphrag_ext.baselines import BM25Retriever, build_dense_index

    parser = [PassageParser()]
    if method == "dense":
        return build_dense_index(documents, embed)
    if method == "bm25":
        return BM25Retriever.from_documents(documents, similarity_top_k=kw.pop("top_k", 5))
    if method == "qcg":
        from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex

        return QueryCentricGraphIndex.from_documents(
            documents, embed_model=embed, transformations=parser, config="default", **kw
        )
    if method == "cue":
        from llama_index_graphrag_ext.cue import MultiPartiteIndex

        return MultiPartiteIndex.from_documents(
            documents, embed_model=embed, transformations=parser, **kw
        )
    if method == "chainrag":
        from llama_index_graphrag_ext.chainrag import SentenceGraphIndex

        return SentenceGraphIndex.from_documents(
            documents, embed_model=embed, transformations=parser, **kw
        )
    if method == "lprag":
        from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex

        return ChunkQueryLinkIndex.from_documents(
            documents,
            embed_model=embed,
            transformations=parser,
            config="pseudo",
            **{**LPRAG_SMALL, **kw},
        )
    if method == "fgrag":
        from llama_index_graphrag_ext.fgrag import FGRAGIndex

        return FGRAGIndex.from_documents(documents, embed_model=embed, transformations=parser, **kw)
    raise ValueError(method)


def retriever_of(method: str, index: Any, top_k: int) -> BaseRetriever:
    """The method's retriever returning ``top_k`` chunks."""
    from llama_index_graphrag_ext.baselines import BM25Retriever, DenseRetriever

    if method == "dense":
        return DenseRetriever(index, similarity_top_k=top_k)
    if method == "bm25":
        assert isinstance(index, BM25Retriever)
        index.similarity_top_k = top_k
        return index
    return index.as_retriever(similarity_top_k=top_k)


@pytest.fixture
def make_retriever(hash_embed) -> Callable[..., BaseRetriever]:
    """``make_retriever(method, documents, top_k=5, **index_settings)``."""

    def make(
        method: str, documents: Sequence[Document] | None = None, top_k: int = 5, **kw: Any
    ) -> BaseRetriever:
        docs = corpus() if documents is None else documents
        return retriever_of(method, build_index(method, docs, hash_embed, **kw), top_k)

    return make


@pytest.fixture
def docs_with() -> Callable[..., list[Document]]:
    """``docs_with(*extra)``: the tiny corpus plus extra documents."""
    return lambda *extra: corpus(extra)


@pytest.fixture
def build(hash_embed) -> Callable[..., Any]:
    """``build(method, documents, embed=None, **index_settings)`` (the counting embedder by default)."""

    def make(method: str, documents: Sequence[Document], embed=None, **kw: Any) -> Any:
        return build_index(method, documents, embed or hash_embed, **kw)

    return make


@pytest.fixture
def retriever_for() -> Callable[..., BaseRetriever]:
    """``retriever_for(method, index, top_k)``: the method's retriever over a built index."""
    return retriever_of
