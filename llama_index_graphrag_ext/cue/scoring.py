"""The re-ranking function R(q, text) of Q-Iter (CUE-RAG §3.3, Alg. 3 lines 13 and 23).

The paper scores each path's sorted, concatenated units and, at the end, each
candidate chunk with a cross-encoder (BGE-Reranker-v2-M3). Two scorers:

* :class:`EmbeddingScorer` (the default, and what runs offline): cosine of the
  query with the index's own vectors. A path's vector is the normalised sum of
  its unit vectors (a cheap stand-in for embedding the concatenation, which
  would cost an encoder pass per path); a chunk's vector is its embedding.
  No cross-encoder ships offline, so this is weaker than the paper's set-up.
* :class:`RerankerScorer`: any LlamaIndex reranking postprocessor
  (``SentenceTransformerRerank``, ``FlagEmbeddingReranker``, ...), called once per
  depth with every candidate path as a temporary node, as the paper does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from llama_index.core.postprocessor.types import BaseNodePostprocessor

from ..core.embeddings import normalize_rows
from ..core.rerank import rerank_scores
from .view import CueGraphView


@runtime_checkable
class QIterScorer(Protocol):
    """Scores paths (sets of unit rows) and chunks against a query; higher is better."""

    name: str

    def score_paths(
        self,
        query: str,
        query_vec: np.ndarray,
        view: CueGraphView,
        paths: Sequence[tuple[int, ...]],
    ) -> np.ndarray:
        """One score per path."""
        ...

    def score_chunks(
        self,
        query: str,
        query_vec: np.ndarray,
        view: CueGraphView,
        chunk_rows: Sequence[int],
        texts: Sequence[str],
    ) -> np.ndarray:
        """One score per chunk."""
        ...


class EmbeddingScorer:
    """Cosine scorer on the index's embeddings (the default; see the module docs)."""

    name = "embedding-cosine"

    def score_paths(self, query, query_vec, view, paths):
        if not paths:
            return np.zeros(0, dtype=np.float32)
        mat = view.unit_matrix
        if len({len(p) for p in paths}) == 1:
            # Beam search scores paths of one length per depth: one gather, and
            # the same row-by-row sum as the loop below (so the same floats).
            sums = mat[np.asarray(paths, dtype=np.int64)].sum(axis=1)
        else:
            sums = np.stack([mat[list(p)].sum(axis=0) for p in paths])
        return normalize_rows(sums) @ query_vec

    def score_chunks(self, query, query_vec, view, chunk_rows, texts):
        if len(chunk_rows) == 0:
            return np.zeros(0, dtype=np.float32)
        return view.chunk_matrix[list(chunk_rows)] @ query_vec


class RerankerScorer:
    """Adapter for any LlamaIndex reranking postprocessor (a cross-encoder, an LLM reranker).

    Args:
        reranker: The postprocessor. Its ``top_n`` is raised to the number of
            candidates for each call so that every candidate gets a score.
        separator: Joins a path's units (sorted lexicographically, §3.3).
    """

    def __init__(self, reranker: BaseNodePostprocessor, separator: str = " ") -> None:
        self.reranker = reranker
        self.separator = separator
        self.name = type(reranker).__name__

    def _score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        # Every candidate needs a score: the reranker is asked for all of them.
        return rerank_scores(self.reranker, query, texts)

    def score_paths(self, query, query_vec, view, paths):
        texts = [self.separator.join(sorted(view.unit_texts[u] for u in p)) for p in paths]
        return self._score(query, texts)

    def score_chunks(self, query, query_vec, view, chunk_rows, texts):
        return self._score(query, list(texts))


def as_scorer(reranker: QIterScorer | BaseNodePostprocessor | None) -> QIterScorer:
    """Turn ``None``, a postprocessor or a scorer into a scorer."""
    if reranker is None:
        return EmbeddingScorer()
    if isinstance(reranker, BaseNodePostprocessor):
        return RerankerScorer(reranker)
    if isinstance(reranker, QIterScorer):
        return reranker
    raise TypeError(
        f"reranker must be a BaseNodePostprocessor or a QIterScorer, got {type(reranker).__name__}"
    )
