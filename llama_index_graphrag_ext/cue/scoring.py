"""The re-ranking function R(q, text) of Q-Iter (CUE-RAG §3.3, Alg. 3 lines 13 and 23).

The paper scores each path's sorted, concatenated units, and at the end each chunk,
with a cross-encoder (BGE-Reranker-v2-M3). :class:`RerankerScorer` does that with any
LlamaIndex reranking postprocessor; :class:`EmbeddingScorer`, the offline default, uses
the index's vectors (a path's is the normalised sum of its units', which costs no
encoder pass per path) plus, with ``lexical_weight``, exact-word coverage (:mod:`.lexical`).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from llama_index.core.postprocessor.types import BaseNodePostprocessor

from ..core.embeddings import normalize_rows
from ..core.rerank import rerank_scores
from ..core.windows import LONG_CHUNK_SCORES
from .lexical import Lexicon, QueryWords
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
    """Cosine scorer on the index's embeddings, plus exact-word coverage (see the module docs).

    ``lexical_weight`` (paths only) and ``long_chunks`` are the config's fields (see
    :class:`~.config.CUEConfig`).
    """

    # Class defaults, so a subclass that skips ``__init__`` scores by cosine alone.
    name = "embedding-cosine"
    lexical_weight = 0.0
    long_chunks = "best-window"
    _lexicon: tuple[weakref.ref, Lexicon] | None = None
    _query: tuple[Lexicon, str, QueryWords] | None = None

    def __init__(self, lexical_weight: float = 0.0, long_chunks: str = "best-window") -> None:
        if lexical_weight < 0:
            raise ValueError("lexical_weight must be >= 0")
        if long_chunks not in LONG_CHUNK_SCORES:
            raise ValueError(f"long_chunks must be one of {LONG_CHUNK_SCORES}, not {long_chunks!r}")
        self.lexical_weight = float(lexical_weight)
        self.long_chunks = long_chunks
        self.name = (
            f"embedding-cosine+lexical({self.lexical_weight:g})"
            if self.lexical_weight
            else "embedding-cosine"
        )
        # (view, its lexicon): made at the first query on a view, dropped with it
        self._lexicon: tuple[weakref.ref, Lexicon] | None = None
        self._query: tuple[Lexicon, str, QueryWords] | None = None

    def query_words(self, query: str, view: CueGraphView) -> QueryWords:
        """The query's weighted words against this view's units (cached per view and query)."""
        cached = self._lexicon
        lexicon = cached[1] if cached is not None and cached[0]() is view else None
        if lexicon is None:
            lexicon = Lexicon(view)
            self._lexicon = (weakref.ref(view), lexicon)
        last = self._query
        if last is not None and last[0] is lexicon and last[1] == query:
            return last[2]
        words = lexicon.query(query)
        self._query = (lexicon, query, words)
        return words

    def score_paths(self, query, query_vec, view, paths):
        if not paths:
            return np.zeros(0, dtype=np.float32)
        cosines = self._path_cosines(query_vec, view, paths)
        if not self.lexical_weight:
            return cosines
        cover = self.query_words(query, view).path_coverage(paths)
        return cosines + self.lexical_weight * cover

    def _path_cosines(self, query_vec, view, paths):
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
        # Cosine alone: word coverage favours the first-hop passage (docs/methods/cue.md).
        scores = view.chunk_matrix[list(chunk_rows)] @ query_vec
        windows = view.chunk_windows
        if windows is None or self.long_chunks == "pooled":
            return scores
        # A long chunk by its best window: its pooled vector averages away the part
        # the paths led here for (core/windows.py).
        return windows.best(scores, chunk_rows, query_vec)


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
