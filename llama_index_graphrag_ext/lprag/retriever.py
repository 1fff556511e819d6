"""``LinkPredictionRetriever``: retrieval as inductive link prediction (LP-RAG §3.4, Eq. 9).

The user query becomes a new node attached to its ``M`` nearest chunks (message
edges only, weight 1, never treated as observed links), the trained predictor
scores its link to every chunk, and the chunks are ranked by link probability
``σ(φ(q, C))``. Keep the top ``similarity_top_k``, the chunks above
``threshold`` (the paper uses τ = 0.5), or both (top-k among those above τ).
The query node is discarded afterwards; nothing is stored.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.embeddings import aembed_query, embed_query, top_k_of_scores
from ..core.nodes import require_query, with_evidence

logger = logging.getLogger(__name__)

#: Scale of the cosine prior: the decoder's initial cosine scale (``LinkPredictor``).
COSINE_PRIOR_SCALE = 10.0


class LinkPredictionRetriever(BaseRetriever):
    """Scores query-chunk links with the index's trained predictor.

    Args:
        index: A built :class:`~.index.ChunkQueryLinkIndex`.
        similarity_top_k: Most chunks returned (``None``: no cap, threshold only).
        threshold: Keep only chunks with link probability at least this (``None``: off).
        query_neighbors: Chunks the query node is attached to (defaults to the
            index's setting, which the model was trained with).
        cosine_prior: Extra weight ``β`` on the text encoder's cosine: the score
            becomes ``φ(q, C) + 10 β cos(q, C)`` (10 is the decoder's initial cosine
            scale; our addition, 0 = the paper's ``φ`` alone). It keeps a
            predictor trained on weak supervision (LLM-free pseudo-queries) from
            drifting away from the encoder's ranking; see the LP-RAG page.
        callback_manager: LlamaIndex callbacks.
    """

    def __init__(
        self,
        index: Any,
        similarity_top_k: int | None = 10,
        threshold: float | None = None,
        query_neighbors: int | None = None,
        cosine_prior: float = 0.0,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        if similarity_top_k is None and threshold is None:
            raise ValueError("set similarity_top_k, threshold or both")
        if similarity_top_k is not None and similarity_top_k <= 0:
            raise ValueError("similarity_top_k must be > 0")
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold is a probability in [0, 1]")
        self._index = index
        self.similarity_top_k = similarity_top_k
        self.threshold = threshold
        self.query_neighbors = int(query_neighbors or index.query_neighbors)
        if cosine_prior < 0:
            raise ValueError("cosine_prior must be >= 0")
        self.cosine_prior = float(cosine_prior)
        super().__init__(callback_manager=callback_manager, **kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        require_query(query_bundle.query_str, query_bundle.embedding)
        vector = query_bundle.embedding
        if vector is None:
            vector = embed_query(self._index.embed_model, query_bundle.query_str)
        return self._rank(np.asarray(vector, np.float32))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        require_query(query_bundle.query_str, query_bundle.embedding)
        vector = query_bundle.embedding
        if vector is None:
            vector = await aembed_query(self._index.embed_model, query_bundle.query_str)
        return self._rank(np.asarray(vector, np.float32))

    def scores(self, query: str) -> dict[str, float]:
        """Link probability of the query to every chunk, by chunk id."""
        snap = self._snapshot()
        if snap is None:
            return {}
        probs, _, _ = self._probabilities(snap, embed_query(self._index.embed_model, query))
        return dict(zip(snap.chunk_ids, probs.tolist(), strict=True))

    def _snapshot(self):
        snap = self._index._snapshot
        if snap is None and len(self._index):
            raise RuntimeError("the index has chunks but no trained link predictor")
        return snap

    def _probabilities(self, snap, vector: np.ndarray):
        vector = vector / (np.linalg.norm(vector) or 1.0)
        # Inference graph (§3.4): the query node receives messages from its M nearest chunks.
        nbrs = self._index.nearest_chunk_rows(snap, vector, self.query_neighbors)
        logits = snap.scorer.logits(vector, nbrs, np.ones(len(nbrs), np.float32))
        if self.cosine_prior:
            # A fixed scale (the decoder's initial cosine scale), not the learned one:
            # training may shrink or even flip that, and the prior must not follow.
            logits = logits + self.cosine_prior * COSINE_PRIOR_SCALE * (snap.z_chunks @ vector)
        probs = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
        return probs, logits, nbrs

    def _rank(self, vector: np.ndarray) -> list[NodeWithScore]:
        snap = self._snapshot()
        if snap is None:
            return []
        probs, logits, nbrs = self._probabilities(snap, vector)
        # Rank by logit: probabilities saturate at 1.0 for confident links and would tie.
        candidates = logits.astype(np.float64)
        if self.threshold is not None:
            candidates = np.where(probs >= self.threshold, candidates, -np.inf)
        k = len(probs) if self.similarity_top_k is None else self.similarity_top_k
        order, _ = top_k_of_scores(candidates, k)
        order = order[np.isfinite(candidates[order])]
        if not len(order):
            return []
        nodes = self._index.get_chunks([snap.chunk_ids[i] for i in order])
        attached = set(nbrs.tolist())
        cosines = snap.z_chunks[order] @ (vector / (np.linalg.norm(vector) or 1.0))
        predictor = self._index.predictor
        return [
            with_evidence(
                node,
                float(probs[i]),
                {
                    "method": "lp-rag",
                    "predictor": predictor,
                    "link_probability": round(float(probs[i]), 6),
                    "link_logit": round(float(logits[i]), 6),
                    "cosine_prior": self.cosine_prior,
                    "cosine": round(float(cos), 6),
                    "rank": rank + 1,
                    "attached_to_query": bool(i in attached),
                },
            )
            for rank, (i, node, cos) in enumerate(zip(order, nodes, cosines, strict=True))
        ]
