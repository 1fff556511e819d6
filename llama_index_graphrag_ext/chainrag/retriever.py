"""Sentence retrieval on the graph (paper §3.2) and the index's LLM-free retriever.

:class:`SentenceSearch` holds one search: seeds by embedding similarity (top
``candidate_k`` = 100), reranked to the top ``seed_k`` = 3, then expanded hop by
hop over the chosen edge kinds, each hop's new sentences reranked and added
until the word budget (3,000 words, §4.1) is spent. The query engine drives it
one hop at a time and asks its LLM after each hop whether the gathered sentences
suffice; :class:`SentenceGraphRetriever` runs a fixed number of hops without an
LLM, ranks every candidate sentence in one list and returns the source chunks
in the order of their best sentences.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.embeddings import embed_query
from ..core.nodes import require_query, with_evidence
from ..core.rerank import rerank
from .index import sentence_ids
from .sentence_graph import EDGE_KINDS, SentenceGraph, check_edge_kinds

if TYPE_CHECKING:
    from .index import SentenceGraphIndex


#: How sentences reached over an edge are scored (see :class:`SentenceSearch`).
NEIGHBOR_SCORES: tuple[str, ...] = ("question", "propagate")
#: Share of a source's score that a neighbour reached over each edge kind may add
#: (``neighbor_score="propagate"``), chosen on 2wiki-101 (``docs/methods/chainrag.md``):
#: SS neighbours gain nothing, they are scored against the question alone.
DEFAULT_EDGE_WEIGHTS: dict[str, float] = {"EC": 0.4, "SS": 0.0, "SA": 0.4}
#: How the retriever turns gathered sentences into a ranked list.
RANKINGS: tuple[str, ...] = ("one", "graph")


def word_count(text: str) -> int:
    """Whitespace words (the unit of the paper's 3,000-word limit)."""
    return len(text.split())


@dataclass
class Gathered:
    """One sentence gathered by a search.

    Attributes:
        row: Its row in the sentence graph.
        score: Reranker score against the query (cosine without a reranker).
        role: ``seed``, ``neighbor`` (reached over an edge) or ``candidate``
            (from the first-round pool, used only to fill a ranked list).
        hop: 0 for seeds, h for sentences first reached at hop h.
        via: For neighbours, ``{edge kind: [source rows]}``.
    """

    row: int
    score: float
    role: str
    hop: int = 0
    via: dict[str, list[int]] = field(default_factory=dict)


@dataclass
class SearchState:
    """The sentences a search has gathered so far (in the order they were added)."""

    query: str
    graph: SentenceGraph
    query_vector: np.ndarray
    candidates: list[tuple[int, float]]
    gathered: dict[int, Gathered] = field(default_factory=dict)
    frontier: list[int] = field(default_factory=list)
    words: int = 0
    hops: int = 0
    exhausted: bool = False
    budget_hit: bool = False

    def sentences(self) -> list[Gathered]:
        """Gathered sentences, best score first."""
        return sorted(self.gathered.values(), key=lambda g: (-g.score, g.row))

    def context(self) -> str:
        """The gathered sentences in text order of their chunks, one per line."""
        table = self.graph.sentences
        rows = sorted(self.gathered, key=lambda r: (table.chunk_id(r), table.position(r)))
        return "\n".join(table.text(r) for r in rows)


class SentenceSearch:
    """Seed, rerank and expand on a sentence graph (paper §3.2); one object, many queries.

    Args:
        index: The sentence graph index.
        candidate_k: First-round candidates by embedding similarity (§4.1: 100).
        seed_k: Seeds kept after reranking (§4.1 / §4.6: 3).
        edge_kinds: Edge kinds followed when expanding (ablations drop some).
        word_budget: Stop adding sentences once they hold this many words (§4.1: 3,000).
        reranker: Any LlamaIndex node postprocessor that reranks (e.g. a BGE
            cross-encoder through ``FlagEmbeddingReranker``), asked for every
            candidate whatever its ``top_n``; without one, sentences are ranked
            by cosine similarity.
        neighbor_score: How a sentence reached over an edge is scored:
            ``"question"`` (its cosine / reranker score, like every other
            candidate) or ``"propagate"`` (cosine only: see :meth:`_propagated`).
        edge_weights: Per edge kind, the share of the source's score a
            neighbour may add under ``"propagate"`` (default
            :data:`DEFAULT_EDGE_WEIGHTS`, tuned on 2wiki-101).
    """

    def __init__(
        self,
        index: SentenceGraphIndex,
        *,
        candidate_k: int = 100,
        seed_k: int = 3,
        edge_kinds: Sequence[str] = EDGE_KINDS,
        word_budget: int = 3000,
        reranker: BaseNodePostprocessor | None = None,
        neighbor_score: str = "question",
        edge_weights: dict[str, float] | None = None,
    ) -> None:
        if candidate_k <= 0 or seed_k <= 0 or word_budget <= 0:
            raise ValueError("candidate_k, seed_k and word_budget must be positive")
        if neighbor_score not in NEIGHBOR_SCORES:
            raise ValueError(f"neighbor_score must be one of {NEIGHBOR_SCORES}")
        self.neighbor_score = neighbor_score
        weights = {**DEFAULT_EDGE_WEIGHTS, **(edge_weights or {})}
        unknown = set(weights) - set(EDGE_KINDS)
        if unknown or any(w < 0 for w in weights.values()):
            raise ValueError(f"edge_weights: kinds from {EDGE_KINDS}, weights >= 0")
        self.edge_weights = {k: float(weights[k]) for k in EDGE_KINDS}
        self.index = index
        self.candidate_k = int(candidate_k)
        self.seed_k = int(seed_k)
        self.edge_kinds = check_edge_kinds(edge_kinds)
        self.word_budget = int(word_budget)
        self.reranker = reranker

    # -------------------------------------------------------------- scoring

    def _rerank(
        self, state: SearchState, rows: Sequence[int], scores: np.ndarray
    ) -> list[tuple[int, float]]:
        """Rows ordered by the reranker (or by cosine, ``scores``), best first."""
        if self.reranker is None or not len(rows):
            order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), rows[i]))
            return [(int(rows[i]), float(scores[i])) for i in order]
        # Every row gets ranked: the reranker is asked for all of them, whatever its top_n.
        texts = [state.graph.text(r) for r in rows]
        ranked = rerank(self.reranker, state.query, texts, scores=[float(x) for x in scores])
        return [(int(rows[i]), score) for i, score in ranked]

    # -------------------------------------------------------------- steps

    def start(self, query: str, query_vector: np.ndarray | None = None) -> SearchState:
        """First round: top ``candidate_k`` by cosine, reranked, top ``seed_k`` kept as seeds."""
        sg = self.index.sentence_graph  # one snapshot for the whole search
        if query_vector is None:
            query_vector = embed_query(self.index.embed_model, query)
        return self._start(sg, query, query_vector)

    def _start(self, sg: SentenceGraph, query: str, qv: np.ndarray) -> SearchState:
        state = SearchState(query=query, graph=sg, query_vector=qv, candidates=[])
        if not len(sg):
            state.exhausted = True
            return state
        search = self.index.searcher("sentences", sg, lambda: sentence_ids(sg), sg.vectors)
        rows, scores = search(qv, self.candidate_k)
        ranked = self._rerank(state, rows.tolist(), scores)
        state.candidates = ranked
        for row, score in ranked[: self.seed_k]:
            self._add(state, Gathered(row, score, "seed", 0), force=True)
        state.frontier = [g.row for g in state.gathered.values()]
        return state

    def _add(self, state: SearchState, item: Gathered, force: bool = False) -> bool:
        words = word_count(state.graph.text(item.row))
        if not force and state.words + words > self.word_budget:
            state.budget_hit = True
            return False
        state.gathered[item.row] = item
        state.words += words
        return True

    def expand(self, state: SearchState) -> int:
        """One hop: the frontier's neighbours, reranked, added within the word budget.

        Returns:
            How many sentences were added (0 once nothing new is reachable or the
            budget is spent; ``state.exhausted`` / ``state.budget_hit`` say which).
        """
        if state.exhausted or state.budget_hit or not state.frontier:
            state.exhausted = True
            return 0
        reach = state.graph.neighbors(state.frontier, self.edge_kinds)
        new = [r for r in reach if r not in state.gathered]
        if not new:
            state.exhausted = True
            return 0
        cos = state.graph.vectors[new] @ state.query_vector
        if self.neighbor_score == "propagate" and self.reranker is None:
            cos = np.maximum(cos, self._propagated(state, new, reach, cos))
        state.hops += 1
        added: list[int] = []
        for row, score in self._rerank(state, new, cos):
            if not self._add(state, Gathered(row, score, "neighbor", state.hops, reach[row])):
                break
            added.append(row)
        state.frontier = added
        return len(added)

    def _propagated(
        self,
        state: SearchState,
        new: Sequence[int],
        reach: dict[int, dict[str, list[int]]],
        cos: np.ndarray,
    ) -> np.ndarray:
        """Each new row's cosine plus a share of the best score among the rows that reached it.

        ``cos + w[kind] * score(source)``, never above ``score(source)``: an
        edge from a sentence that matches the question is evidence for its
        neighbour (the LLM-free stand-in for §3.3, where the next hop is
        searched with a sub-question completed by what this hop found), and a
        neighbour never outranks the sentence that led to it.
        """
        gathered, weight = state.gathered, self.edge_weights
        out = np.empty(len(new), dtype=np.float32)
        for i, (row, own) in enumerate(zip(new, cos.tolist(), strict=True)):
            best = -np.inf
            for kind, sources in reach[row].items():
                w = weight[kind]
                for src in sources:
                    score = gathered[src].score
                    best = max(best, min(own + w * score, score))
            out[i] = best
        return out

    def search(self, query: str, hops: int = 1) -> SearchState:
        """Seeds plus at most ``hops`` expansions."""
        state = self.start(query)
        for _ in range(hops):
            if not self.expand(state):
                break
        return state


