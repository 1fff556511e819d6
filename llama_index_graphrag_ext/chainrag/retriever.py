"""ChainRAG's LLM-free retriever: the paper's retrieval (§3.2) with its LLM steps removed."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.config import top_k_of
from ..core.nodes import require_query, with_evidence
from ..core.rwlock import reading
from .config import ChainRAGConfig
from .search import Gathered, SearchState, SentenceSearch, describe_sentence


class SentenceGraphRetriever(BaseRetriever):
    """ChainRAG's retrieval (§3.2) with its LLM steps removed; returns ranked chunks.

    1. Seeds: the top ``candidate_k`` sentences by cosine, reranked, the best ``k``
       kept (§3.2, §4.1).
    2. ``hops`` expansions, each hop's new sentences added best-first until the word
       budget is spent (§3.2; the paper's further hops wait for its LLM's verdict).
    3. One ranking (``rank="one"``) of every candidate, as §3.4's CxtInt reranks the
       union against the question (``rank="graph"``: the gathered sentences' chunks
       first, then the pool's).
    4. A chunk takes the rank of its best sentence and carries its sentences as evidence.

    Args:
        config: A :class:`~.config.ChainRAGConfig` or preset name (default: the index's).
        reranker: Optional LlamaIndex reranking postprocessor (cosine when ``None``).
        **overrides: Retrieval fields of the config by name (``k=2``, ``follow_ec=False``).
    """

    def __init__(
        self,
        index: Any,
        *,
        config: ChainRAGConfig | str | None = None,
        similarity_top_k: int = 10,
        reranker: BaseNodePostprocessor | None = None,
        callback_manager: CallbackManager | None = None,
        **overrides: Any,
    ) -> None:
        similarity_top_k = top_k_of(similarity_top_k, 10)
        base = index.config if config is None else ChainRAGConfig.resolve(config)
        self.config = base.at_query_time(overrides, "retrieval")
        self.params = self.config.retrieval
        self.index = index
        self.similarity_top_k = int(similarity_top_k)
        self.search = SentenceSearch(index, self.params, reranker)
        super().__init__(callback_manager=callback_manager or index._callback_manager)

    def search_state(self, query: str, query_vector: np.ndarray | None = None) -> SearchState:
        """Seeds and expansion for one query (steps 1-2), without the chunk mapping."""
        state = self.search.start(query, query_vector)
        done, hops = 0, self.params.hops
        while hops is None or done < hops:
            if not self.search.expand(state):
                break
            done += 1
        return state

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        require_query(query_bundle.query_str, query_bundle.embedding)
        with reading(self.index):
            state = self.search_state(query_bundle.query_str, _bundle_vector(query_bundle))
            params = self.params
            return chunks_from_state(
                self.index,
                state,
                self.similarity_top_k,
                params.rank,
                params.fill,
                bm25_weight=params.bm25_weight,
            )

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # CPU work: off the caller's loop.
        return await asyncio.to_thread(self._retrieve, query_bundle)


def _bundle_vector(query_bundle: QueryBundle) -> np.ndarray | None:
    if query_bundle.embedding is None:
        return None
    vec = np.asarray(query_bundle.embedding, dtype=np.float32)
    return vec / max(float(np.linalg.norm(vec)), 1e-12)


def ranked_chunk_ids(state: SearchState, top_k: int, rank: str = "one", fill: bool = True):
    """Chunk ids in rank order (see :class:`SentenceGraphRetriever`, step 3) and each
    chunk's sentences, best first."""
    sg = state.graph
    items = list(state.gathered.values())
    if fill or rank == "one":
        pool = [Gathered(r, s, "candidate") for r, s in state.candidates if r not in state.gathered]
    else:
        pool = []
    by_chunk: dict[str, list[Gathered]] = {}
    order: list[str] = []

    def take(group: list[Gathered]) -> None:
        for item in sorted(group, key=lambda g: (-g.score, g.row)):
            cid = sg.chunk_id(item.row)
            if cid not in by_chunk:
                if len(order) >= top_k:
                    continue
                order.append(cid)
                by_chunk[cid] = []
            by_chunk[cid].append(item)

    if rank == "one":
        take(items + pool)
    else:
        take(items)
        if fill:
            take(pool)
    return order, by_chunk


def chunks_from_state(
    index: Any,
    state: SearchState,
    top_k: int,
    rank: str = "one",
    fill: bool = True,
    *,
    bm25_weight: float = 0.0,
) -> list[NodeWithScore]:
    """The source chunks of a search, ranked by their best sentences, with evidence.

    With ``bm25_weight > 0`` that ranking (every chunk the search reached) is fused
    with BM25's over all passages (``core/lexical.py``); the score is then the fused one.
    """
    sg = state.graph
    order, by_chunk = ranked_chunk_ids(state, len(sg) if bm25_weight > 0 else top_k, rank, fill)
    order, fused, bm25_ranks = index.fuse_passages(
        state.query, order, bm25_weight, max(2 * top_k, 20)
    )
    order = order[:top_k]
    chunks = {n.node_id: n for n in index.get_chunks(order)} if order else {}
    results = []
    for rank_no, cid in enumerate(order, start=1):
        sents = by_chunk.get(cid, [])
        evidence = {
            "method": "chainrag",
            "rank": rank_no,
            "query": state.query,
            "sentences": [describe_sentence(sg, s) for s in sents],
            "edge_kinds": sorted({k for s in sents for k in s.via}),
        }
        if fused is not None:
            evidence["bm25_rank"] = bm25_ranks.get(cid)
            evidence["sentence_score"] = max((s.score for s in sents), default=None)
            score = fused[rank_no - 1]
        else:
            score = max(s.score for s in sents)
        results.append(with_evidence(chunks[cid], score, evidence))
    return results
