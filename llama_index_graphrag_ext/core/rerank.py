"""Any LlamaIndex reranker, asked for exactly the nodes a method needs.

QCG-RAG, CUE-RAG and ChainRAG take ``reranker=``: any LlamaIndex reranking
postprocessor (``FlagEmbeddingReranker`` for the papers' BGE cross-encoders).
Such postprocessors keep only their own ``top_n``, which would silently shrink a
method's candidates, so every call here works on a copy with the ``top_n`` asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

__all__ = ["rerank", "rerank_scores", "with_top_n"]


def with_top_n(reranker: BaseNodePostprocessor, n: int) -> BaseNodePostprocessor:
    """A shallow copy of ``reranker`` that keeps ``n`` nodes (itself when it has no ``top_n``).

    The caller's object is untouched, so this is thread-safe; weights are shared.
    """
    if "top_n" in getattr(type(reranker), "model_fields", {}):
        return reranker.model_copy(update={"top_n": int(n)})
    return reranker


def rerank(
    reranker: BaseNodePostprocessor,
    query: str,
    texts: Sequence[str],
    *,
    keep: int | None = None,
    scores: Sequence[float] | None = None,
) -> list[tuple[int, float]]:
    """``(index into texts, reranker score)`` of the best ``keep`` texts (all by default), best first.

    ``scores`` are the candidates' scores so far (what a pass-through reranker keeps).
    """
    if not texts:
        return []
    nodes = [
        NodeWithScore(node=TextNode(id_=str(i), text=t), score=float(scores[i]) if scores else 0.0)
        for i, t in enumerate(texts)
    ]
    want = len(texts) if keep is None else max(1, min(int(keep), len(texts)))
    ranked = with_top_n(reranker, want).postprocess_nodes(nodes, query_bundle=QueryBundle(query))
    return [(int(n.node.node_id), float(n.score or 0.0)) for n in ranked[:want]]


def rerank_scores(reranker: BaseNodePostprocessor, query: str, texts: Sequence[str]) -> np.ndarray:
    """The reranker's score of every text (``-inf`` for one it did not return)."""
    out = np.full(len(texts), -np.inf, dtype=np.float32)
    for i, score in rerank(reranker, query, texts):
        out[i] = score
    return out
