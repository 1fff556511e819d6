"""The lexical channel: BM25 over a method's own units, and the one rule that fuses it.

Names, dates and rare words carry many corpora (logs, mail, long notes), and a
small embedder blurs them; a long passage's single vector blurs them further.
Each method therefore ranks its candidates twice where it picks them and where
it ranks its final passages: by its own (vector or graph) score and by BM25
(``bm25s``, Lucene's variant, over the unit it works on: sentences, units,
passages), and merges the two rankings by **weighted reciprocal-rank fusion**
(Cormack, Clarke and Büttcher, SIGIR 2009)::

    fused(d) = 1 / (RRF_K + rank_method(d)) + w / (RRF_K + rank_bm25(d))

ranks from 1; a list that lacks ``d`` adds nothing; ties keep the method's order.
``w`` is the method's ``bm25_weight`` (0 turns the channel off: the papers);
``RRF_K`` is one constant for the suite. Ranks, not scores, are fused because
several methods rank by something other than a cosine (paths, probabilities,
counts), and a BM25 score has no fixed scale.

``RRF_K = 2`` was chosen on 2wiki-101 from {2, 5, 10, 20}, fusing the five
methods' top-10 lists of an earlier acceptance run with BM25's (``docs/benchmarks.md``,
"Names and rare words"); the usual 60 suits fusing many long lists, and flattens
the top ranks that matter at k = 5.

A :class:`LexicalTable` is derived from the index's texts, never persisted: an
index builds it on a retriever's first query over each snapshot
(:meth:`~.index.GraphIndexBase.lexical`) and drops it when a write replaces the
snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import bm25s
import numpy as np

from .embeddings import top_k_of_scores
from .text.tokens import tokenize

# bm25s sets its own logger to DEBUG on import (see baselines/bm25.py).
logging.getLogger("bm25s").setLevel(logging.NOTSET)

#: The rank constant of the fusion (see the module docs).
RRF_K = 2


class LexicalTable:
    """BM25 over a fixed list of texts (rows), scored for one query at a time.

    Args:
        texts: The rows' texts, in row order (read once).
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation.
    """

    def __init__(self, texts: Iterable[str], k1: float = 1.5, b: float = 0.75) -> None:
        tokens = [tokenize(t) for t in texts]
        self._n = len(tokens)
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        if any(tokens):  # bm25s cannot index an empty corpus
            self._bm25.index(tokens, show_progress=False)
            self._vocab = self._bm25.vocab_dict
        else:
            self._vocab = {}

    def __len__(self) -> int:
        return self._n

    def scores(self, query: str) -> np.ndarray:
        """BM25 of every row for ``query`` (zeros where no query word occurs)."""
        known = [t for t in tokenize(query) if t in self._vocab]
        if not known or not self._n:
            return np.zeros(self._n, np.float32)
        return np.asarray(self._bm25.get_scores(known), np.float32)

    def top(self, query: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` best rows with a positive score, best first, and their scores."""
        rows, values = top_k_of_scores(self.scores(query), n)
        keep = values > 0
        return rows[keep], values[keep]


def fuse(
    primary: Sequence[int] | np.ndarray,
    lexical: Sequence[int] | np.ndarray,
    weight: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted reciprocal-rank fusion of two rankings (best first) of the same rows.

    Returns every row of either list, best fused first, and the fused scores.
    Ties (and ``weight == 0``) keep ``primary``'s order, then ``lexical``'s.
    """
    score: dict[int, float] = {}
    for rank, row in enumerate(np.asarray(primary, np.int64).tolist()):
        score.setdefault(row, 1.0 / (RRF_K + rank + 1))
    if weight > 0:
        for rank, row in enumerate(np.asarray(lexical, np.int64).tolist()):
            score[row] = score.get(row, 0.0) + weight / (RRF_K + rank + 1)
    rows = list(score)  # insertion order: primary's, then lexical-only rows
    order = sorted(range(len(rows)), key=lambda i: -score[rows[i]])
    out = np.asarray([rows[i] for i in order], np.int64)
    return out, np.asarray([score[rows[i]] for i in order], np.float64)


def fuse_ids(
    primary: Sequence[str], lexical: Sequence[str], weight: float
) -> tuple[list[str], list[float]]:
    """:func:`fuse` over two rankings of ids (e.g. chunk ids): the fused ids and scores."""
    names = list(dict.fromkeys([*primary, *lexical]))
    code = {c: i for i, c in enumerate(names)}
    rows, scores = fuse([code[c] for c in primary], [code[c] for c in lexical], weight)
    return [names[r] for r in rows.tolist()], scores.tolist()
