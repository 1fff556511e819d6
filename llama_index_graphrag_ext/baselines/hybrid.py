"""The LlamaIndex hybrid: ``BM25Retriever`` + a vector retriever, fused by reciprocal rank.

This is the hybrid retrieval LlamaIndex documents, built from its own parts
and nothing of ours in the ranking: ``llama-index-retrievers-bm25``'s
``BM25Retriever`` (bm25s, English stemming and stop words) and the retriever of
a ``VectorStoreIndex``, combined by ``QueryFusionRetriever`` in
``reciprocal_rerank`` mode (RRF, k = 60, Cormack et al. 2009) with one query:
no query generation, so no LLM is ever called. Both retrievers read the same
chunks (one per passage, title and text as the embedder sees them), and the
vector index is the ``dense`` baseline's (same embedder, same vectors).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import Document

from ..core.nodes import documents_to_chunks, prepare_documents
from .dense import build_dense_index


def llama_index_hybrid(
    documents: Sequence[Document],
    embed_model: BaseEmbedding | None = None,
    *,
    similarity_top_k: int = 10,
    index: VectorStoreIndex | None = None,
    show_progress: bool = False,
    callback_manager: CallbackManager | None = None,
) -> QueryFusionRetriever:
    """Build LlamaIndex's BM25 + vector hybrid with reciprocal-rank fusion.

    Args:
        documents: The passages (one chunk each).
        embed_model: Embedder of the vector half (``Settings``, then the embedded MiniLM).
        similarity_top_k: Results of each half and of the fusion.
        index: A vector index over the same documents to reuse (built when omitted).
        show_progress: Show a progress bar while embedding.
        callback_manager: LlamaIndex callbacks; falls back to ``Settings``.

    Returns:
        A ``QueryFusionRetriever`` (``mode="reciprocal_rerank"``, ``num_queries=1``).
    """
    from llama_index.retrievers.bm25 import BM25Retriever as LlamaIndexBM25

    if similarity_top_k <= 0:
        raise ValueError("similarity_top_k must be positive")
    if index is None:
        index = build_dense_index(documents, embed_model, show_progress=show_progress)
    docs, _ = prepare_documents(documents)
    # Same chunk nodes (ids, text, title metadata) as the vector index holds:
    # RRF joins the two lists on the nodes' content hash.
    bm25 = LlamaIndexBM25(
        nodes=documents_to_chunks(docs), similarity_top_k=similarity_top_k, language="en"
    )
    vector = index.as_retriever(similarity_top_k=similarity_top_k)
    kwargs: dict[str, Any] = {}
    if callback_manager is not None:
        kwargs["callback_manager"] = callback_manager
    return QueryFusionRetriever(
        [vector, bm25],
        # num_queries=1 never asks the LLM for query variants; MockLLM only
        # keeps the constructor from resolving Settings.llm (OpenAI by default).
        llm=MockLLM(),
        mode="reciprocal_rerank",
        similarity_top_k=similarity_top_k,
        num_queries=1,
        use_async=False,
        **kwargs,
    )
