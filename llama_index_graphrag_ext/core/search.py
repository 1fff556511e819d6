"""The one search path: top-k rows of a retrieval snapshot, in memory or in a vector store.

:class:`MatrixSearch` (exact, in memory) and :class:`RowSearch` (an external
vector store, candidates re-scored exactly) both return :class:`Hits` with rows
best first and ties in row order, so a method writes its retrieval once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .embeddings import normalize_rows, top_k_of_scores


@dataclass(frozen=True)
class Hits:
    """The outcome of one :meth:`RowSearcher.search`.

    Attributes:
        rows: int64, the best rows of the snapshot, best first (ties to the lower row).
        scores: float32, their cosines with the query.
        cosines: The query's cosine with any row, as ``cosines[rows]``: the full
            product in memory, a lazy one store-backed.
    """

    rows: np.ndarray
    scores: np.ndarray
    cosines: Any


class RowSearcher(ABC):
    """Top-k rows of one retrieval snapshot (``(n, d)`` unit rows) for a query vector.

    Indexes hand these to their retrievers (``GraphIndexBase.searcher``).
    """

    @abstractmethod
    def search(self, vector: np.ndarray, k: int) -> Hits:
        """The ``k`` rows nearest ``vector`` (fewer when the snapshot has fewer)."""

    def search_many(self, vectors: Sequence[np.ndarray], k: int) -> list[Hits]:
        """:meth:`search` for each vector, in order."""
        return [self.search(v, k) for v in vectors]

    def __call__(self, vector: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, scores)`` of :meth:`search`."""
        hits = self.search(vector, k)
        return hits.rows, hits.scores


def _no_hits(cosines: Any = None) -> Hits:
    return Hits(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), cosines)


class MatrixSearch(RowSearcher):
    """Exact search of an in-memory ``(n, d)`` matrix (not copied).

    The query vector is used as given, so scores are exactly ``matrix @ vector``.
    """

    def __init__(self, matrix: np.ndarray) -> None:
        self.matrix = matrix

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def search(self, vector: np.ndarray, k: int) -> Hits:
        if len(self) == 0:
            return _no_hits(np.zeros(0, dtype=np.float32))
        scores = self.matrix @ np.asarray(vector, dtype=np.float32)
        if k <= 0:
            return _no_hits(scores)
        rows, top = top_k_of_scores(scores, k)
        return Hits(rows, top, scores)

    def search_many(self, vectors: Sequence[np.ndarray], k: int) -> list[Hits]:
        """One pass over the matrix for all vectors (:func:`products`); equal vectors share it."""
        keys = [np.ascontiguousarray(v).tobytes() for v in vectors]
        distinct = {key: v for key, v in zip(keys, vectors, strict=True)}
        sims = products(self.matrix, list(distinct.values()))
        found: dict[bytes, Hits] = {}
        for key, row in zip(distinct, sims, strict=True):
            found[key] = Hits(*top_k_of_scores(row, k), row) if k > 0 else _no_hits(row)
        return [found[key] for key in keys]


def products(
    matrix: np.ndarray, vectors: Sequence[np.ndarray], rows: np.ndarray | None = None
) -> np.ndarray:
    """``matrix[rows] @ vector`` for each vector, as a ``(len(vectors), len(rows))`` array.

    ``rows=None`` means every row. The rows are walked in cache-sized blocks,
    each multiplied by every vector, so the matrix is read once and a row
    selection is never copied out whole (a matrix-matrix product is slow with
    few columns).
    """
    n = matrix.shape[0] if rows is None else rows.size
    out = np.empty((len(vectors), n), dtype=np.result_type(matrix, *vectors))
    for start in range(0, n, _BLOCK_ROWS):
        if rows is None:
            block = matrix[start : start + _BLOCK_ROWS]
        else:
            block = matrix[rows[start : start + _BLOCK_ROWS]]
        for i, vector in enumerate(vectors):
            np.matmul(block, vector, out=out[i, start : start + block.shape[0]])
    return out


_BLOCK_ROWS = 512  # stays in cache at 384 float32 dimensions


class _RowCosines:
    """Cosines to a query computed only for the rows asked for (store-backed searches)."""

    def __init__(self, matrix: np.ndarray | None, vector: np.ndarray) -> None:
        self._matrix, self._vector = matrix, vector

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        if self._matrix is None:
            raise ValueError("this search was made without the snapshot's matrix")
        return self._matrix[rows] @ self._vector


class RowSearch(RowSearcher):
    """First-hop top-k over the rows of a retrieval snapshot, through a :class:`VectorTable`.

    The table proposes ``k + margin`` candidates; ids the snapshot does not
    know are dropped, and with the snapshot's ``matrix`` the rest are re-scored
    exactly, so the result equals the in-memory search whenever the candidates
    hold the true top ``k`` (the margin absorbs float noise at the cut).

    Args:
        ids: The snapshot's ids in row order.
        matrix: The snapshot's unit rows (``None``: keep the store's scores).
    """

    def __init__(
        self,
        table: Any,
        ids: Sequence[str],
        matrix: np.ndarray | None = None,
        margin: int = 8,
    ) -> None:
        self.table = table
        self.row = {node_id: r for r, node_id in enumerate(ids)}
        self.matrix = matrix
        self.margin = int(margin)

    def search(self, vector: np.ndarray, k: int) -> Hits:
        vector = normalize_rows(vector)[0]
        cosines = _RowCosines(self.matrix, vector)
        if k <= 0 or not self.row:
            return _no_hits(cosines)
        ids, store_scores = self.table.query(vector, int(k) + self.margin)
        pairs = [(self.row[i], s) for i, s in zip(ids, store_scores, strict=True) if i in self.row]
        if not pairs:
            return _no_hits(cosines)
        rows = np.fromiter((r for r, _ in pairs), dtype=np.int64, count=len(pairs))
        rows = np.unique(rows)  # sorted: lower rows first among equal scores
        if self.matrix is not None:
            scores = (self.matrix[rows] @ vector).astype(np.float32)
        else:
            by_row = dict(pairs)
            scores = np.asarray([by_row[r] for r in rows.tolist()], dtype=np.float32)
        order, top = top_k_of_scores(scores, k)
        return Hits(rows[order], top, cosines)


__all__ = ["Hits", "MatrixSearch", "RowSearch", "RowSearcher", "products"]
