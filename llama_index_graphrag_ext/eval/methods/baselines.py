"""Registers the reference methods: ``dense``, ``dense-sentences``, ``bm25`` and LlamaIndex's
hybrid ``li-hybrid``."""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.schema import Document

from ...baselines import (
    BM25Retriever,
    DenseRetriever,
    build_dense_index,
    build_sentence_index,
    llama_index_hybrid,
)
from ..registry import BenchContext, BenchSystem, register_method


@register_method("dense", "llm-free", "LlamaIndex VectorStoreIndex, top-k cosine, same embedder")
def build_dense(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    index = build_dense_index(documents, ctx.embed_model, show_progress=ctx.show_progress)
    return BenchSystem(retriever=DenseRetriever(index, similarity_top_k=ctx.top_k))


#: Sentences retrieved per passage asked for: the runner ranks passages by their
#: first sentence in the list, and a passage's sentences come in runs.
_SENTENCES_PER_PASSAGE = 5


@register_method(
    "dense-sentences",
    "llm-free",
    "LlamaIndex SentenceWindowNodeParser nodes in a VectorStoreIndex: a passage ranks "
    "by its best sentence",
)
def build_dense_sentences(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    index = build_sentence_index(documents, ctx.embed_model, show_progress=ctx.show_progress)
    top = ctx.option("sentences_per_passage", _SENTENCES_PER_PASSAGE) * ctx.top_k
    return BenchSystem(
        retriever=DenseRetriever(index, similarity_top_k=top),
        info={"sentences": len(index.index_struct.nodes_dict), "sentences_retrieved": top},
    )


@register_method("bm25", "llm-free", "Okapi BM25 (k1=1.5, b=0.75) over title and text")
def build_bm25(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    retriever = BM25Retriever.from_documents(
        documents,
        similarity_top_k=ctx.top_k,
        k1=ctx.option("k1", 1.5),
        b=ctx.option("b", 0.75),
    )
    return BenchSystem(retriever=retriever)


@register_method(
    "li-hybrid",
    "llm-free",
    "LlamaIndex hybrid: BM25Retriever (bm25s) + VectorStoreIndex retriever, "
    "QueryFusionRetriever reciprocal-rank fusion, one query",
)
def build_li_hybrid(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    retriever = llama_index_hybrid(
        documents, ctx.embed_model, similarity_top_k=ctx.top_k, show_progress=ctx.show_progress
    )
    return BenchSystem(retriever=retriever)
