"""``LinkPredictionRetriever``: retrieval as inductive link prediction (LP-RAG §3.4, Eq. 9).

The user query becomes a new node attached to its ``M`` nearest chunks (message
edges only, weight 1), the trained predictor scores its link to every chunk, and
the chunks are ranked by link probability ``σ(φ(q, C))``: the top
``similarity_top_k``, the chunks above ``tau`` (paper: 0.5), or both. Nothing is stored.

With ``max_candidates`` set, a larger index scores only the ``max_candidates``
chunks nearest the query (the decoder costs ``n x hidden^2`` per query). With
``long_chunks="best-sentences"`` (or ``"best-window"``), a long chunk's query
cosine is its best run of sentences' (or window's), where the decoder reads it
and in the fused ranking; its graph state and the query's attachments keep the
pooled vector the model was trained on.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.config import top_k_of
from ..core.embeddings import aembed_query, embed_query, top_k_of_scores
from ..core.lexical import fuse
from ..core.nodes import require_query, with_evidence
from ..core.rwlock import reading
from .config import STANDARDIZED, LPRAGConfig

#: Scale of the cosine prior: the decoder's initial cosine scale.
COSINE_PRIOR_SCALE = 10.0
#: ``long_chunks`` -> the index's ``window_unit`` it reads, and back.
_WINDOW_UNITS = {"best-sentences": "sentences", "best-window": "windows"}
_LONG_CHUNKS = {unit: value for value, unit in _WINDOW_UNITS.items()}


def standardize(scores: np.ndarray) -> np.ndarray:
    """Zero mean, unit (population) standard deviation; a constant array becomes zeros."""
    scores = np.asarray(scores, np.float64)
    std = scores.std()
    return (scores - scores.mean()) / std if std > 0 else np.zeros_like(scores)


class LinkPredictionRetriever(BaseRetriever):
    """Scores query-chunk links with the index's trained predictor.

    The config's ``retrieval`` section and ``M`` say how (see
    :class:`~.config.LPRAGRetrieval`). With ``cosine_prior="standardized"``,
    ``tau`` tests the predictor's own probability and a node's score (``σ`` of
    the standardised sum) only orders the results.

    Args:
        config: A :class:`~.config.LPRAGConfig` or preset name (default: the index's).
        similarity_top_k: Most chunks returned (``None``: no cap, ``tau`` only).
        **overrides: Config fields by name (``tau=0.5``, ``cosine_prior=1``, ``M=5``).
    """

    def __init__(
        self,
        index: Any,
        *,
        config: LPRAGConfig | str | None = None,
        similarity_top_k: int | None = 10,
        callback_manager: CallbackManager | None = None,
        **overrides: Any,
    ) -> None:
        base = index.config if config is None else LPRAGConfig.resolve(config)
        self.config = base.updated(overrides)
        self.params = self.config.retrieval
        if similarity_top_k is None and self.params.tau is None:
            raise ValueError("set similarity_top_k, tau or both")
        similarity_top_k = top_k_of(similarity_top_k)  # None: no cap, tau alone
        unit = _WINDOW_UNITS.get(self.params.long_chunks)
        if unit is not None and unit != index.window_unit:
            raise ValueError(
                f"long_chunks={self.params.long_chunks!r} needs the index built with it: this "
                f"one holds its long chunks' {index.window_unit} (long_chunks="
                f"{_LONG_CHUNKS[index.window_unit]!r} or 'pooled' reads it; or build it again)"
            )
        self._index = index
        self.similarity_top_k = similarity_top_k
        super().__init__(callback_manager=callback_manager or index._callback_manager)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        require_query(query_bundle.query_str, query_bundle.embedding)
        vector = query_bundle.embedding
        if vector is None:
            vector = embed_query(self._index.embed_model, query_bundle.query_str)
        with reading(self._index):
            return self._rank(np.asarray(vector, np.float32), query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        require_query(query_bundle.query_str, query_bundle.embedding)
        vector = query_bundle.embedding
        if vector is None:
            vector = await aembed_query(self._index.embed_model, query_bundle.query_str)
        vector = np.asarray(vector, np.float32)
        return await asyncio.to_thread(self._ranked, vector, query_bundle.query_str)

    def _ranked(self, vector: np.ndarray, query: str) -> list[NodeWithScore]:
        with reading(self._index):
            return self._rank(vector, query)

    def scores(self, query: str) -> dict[str, float]:
        """Link probability of the query to every chunk, by chunk id (0 where not scored)."""
        snap = self._snapshot()
        if snap is None:
            return {}
        vector = embed_query(self._index.embed_model, query)
        probs, *_ = self._probabilities(snap, vector, query)
        return dict(zip(snap.chunk_ids, probs.tolist(), strict=True))

    def _snapshot(self):
        snap = self._index._snapshot
        if snap is None and len(self._index):
            raise RuntimeError("the index has chunks but no trained link predictor")
        return snap

    def _candidates(self, snap, vector: np.ndarray) -> np.ndarray | None:
        """Rows to score: ``None`` (all) up to ``max_candidates`` chunks, else the nearest."""
        cap = self.params.max_candidates
        if cap is None or len(snap.chunk_ids) <= cap:
            return None
        rows = self._index.nearest_chunk_rows(snap, vector, cap)
        return np.sort(np.asarray(rows, np.int64))  # row order: ties break as when exhaustive

    def _probabilities(self, snap, vector: np.ndarray, query: str | None = None):
        """Link probabilities, logits, ranking scores and the query's attachments.

        The logit is ``φ`` (plus the prior, when a weight is set); the ranking score
        is the logit, or with ``"standardized"`` the sum of the standardised ``φ``
        and cosine. Chunks not scored get a ``-inf`` logit.
        """
        vector = vector / (np.linalg.norm(vector) or 1.0)
        # Inference graph (§3.4): the query node receives messages from its M nearest chunks
        # (with bm25_weight: the M best of the cosine's and BM25's rankings fused).
        m = self.config.graph.M
        nbrs = np.asarray(self._index.nearest_chunk_rows(snap, vector, m), np.int64)
        if self.params.bm25_weight > 0 and query is not None:
            row = snap.row_of
            lexical = [row[c] for c in self._index.bm25_passages(query, m) if c in row]
            nbrs = fuse(nbrs, lexical, self.params.bm25_weight)[0][:m]
        rows = self._candidates(snap, vector)
        scored = np.arange(len(snap.chunk_ids)) if rows is None else rows
        best = self._window_cosines(snap, vector, scored)
        ones = np.ones(len(nbrs), np.float32)
        phi = snap.scorer.logits(vector, nbrs, ones, rows=rows, cosines=best).astype(np.float64)
        ranking = phi
        prior = self.params.cosine_prior
        if prior:
            cos = self._cosines(snap, vector, scored, best)
            if prior == STANDARDIZED:
                ranking = standardize(phi) + standardize(cos)
            else:
                # A fixed scale (the decoder's initial cosine scale), not the learned
                # one: training may shrink or even flip that, and the prior must not follow.
                phi = ranking = phi + prior * COSINE_PRIOR_SCALE * cos
        n = len(snap.chunk_ids)
        logits = _spread(phi, rows, n, -np.inf)
        return 1.0 / (1.0 + np.exp(-logits)), logits, _spread(ranking, rows, n, -np.inf), nbrs

    def _window_cosines(self, snap, unit: np.ndarray, rows: np.ndarray) -> np.ndarray | None:
        """The cosines of the chunks ``rows``, a long chunk's its best run's or window's;
        ``None`` when every chunk keeps its own vector's (``long_chunks="pooled"``, no long
        chunk)."""
        if self.params.long_chunks == "pooled" or snap.windows is None:
            return None
        return snap.windows.best(snap.z_chunks[rows] @ unit, rows, unit)

    def _cosines(self, snap, unit: np.ndarray, rows: np.ndarray, best=None) -> np.ndarray:
        """The query-chunk cosines of ``rows`` (``best``: already computed)."""
        if best is None:
            best = self._window_cosines(snap, unit, rows)
        return (snap.z_chunks[rows] @ unit if best is None else best).astype(np.float64)

    def _rank(self, vector: np.ndarray, query: str) -> list[NodeWithScore]:
        snap = self._snapshot()
        if snap is None:
            return []
        probs, logits, ranking, nbrs = self._probabilities(snap, vector, query)
        # Rank by score, not probability: probabilities saturate at 1.0 and would tie.
        candidates = ranking
        if self.params.tau is not None:
            candidates = np.where(probs >= self.params.tau, candidates, -np.inf)
        k = len(probs) if self.similarity_top_k is None else self.similarity_top_k
        weight = self.params.bm25_weight
        order, _ = top_k_of_scores(candidates, len(probs) if weight > 0 else k)
        order = order[np.isfinite(candidates[order])]
        if weight > 0 and len(order):  # fused with BM25's passages (core/lexical.py)
            cap = min(k, len(order))  # tau alone: as many as passed it
            ids = [snap.chunk_ids[i] for i in order.tolist()]
            fused_ids, fused, bm25_ranks = self._index.fuse_passages(
                query, ids, weight, max(2 * cap, 20)
            )
            order = np.asarray([snap.row_of[c] for c in fused_ids[:cap]], np.int64)
        if not len(order):
            return []
        nodes = self._index.get_chunks([snap.chunk_ids[i] for i in order])
        attached = set(nbrs.tolist())
        cosines = self._cosines(snap, vector / (np.linalg.norm(vector) or 1.0), order)
        predictor = self._index.config.training.predictor
        out = []
        for rank, (i, node, cos) in enumerate(zip(order.tolist(), nodes, cosines, strict=True)):
            evidence = {
                "method": "lp-rag",
                "predictor": predictor,
                "link_probability": round(float(probs[i]), 6),
                "link_logit": round(float(logits[i]), 6),
                "ranking_score": round(float(ranking[i]), 6),
                "cosine_prior": self.params.cosine_prior,
                "cosine": round(float(cos), 6),
                "long_chunks": self.params.long_chunks,
                "rank": rank + 1,
                "attached_to_query": bool(i in attached),
            }
            score = float(1.0 / (1.0 + np.exp(-ranking[i])))
            if weight > 0:
                evidence["bm25_rank"] = bm25_ranks.get(snap.chunk_ids[i])
                score = fused[rank]
            out.append(with_evidence(node, score, evidence))
        return out


def _spread(values: np.ndarray, rows: np.ndarray | None, n: int, fill: float) -> np.ndarray:
    """Scores of the scored ``rows`` placed in an array over all ``n`` chunks."""
    if rows is None:
        return values
    out = np.full(n, fill, np.float64)
    out[rows] = values
    return out
