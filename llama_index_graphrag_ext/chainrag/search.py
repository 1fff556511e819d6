"""Seeds, reranking and expansion on the sentence graph (paper §3.2).

The query engine drives a search one hop at a time, asking its LLM after each hop
whether the sentences suffice; the LLM-free retriever runs a fixed number of hops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llama_index.core.postprocessor.types import BaseNodePostprocessor

from ..core.embeddings import embed_query
from ..core.lexical import fuse
from ..core.rerank import rerank
from .config import ChainRAGRetrieval
from .sentence_graph import SentenceGraph, sentence_ids


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
        params: The config's retrieval section (see :class:`~.config.ChainRAGConfig`).
        reranker: Any LlamaIndex reranking postprocessor, asked for every candidate
            whatever its ``top_n``; without one, sentences are ranked by cosine.
    """

    def __init__(
        self,
        index: Any,
        params: ChainRAGRetrieval,
        reranker: BaseNodePostprocessor | None = None,
    ) -> None:
        self.index = index
        self.params = params
        self.reranker = reranker
        self._kinds, self._weights = params.edge_kinds, params.edge_weights

    # -------------------------------------------------------------- scoring

    def _rerank(
        self, state: SearchState, rows: Sequence[int], scores: np.ndarray
    ) -> list[tuple[int, float]]:
        """Rows ordered by the reranker (or by cosine, ``scores``), best first."""
        if self.reranker is None or not len(rows):
            order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), rows[i]))
            return [(int(rows[i]), float(scores[i])) for i in order]
        texts = [state.graph.text(r) for r in rows]
        ranked = rerank(self.reranker, state.query, texts, scores=[float(x) for x in scores])
        return [(int(rows[i]), score) for i, score in ranked]

    # -------------------------------------------------------------- steps

    def start(self, query: str, query_vector: np.ndarray | None = None) -> SearchState:
        """First round: top ``candidate_k`` by cosine, reranked, top ``k`` kept as seeds."""
        sg = self.index.sentence_graph  # one snapshot per search
        if query_vector is None:
            query_vector = embed_query(self.index.embed_model, query)
        return self._start(sg, query, query_vector)

    def _start(self, sg: SentenceGraph, query: str, qv: np.ndarray) -> SearchState:
        state = SearchState(query=query, graph=sg, query_vector=qv, candidates=[])
        if not len(sg):
            state.exhausted = True
            return state
        search = self.index.searcher("sentences", sg, lambda: sentence_ids(sg), sg.vectors)
        rows, scores = search(qv, self.params.candidate_k)
        ranked = self._rerank(state, rows.tolist(), scores)
        if self.params.bm25_weight > 0:
            ranked = self._with_bm25(state, ranked)
        state.candidates = ranked
        for row, score in ranked[: self.params.k]:
            self._add(state, Gathered(row, score, "seed", 0), force=True)
        state.frontier = [g.row for g in state.gathered.values()]
        return state

    def _with_bm25(
        self, state: SearchState, ranked: list[tuple[int, float]]
    ) -> list[tuple[int, float]]:
        """The first round's candidates fused with BM25's best sentences (``core/lexical.py``):
        seeds in fused order, each keeping its score; a sentence BM25 alone brings is
        scored as the others were (cosine, or the reranker's score)."""
        sg = state.graph
        table = self.index.lexical("sentences", sg, lambda: [sg.text(r) for r in range(len(sg))])
        lexical, _ = table.top(state.query, self.params.candidate_k)
        rows, _ = fuse([r for r, _ in ranked], lexical, self.params.bm25_weight)
        rows = rows[: self.params.candidate_k].tolist()
        score = dict(ranked)
        new = [r for r in rows if r not in score]
        if new:
            score.update(self._rerank(state, new, sg.vectors[new] @ state.query_vector))
        return [(r, float(score[r])) for r in rows]

    def _add(self, state: SearchState, item: Gathered, force: bool = False) -> bool:
        words = word_count(state.graph.text(item.row))
        if not force and state.words + words > self.params.word_budget:
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
        reach = state.graph.neighbors(state.frontier, self._kinds)
        new = [r for r in reach if r not in state.gathered]
        if not new:
            state.exhausted = True
            return 0
        cos = state.graph.vectors[new] @ state.query_vector
        if self.params.neighbor_score == "propagate" and self.reranker is None:
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
        """Each new row's ``cos + w[kind] * score(source)``, never above ``score(source)``.

        An edge from a sentence that matches the question is evidence for its neighbour
        (the LLM-free stand-in for §3.3's completed sub-question), and a neighbour
        never outranks the sentence that led to it.
        """
        gathered, weight = state.gathered, self._weights
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