class SentenceGraphRetriever(BaseRetriever):
    """ChainRAG's retrieval (§3.2) with its LLM steps removed; returns ranked chunks.

    1. Seeds: the top ``candidate_k`` sentences by cosine (the candidate pool),
       reranked, the best ``seed_k`` kept (§3.2, §4.1).
    2. Expansion over the chosen edge kinds, each hop's new sentences added
       best-first until the word budget is spent (§3.2, §4.1). The paper
       explores all 1-hop neighbours first and goes further only when its LLM
       judges the context insufficient; without that judgement the default is
       the first exploration (``hops=1``; more hops measured worse).
    3. One ranking: every candidate (seeds, the rest of the pool and the
       expanded sentences) sorted by one score, as §3.4's CxtInt reranks the
       union of retrieved sentences against the question. A pool sentence's
       score is its cosine (or reranker score); an expanded sentence's is its
       cosine raised by ``edge_weights[kind]`` times the score of the sentence
       that reached it, capped at that score (``neighbor_score="propagate"``,
       the LLM-free stand-in for §3.3's entity-completed next hop). A
       high-cosine sentence outside the neighbourhood still outranks a
       low-cosine neighbour.
    4. Chunks: each sentence maps to its source chunk; a chunk takes the rank
       of its best sentence (deduplicated by source, first occurrence kept),
       and the runner reads chunk ids (one passage = one chunk) in that order.

    ``rank="graph"`` keeps the earlier order (gathered sentences' chunks first,
    then the pool) for comparison. Each chunk carries its sentences, their
    roles, hop, the edge kinds that brought them in and the key entities shared
    over EC.

    Args:
        index: The sentence graph index.
        similarity_top_k: Chunks to return.
        candidate_k: First-round candidates (§4.1: 100).
        seed_k: Seeds (§4.1: 3).
        hops: Expansion hops at most (default 1, the paper's first
            exploration); ``None``: until the budget is spent or nothing new
            is reachable.
        edge_kinds: Edge kinds to follow (``("EC", "SS", "SA")``; drop some for ablations).
        word_budget: Word limit of the gathered sentences (§4.1: 3,000).
        reranker: Optional LlamaIndex reranking postprocessor (cosine when ``None``).
        neighbor_score: ``"propagate"`` or ``"question"`` (see :class:`SentenceSearch`).
        edge_weights: Per-kind shares for ``"propagate"`` (default
            :data:`DEFAULT_EDGE_WEIGHTS`).
        rank: ``"one"`` (one ranking of every candidate) or ``"graph"``.
        fill: With ``rank="graph"``, complete the list from the candidate pool.
        callback_manager: LlamaIndex callbacks; falls back to ``Settings``.
    """

    def __init__(
        self,
        index: SentenceGraphIndex,
        similarity_top_k: int = 10,
        candidate_k: int = 100,
        seed_k: int = 3,
        hops: int | None = 1,
        edge_kinds: Sequence[str] = EDGE_KINDS,
        word_budget: int = 3000,
        reranker: BaseNodePostprocessor | None = None,
        neighbor_score: str = "propagate",
        edge_weights: dict[str, float] | None = None,
        rank: str = "one",
        fill: bool = True,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        if similarity_top_k <= 0:
            raise ValueError("similarity_top_k must be positive")
        if hops is not None and hops < 0:
            raise ValueError("hops must be >= 0 (or None: until the budget)")
        if rank not in RANKINGS:
            raise ValueError(f"rank must be one of {RANKINGS}, got {rank!r}")
        self.index = index
        self.similarity_top_k = int(similarity_top_k)
        self.hops = None if hops is None else int(hops)
        self.rank = rank
        self.fill = bool(fill)
        self.search = SentenceSearch(
            index,
            candidate_k=candidate_k,
            seed_k=seed_k,
            edge_kinds=edge_kinds,
            word_budget=word_budget,
            reranker=reranker,
            neighbor_score=neighbor_score,
            edge_weights=edge_weights,
        )
        super().__init__(callback_manager=callback_manager, **kwargs)

    def search_state(self, query: str, query_vector: np.ndarray | None = None) -> SearchState:
        """Seeds and expansion for one query (steps 1-2), without the chunk mapping."""
        state = self.search.start(query, query_vector)
        done = 0
        while self.hops is None or done < self.hops:
            if not self.search.expand(state):
                break
            done += 1
        return state

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        require_query(query_bundle.query_str, query_bundle.embedding)
        state = self.search_state(query_bundle.query_str, _bundle_vector(query_bundle))
        return chunks_from_state(self.index, state, self.similarity_top_k, self.rank, self.fill)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # Embedding, graph search and reranking are CPU work: off the caller's loop.
        return await asyncio.to_thread(self._retrieve, query_bundle)


def _bundle_vector(query_bundle: QueryBundle) -> np.ndarray | None:
    if query_bundle.embedding is None:
        return None
    vec = np.asarray(query_bundle.embedding, dtype=np.float32)
    return vec / max(float(np.linalg.norm(vec)), 1e-12)


def describe_sentence(sg: SentenceGraph, item: Gathered) -> dict[str, Any]:
    """A JSON-ready account of one gathered sentence (for evidence and the chain)."""
    out: dict[str, Any] = {
        "text": sg.text(item.row),
        "score": round(item.score, 4),
        "role": item.role,
        "hop": item.hop,
    }
    if item.via:
        edges = []
        for kind, sources in item.via.items():
            for src in sources[:3]:
                edge: dict[str, Any] = {"kind": kind, "from": sg.text(src)[:120]}
                if kind == "EC":
                    edge["entities"] = sg.shared_entities(item.row, src)
                edges.append(edge)
        out["edges"] = edges
    return out


def ranked_chunk_ids(state: SearchState, top_k: int, rank: str = "one", fill: bool = True):
    """Chunk ids in rank order and each chunk's sentences (best first).

    ``rank="one"``: gathered and pool sentences in one list by score; a chunk
    is ranked by its best sentence. ``rank="graph"``: gathered sentences'
    chunks first, then (with ``fill``) the pool's.
    """
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
    index: SentenceGraphIndex,
    state: SearchState,
    top_k: int,
    rank: str = "one",
    fill: bool = True,
) -> list[NodeWithScore]:
    """The source chunks of a search, ranked by their best sentences, with evidence."""
    sg = state.graph
    order, by_chunk = ranked_chunk_ids(state, top_k, rank, fill)
    chunks = {n.node_id: n for n in index.get_chunks(order)} if order else {}
    results = []
    for rank_no, cid in enumerate(order, start=1):
        sents = by_chunk[cid]
        evidence = {
            "method": "chainrag",
            "rank": rank_no,
            "query": state.query,
            "sentences": [describe_sentence(sg, s) for s in sents],
            "edge_kinds": sorted({k for s in sents for k in s.via}),
        }
        results.append(with_evidence(chunks[cid], max(s.score for s in sents), evidence))
    return results
