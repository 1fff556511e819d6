"""``QCGRetriever``: query nodes -> h-hop neighbours -> chunks (paper §3.4 steps 1-3).

1. Keep the query nodes with ``cos(q_u, q) + epsilon >= gamma``, at most the ``n``
   most similar (the paper leaves the choice open, digest §8.8).
2. Add their neighbours up to ``h`` hops over ``E_intra`` (no threshold on neighbours).
3. Score each chunk by the mean cosine of its collected nodes (``E_inter``); return
   the top ``K`` (ties: more collected nodes, then the earlier chunk).

Step 3 may collect fewer than ``K`` chunks; ``fill=True`` (ours) appends the others
by their own cosine, counted in :attr:`QCGRetriever.stats`. With ``bm25_weight > 0``
(ours, ``core/lexical.py``) BM25 ranks the query nodes beside the cosine in step 1
and the chunks beside the graph's score in step 3, each pair of rankings fused by
reciprocal rank. Array work on the index's current snapshot, safe from several threads.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.config import top_k_of
from ..core.embeddings import embed_query, normalize_rows, top_k_of_scores
from ..core.lexical import fuse
from ..core.nodes import require_query, with_evidence
from ..core.rerank import rerank
from ..core.rwlock import reading
from ..core.search import RowSearcher
from .config import QCGConfig, QCGRetrieval
from .graph import QueryLayer

logger = logging.getLogger(__name__)


@dataclass
class Collected:
    """The outcome of steps 1-3 for one question (what the evidence is made from).

    Attributes:
        rows: Collected query-node rows (``Q*``), with their ``cos`` to the question,
            ``hop`` distance and the row they were reached ``via`` (``-1`` at hop 0).
        chunk_codes: The top chunks, best first (collected ones, then filled ones).
        chunk_scores: Their scores (a filled chunk's is its own cosine).
        chunk_cos: Their own cosine to the question (NaN unless ``chunk_weight > 0``
            or the chunk was filled).
        filled: How many of the last ``chunk_codes`` came from the fill.
        collected_chunks: How many chunks step 3 collected (before the cut to ``K``).
    """

    rows: np.ndarray
    cos: np.ndarray
    hop: np.ndarray
    via: np.ndarray
    chunk_codes: np.ndarray
    chunk_scores: np.ndarray
    chunk_cos: np.ndarray | None = None
    filled: int = 0
    collected_chunks: int = 0
    chunk_graph_scores: np.ndarray | None = None
    bm25_ranks: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LexicalRanks:
    """BM25's rankings for one question (``core/lexical.py``), best first.

    Attributes:
        nodes: Query-node rows of the layer.
        chunks: Chunk codes of the layer.
    """

    nodes: np.ndarray
    chunks: np.ndarray


def collect(
    layer: QueryLayer,
    query_vector: np.ndarray,
    params: QCGRetrieval,
    search: RowSearcher,
    lexical: LexicalRanks | None = None,
) -> Collected:
    """Paper §3.4 steps 1-3 on one layer snapshot.

    ``search`` is step 1's lookup over the layer's rows: the index's
    :meth:`~..core.index.GraphIndexBase.searcher`, or ``MatrixSearch(layer.matrix)``.
    ``lexical`` (with ``bm25_weight > 0``) is fused into steps 1 and 3.
    """
    empty = np.zeros(0, np.int64)
    if len(layer) == 0:
        return Collected(empty, np.zeros(0, np.float32), empty, empty, empty, np.zeros(0))
    weight = params.bm25_weight if lexical is not None else 0.0
    # Step 1: the n best, then the threshold (the same set as thresholding first).
    hits = search.search(query_vector, params.n)
    sims = hits.cosines  # cos(q_u, q), indexable by rows
    best = hits.rows
    if weight > 0:  # the n best of the cosine's and BM25's rankings fused
        best = fuse(hits.rows, lexical.nodes[: params.n], weight)[0][: params.n]
    retrieved = best[np.asarray(sims[best]) + params.epsilon >= params.gamma]
    # Step 2: h-hop expansion over E_intra.
    n = len(layer)
    hop = np.full(n, -1, dtype=np.int64)
    via = np.full(n, -1, dtype=np.int64)
    hop[retrieved] = 0
    frontier = retrieved
    for h in range(1, params.h + 1):
        if not len(frontier):
            break
        nbrs = layer.knn[frontier]
        src = np.repeat(frontier, nbrs.shape[1])
        nbrs = nbrs.reshape(-1)
        ok = nbrs >= 0
        nbrs, src = nbrs[ok], src[ok]
        new_mask = hop[nbrs] < 0
        nbrs, src = nbrs[new_mask], src[new_mask]
        nbrs, first = np.unique(nbrs, return_index=True)
        hop[nbrs], via[nbrs] = h, src[first]
        frontier = nbrs
    rows = np.flatnonzero(hop >= 0)
    # Step 3: aggregate per chunk (E_inter).
    codes = layer.chunk_codes[rows]
    n_chunks = len(layer.chunks)
    count = np.bincount(codes, minlength=n_chunks)
    if params.aggregator == "max":
        score = np.full(n_chunks, -np.inf)
        np.maximum.at(score, codes, sims[rows].astype(np.float64))
    else:
        weights = sims[rows].astype(np.float64)
        score = np.bincount(codes, weights=weights, minlength=n_chunks).astype(np.float64)
        if params.aggregator == "mean":
            score = np.divide(score, count, out=np.zeros_like(score), where=count > 0)
    present = np.flatnonzero(count > 0)
    chunk_cos = np.full(n_chunks, np.nan)
    if params.chunk_weight > 0 and layer.chunk_matrix is not None and len(present):
        w = params.chunk_weight
        cos_c = _own_cosines(layer, query_vector, present, params).astype(np.float64)
        chunk_cos[present] = cos_c
        if params.aggregator == "mean":
            score[present] = (score[present] * count[present] + w * cos_c) / (count[present] + w)
        elif params.aggregator == "sum":
            score[present] += w * cos_c
        else:
            score[present] = np.maximum(score[present], cos_c)
    ranking = present[np.lexsort((present, -count[present], -score[present]))]
    fused = None
    if weight > 0:  # the graph's chunk ranking fused with BM25's (uncollected chunks too)
        ranking, fused = fuse(ranking, lexical.chunks, weight)
        missing = ranking[np.isnan(chunk_cos[ranking])]
        if len(missing) and layer.chunk_matrix is not None:
            chunk_cos[missing] = _own_cosines(layer, query_vector, missing, params)
    top = ranking[: params.K]
    found = Collected(
        rows, sims[rows], hop[rows], via[rows], top, score[top], chunk_cos[top], 0, len(present)
    )
    if fused is not None:
        found.chunk_graph_scores, found.chunk_scores = score[top], fused[: params.K]
        found.bm25_ranks = {int(c): i + 1 for i, c in enumerate(lexical.chunks.tolist())}
    if params.fill and len(top) < params.K:
        _fill(layer, query_vector, params, present, found)
    return found


def _own_cosines(
    layer: QueryLayer, query_vector: np.ndarray, codes: np.ndarray, params: QCGRetrieval
) -> np.ndarray:
    """The chunks' own cosines (a long chunk's best window's unless ``long_chunks="pooled"``)."""
    cos = layer.chunk_matrix[codes] @ query_vector
    if params.long_chunks == "best-window" and layer.chunk_windows is not None:
        cos = layer.chunk_windows.best(cos, codes, query_vector)
    return cos


def _fill(
    layer: QueryLayer,
    query_vector: np.ndarray,
    params: QCGRetrieval,
    collected: np.ndarray,
    found: Collected,
) -> None:
    """Append up to ``K`` chunks, uncollected ones by their own cosine (``fill``)."""
    matrix = layer.chunk_matrix
    if matrix is None or len(matrix) != len(layer.chunks):
        return
    need = params.K - len(found.chunk_codes)
    cos = _own_cosines(layer, query_vector, np.arange(len(matrix)), params).astype(np.float64)
    cos[collected] = -np.inf
    cos[~matrix.any(axis=1)] = -np.inf
    extra, extra_cos = top_k_of_scores(cos, need)
    keep = np.isfinite(extra_cos)
    extra, extra_cos = extra[keep], extra_cos[keep]
    found.chunk_codes = np.concatenate([found.chunk_codes, extra])
    found.chunk_scores = np.concatenate([found.chunk_scores, extra_cos])
    found.chunk_cos = np.concatenate([found.chunk_cos, extra_cos])
    found.filled = len(extra)


class QCGRetriever(BaseRetriever):
    """Query-centric graph retrieval over a :class:`~.index.QueryCentricGraphIndex`.

    Each returned chunk carries ``metadata["evidence"]``: its score and, per collected
    query node, its text, cosine, hop and the node it was reached from.

    Args:
        config: A :class:`~.config.QCGConfig` or preset name (default: the index's).
        similarity_top_k: ``K`` (default: the config's).
        reranker: Any LlamaIndex reranking postprocessor; re-ranks the best
            ``rerank_candidates`` chunks (default ``3 K``) and keeps ``K`` (ours).
        max_evidence: Query nodes listed per chunk in the evidence (best first).
        callback_manager: LlamaIndex callbacks; falls back to the index's.
        **overrides: Retrieval fields of the config by name (``gamma=1.5``, ``h=2``).
    """

    def __init__(
        self,
        index: Any,
        *,
        config: QCGConfig | str | None = None,
        similarity_top_k: int | None = None,
        reranker: BaseNodePostprocessor | None = None,
        rerank_candidates: int | None = None,
        max_evidence: int = 8,
        callback_manager: CallbackManager | None = None,
        **overrides: Any,
    ) -> None:
        if similarity_top_k is not None:
            overrides["K"] = top_k_of(similarity_top_k)
        base = index.config if config is None else QCGConfig.resolve(config)
        self.config = base.at_query_time(overrides)
        self.params = self.config.retrieval
        self._index = index
        self.max_evidence = max_evidence
        self.reranker = reranker
        self.rerank_candidates = rerank_candidates or 3 * self.params.K
        if self.rerank_candidates < self.params.K:
            raise ValueError("rerank_candidates must be at least similarity_top_k (K)")
        self._stats: Counter[str] = Counter()
        self._stats_lock = threading.Lock()
        super().__init__(callback_manager=callback_manager or index._callback_manager)

    @property
    def stats(self) -> dict[str, int]:
        """Counts over this retriever's queries: ``queries``, ``short_queries`` (step 3
        collected fewer than ``K`` chunks), ``filled_queries`` and ``filled_chunks``."""
        with self._stats_lock:
            return dict(self._stats)

    def _count(self, found: Collected, want: int) -> None:
        short = found.collected_chunks < want
        with self._stats_lock:
            first_fill = found.filled and not self._stats["filled_queries"]
            self._stats["queries"] += 1
            self._stats["short_queries"] += int(short)
            self._stats["filled_queries"] += int(found.filled > 0)
            self._stats["filled_chunks"] += found.filled
        if first_fill:
            logger.warning(
                "QCG: the graph collected %d of %d chunks; %d filled by chunk cosine "
                "(fill=True; further fills are counted in the retriever's stats)",
                found.collected_chunks,
                want,
                found.filled,
            )

    @property
    def similarity_top_k(self) -> int:
        """``K``."""
        return self.params.K

    def _results(
        self, layer: QueryLayer, query_vector: np.ndarray, query: str
    ) -> list[NodeWithScore]:
        search = self._index.searcher("queries", layer, lambda: layer.ids, layer.matrix)
        params = self.params
        if self.reranker is not None:
            params = params.model_copy(update={"K": self.rerank_candidates})
        lexical = self._lexical(layer, query, params) if params.bm25_weight > 0 else None
        found = collect(layer, normalize_rows(query_vector)[0], params, search, lexical)
        self._count(found, params.K)
        if not len(found.chunk_codes):
            return []
        chunk_ids = [layer.chunks[c] for c in found.chunk_codes]
        chunks = self._index.get_chunks(chunk_ids)
        order = [(i, float(s)) for i, s in enumerate(found.chunk_scores)]
        if self.reranker is not None:
            order = rerank(
                self.reranker,
                query,
                [c.get_content() for c in chunks],
                keep=self.params.K,
                scores=found.chunk_scores.tolist(),
            )
        node_codes = layer.chunk_codes[found.rows]
        out = []
        for rank, (i, score) in enumerate(order[: self.params.K]):
            code = found.chunk_codes[i]
            mine = np.flatnonzero(node_codes == code)
            mine = mine[np.argsort(-found.cos[mine], kind="stable")]
            evidence = self._evidence(layer, found, mine, rank)
            evidence["filled"] = bool(i >= len(found.chunk_codes) - found.filled)
            if evidence["filled"] or self.params.chunk_weight > 0:
                evidence["chunk_cosine"] = round(float(found.chunk_cos[i]), 4)
            if found.chunk_graph_scores is not None and i < len(found.chunk_graph_scores):
                evidence["graph_score"] = round(float(found.chunk_graph_scores[i]), 4)
                evidence["bm25_rank"] = found.bm25_ranks.get(int(code))
            if self.reranker is not None:
                evidence["qcg_score"] = round(float(found.chunk_scores[i]), 4)
                evidence["qcg_rank"] = i + 1
                evidence["reranker"] = type(self.reranker).__name__
            out.append(with_evidence(chunks[i], score, evidence))
        return out

    def _lexical(self, layer: QueryLayer, query: str, params: QCGRetrieval) -> LexicalRanks:
        """BM25's query nodes (their text) and chunks for ``query`` on this layer."""
        index = self._index
        nodes = index.lexical(
            "queries", layer, lambda: [f"{p.query} {p.answer}" for p in layer.pairs]
        )
        chunks = index.lexical("chunks", layer, lambda: index.passage_texts(layer.chunks))
        depth = max(params.n, 2 * params.K, 20)
        return LexicalRanks(nodes.top(query, depth)[0], chunks.top(query, depth)[0])

    def _evidence(
        self, layer: QueryLayer, found: Collected, mine: np.ndarray, rank: int
    ) -> dict[str, Any]:
        nodes = []
        for i in mine[: self.max_evidence]:
            pair = layer.pairs[found.rows[i]]
            via = int(found.via[i])
            nodes.append(
                {
                    "id": pair.node_id,
                    "kind": pair.kind,
                    "query": pair.query,
                    "answer": pair.answer,
                    "cosine": round(float(found.cos[i]), 4),
                    "hop": int(found.hop[i]),
                    "via": layer.pairs[via].node_id if via >= 0 else None,
                }
            )
        return {
            "method": "qcg",
            "rank": rank + 1,
            "aggregator": self.params.aggregator,
            "collected": len(mine),
            "retrieved": int((found.hop[mine] == 0).sum()),
            "expanded": int((found.hop[mine] > 0).sum()),
            "query_nodes": nodes,
        }

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        require_query(query_bundle.query_str, query_bundle.embedding)
        with reading(self._index):
            layer = self._index.layer  # one consistent snapshot
            if len(layer) == 0:
                return []
            vector = query_bundle.embedding
            if vector is None:
                vector = embed_query(self._index.embed_model, query_bundle.query_str)
            vector = np.asarray(vector, dtype=np.float32)
            return self._results(layer, vector, query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # CPU work: off the caller's loop.
        return await asyncio.to_thread(self._retrieve, query_bundle)
