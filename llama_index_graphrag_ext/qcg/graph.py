"""The query layer of the query-centric graph as flat arrays (paper §3.3 step 3).

``QueryLayer`` is an immutable snapshot of the query nodes (``Q_g``), their embeddings,
source chunks (``E_inter``) and ``k`` nearest query nodes (``E_intra``, directed as the
paper's ``KNN(q, k)``); writers swap in a new one, so readers need no lock.

kNN lists are exact (blocked matrix products, ties to the earlier node), so an
incrementally maintained layer equals a rebuild. Past
:data:`~..core.ann.APPROX_FROM_PAIRS` pairs the approximate search of :mod:`..core.ann`
is used, and the two may differ in the few neighbours it misses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..core.ann import ivf_knn, use_approximate
from ..core.windows import ChunkWindows
from .query_nodes import QueryPair

_NONE = -1


def knn_rows(
    matrix: np.ndarray,
    rows: np.ndarray,
    k: int,
    chunk_codes: np.ndarray | None = None,
    *,
    block_size: int = 1024,
    approximate: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """kNN of ``matrix[rows]`` (unit rows) among all rows of ``matrix`` (self excluded).

    Args:
        chunk_codes: When given, rows with the same code (same chunk) are not
            neighbours of each other (``exclude_same_chunk``).
        approximate: ``None``: exact unless the search is large (see
            :func:`~..core.ann.use_approximate`); ``True`` / ``False`` force one.

    Returns:
        ``(idx, sims)`` of shape ``(len(rows), k)``, best first, ties to the lower
        index; missing neighbours are ``-1`` with similarity ``-inf``.
    """
    n = matrix.shape[0]
    rows = np.asarray(rows, dtype=np.int64)
    idx = np.full((len(rows), k), _NONE, dtype=np.int64)
    sims = np.full((len(rows), k), -np.inf, dtype=np.float32)
    if n == 0 or k == 0 or len(rows) == 0:
        return idx, sims
    if use_approximate(len(rows), n, approximate):
        return _approximate_knn_rows(matrix, rows, k, chunk_codes)
    for start in range(0, len(rows), block_size):
        part = rows[start : start + block_size]
        block = matrix[part] @ matrix.T
        block[np.arange(len(part)), part] = -np.inf
        if chunk_codes is not None:
            block[chunk_codes[part][:, None] == chunk_codes[None, :]] = -np.inf
        i, s = _top_k_block(block, k)
        idx[start : start + len(part)], sims[start : start + len(part)] = i, s
    return idx, sims


def _approximate_knn_rows(
    matrix: np.ndarray, rows: np.ndarray, k: int, chunk_codes: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`knn_rows` by the inverted-file search: ``k`` plus spare neighbours (the self
    row and the largest chunk's rows), then the masked ones dropped."""
    spare = 1
    if chunk_codes is not None:
        spare += int(min(np.bincount(chunk_codes).max(), 64))
    want = min(k + spare, matrix.shape[0])
    cand, cand_sims = ivf_knn(matrix[rows], matrix, want)
    bad = (cand < 0) | (cand == rows[:, None])
    if chunk_codes is not None:
        bad |= chunk_codes[np.maximum(cand, 0)] == chunk_codes[rows][:, None]
    cand_sims = np.where(bad, -np.inf, cand_sims)
    # Ties to the lower index, as the exact search breaks them.
    order = np.lexsort((np.where(bad, np.iinfo(np.int64).max, cand), -cand_sims), axis=1)[:, :k]
    idx = np.take_along_axis(np.where(bad, _NONE, cand), order, axis=1)
    sims = np.take_along_axis(cand_sims, order, axis=1).astype(np.float32)
    if idx.shape[1] < k:
        pad = k - idx.shape[1]
        idx = np.hstack([idx, np.full((len(rows), pad), _NONE, np.int64)])
        sims = np.hstack([sims, np.full((len(rows), pad), -np.inf, np.float32)])
    return idx, sims


def _top_k_block(block: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    m = block.shape[1]
    width = min(k, m)
    spare = min(m, width + 8)
    if spare < m:
        part = np.argpartition(-block, spare - 1, axis=1)[:, :spare]
    else:
        part = np.broadcast_to(np.arange(m), block.shape).copy()
    vals = np.take_along_axis(block, part, axis=1)
    order = np.lexsort((part, -vals), axis=1)[:, :width]
    idx = np.take_along_axis(part, order, axis=1)
    sims = np.take_along_axis(vals, order, axis=1).astype(np.float32)
    idx = np.where(np.isfinite(sims), idx, _NONE)
    out_i = np.full((block.shape[0], k), _NONE, dtype=np.int64)
    out_s = np.full((block.shape[0], k), -np.inf, dtype=np.float32)
    out_i[:, :width], out_s[:, :width] = idx, sims
    return out_i, out_s


def _merge(
    idx_a: np.ndarray, sim_a: np.ndarray, idx_b: np.ndarray, sim_b: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise top-k of two candidate lists (ties to the lower index)."""
    idx = np.concatenate([idx_a, idx_b], axis=1)
    sims = np.concatenate([sim_a, sim_b], axis=1)
    big = np.iinfo(np.int64).max
    order = np.lexsort((np.where(idx < 0, big, idx), -sims), axis=1)[:, :k]
    return np.take_along_axis(idx, order, axis=1), np.take_along_axis(sims, order, axis=1)


@dataclass(frozen=True)
class QueryLayer:
    """Immutable query-node layer with its kNN lists (see the module docs).

    Attributes:
        pairs: One :class:`QueryPair` per node, in row order.
        matrix: ``(n, d)`` unit embeddings of the node texts.
        chunk_codes: ``(n,)`` index into ``chunks`` of each node's chunk (``E_inter``).
        chunks: Distinct chunk ids, in first-seen order.
        knn: ``(n, k)`` neighbour rows (``E_intra``), ``-1`` where missing; ``knn_sim``
            their cosines.
        chunk_matrix: ``(len(chunks), d)`` unit embeddings of the chunks themselves
            (``chunk_weight``, ``fill``).
        chunk_windows: The windows of chunks longer than the embedder's window, owned
            by chunk code (``long_chunks="best-window"``; ``None``: no long chunk).
    """

    pairs: tuple[QueryPair, ...]
    matrix: np.ndarray
    chunk_codes: np.ndarray
    chunks: tuple[str, ...]
    knn: np.ndarray
    knn_sim: np.ndarray
    k: int
    exclude_same_chunk: bool = False
    chunk_matrix: np.ndarray | None = None
    chunk_windows: ChunkWindows | None = None

    @classmethod
    def empty(cls, k: int, dim: int = 0, exclude_same_chunk: bool = False) -> QueryLayer:
        return cls(
            (),
            np.zeros((0, dim), np.float32),
            np.zeros(0, np.int64),
            (),
            np.zeros((0, k), np.int64),
            np.zeros((0, k), np.float32),
            k,
            exclude_same_chunk,
            np.zeros((0, dim), np.float32),
        )

    @classmethod
    def build(
        cls,
        pairs: Sequence[QueryPair],
        matrix: np.ndarray,
        k: int,
        exclude_same_chunk: bool = False,
        chunk_vectors: dict[str, np.ndarray] | None = None,
        chunk_windows: dict[str, np.ndarray] | None = None,
    ) -> QueryLayer:
        layer = cls.empty(k, matrix.shape[1] if matrix.ndim == 2 else 0, exclude_same_chunk)
        return layer.added(pairs, matrix, chunk_vectors, chunk_windows)

    def __len__(self) -> int:
        return len(self.pairs)

    @property
    def ids(self) -> list[str]:
        """Query node ids in row order."""
        return [p.node_id for p in self.pairs]

    def _codes_for(self, pairs: Sequence[QueryPair]) -> tuple[np.ndarray, tuple[str, ...]]:
        chunks = list(self.chunks)
        where = {c: i for i, c in enumerate(chunks)}
        codes = np.empty(len(pairs), dtype=np.int64)
        for i, pair in enumerate(pairs):
            code = where.get(pair.chunk_id)
            if code is None:
                code = where[pair.chunk_id] = len(chunks)
                chunks.append(pair.chunk_id)
            codes[i] = code
        return codes, tuple(chunks)

    def added(
        self,
        pairs: Sequence[QueryPair],
        vectors: np.ndarray,
        chunk_vectors: dict[str, np.ndarray] | None = None,
        chunk_windows: dict[str, np.ndarray] | None = None,
    ) -> QueryLayer:
        """A new layer with ``pairs`` appended.

        Old nodes' lists are merged with the new candidates (only ``old x new``
        similarities are computed). ``chunk_vectors`` maps new chunk ids to their
        embeddings (zeros when absent), ``chunk_windows`` long ones to their windows.
        """
        if not len(pairs):
            return self
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(pairs) != vectors.shape[0]:
            raise ValueError(f"{len(pairs)} query nodes for {vectors.shape[0]} vectors")
        if len(self) and vectors.shape[1] != self.matrix.shape[1]:
            raise ValueError(
                f"embedding dimension {vectors.shape[1]} != the index's {self.matrix.shape[1]}"
            )
        n_old = len(self)
        new_codes, chunks = self._codes_for(pairs)
        codes = np.concatenate([self.chunk_codes, new_codes])
        matrix = np.vstack([self.matrix.reshape(n_old, -1), vectors]) if n_old else vectors
        mask_codes = codes if self.exclude_same_chunk else None
        new_rows = np.arange(n_old, n_old + len(pairs))
        new_idx, new_sim = knn_rows(matrix, new_rows, self.k, mask_codes)
        knn, knn_sim = self.knn, self.knn_sim
        if n_old:
            block = matrix[:n_old] @ vectors.T
            if mask_codes is not None:
                block[codes[:n_old][:, None] == new_codes[None, :]] = -np.inf
            cand_i, cand_s = _top_k_block(block, self.k)
            cand_i = np.where(cand_i >= 0, cand_i + n_old, _NONE)
            knn, knn_sim = _merge(knn, knn_sim, cand_i, cand_s, self.k)
        dim = matrix.shape[1]
        fresh = chunks[len(self.chunks) :]
        vecs = chunk_vectors or {}
        new_chunk_rows = np.zeros((len(fresh), dim), np.float32)
        for i, chunk_id in enumerate(fresh):
            if chunk_id in vecs:
                new_chunk_rows[i] = vecs[chunk_id]
        old_chunk_rows = self.chunk_matrix
        if old_chunk_rows is None or old_chunk_rows.shape[0] != len(self.chunks):
            old_chunk_rows = np.zeros((len(self.chunks), dim), np.float32)
        return QueryLayer(
            (*self.pairs, *pairs),
            matrix,
            codes,
            chunks,
            np.vstack([knn, new_idx]),
            np.vstack([knn_sim, new_sim]),
            self.k,
            self.exclude_same_chunk,
            np.vstack([old_chunk_rows.reshape(len(self.chunks), dim), new_chunk_rows]),
            _with_windows(self.chunk_windows, fresh, len(self.chunks), chunk_windows or {}),
        )

    def without_chunks(self, chunk_ids: Sequence[str]) -> QueryLayer:
        """A new layer without the query nodes of ``chunk_ids``.

        Only rows that lost a neighbour are recomputed; the result equals a rebuild.
        """
        drop_chunks = {self.chunks.index(c) for c in chunk_ids if c in self.chunks}
        if not drop_chunks:
            return self
        keep_mask = ~np.isin(self.chunk_codes, list(drop_chunks))
        keep = np.flatnonzero(keep_mask)
        remap = np.full(len(self) + 1, _NONE, dtype=np.int64)  # last slot maps -1
        remap[keep] = np.arange(len(keep))
        knn = remap[self.knn[keep]]
        knn_sim = self.knn_sim[keep]
        lost = (knn == _NONE) & (self.knn[keep] != _NONE)
        pairs = tuple(self.pairs[i] for i in keep)
        chunks = tuple(dict.fromkeys(p.chunk_id for p in pairs))
        where = {c: i for i, c in enumerate(chunks)}
        codes = np.fromiter((where[p.chunk_id] for p in pairs), np.int64, len(pairs))
        matrix = self.matrix[keep]
        redo = np.flatnonzero(lost.any(axis=1))
        if len(redo):
            idx, sims = knn_rows(matrix, redo, self.k, codes if self.exclude_same_chunk else None)
            knn[redo], knn_sim[redo] = idx, sims
        chunk_matrix = None
        old_pos = {c: i for i, c in enumerate(self.chunks)}
        if self.chunk_matrix is not None and len(self.chunk_matrix) == len(self.chunks):
            chunk_matrix = self.chunk_matrix[[old_pos[c] for c in chunks]]
        windows = self.chunk_windows
        if windows is not None:  # old chunk code -> new (-1: dropped)
            code = np.full(len(self.chunks), _NONE, dtype=np.int64)
            code[[old_pos[c] for c in chunks]] = np.arange(len(chunks))
            owner = code[windows.owner]
            kept = owner >= 0
            windows = ChunkWindows(windows.matrix[kept], owner[kept]) if kept.any() else None
        return QueryLayer(
            pairs,
            matrix,
            codes,
            chunks,
            knn,
            knn_sim,
            self.k,
            self.exclude_same_chunk,
            chunk_matrix,
            windows,
        )

    def neighbor_ids(self, row: int) -> list[str]:
        """Ids of a node's kNN neighbours, best first."""
        return [self.pairs[j].node_id for j in self.knn[row] if j >= 0]


def _with_windows(
    windows: ChunkWindows | None,
    fresh: Sequence[str],
    first_code: int,
    new: dict[str, np.ndarray],
) -> ChunkWindows | None:
    """``windows`` with those of the ``fresh`` chunks (codes from ``first_code``) appended."""
    parts = [(first_code + i, new[c]) for i, c in enumerate(fresh) if len(new.get(c, ())) > 1]
    if not parts:
        return windows
    matrix = np.vstack([w for _, w in parts]).astype(np.float32)
    owner = np.concatenate([np.full(len(w), code, np.int64) for code, w in parts])
    if windows is not None:
        matrix, owner = np.vstack([windows.matrix, matrix]), np.concatenate([windows.owner, owner])
    return ChunkWindows(matrix, owner)


def window_arrays(windows: ChunkWindows | None, dim: int) -> dict[str, np.ndarray]:
    """The layer's long-chunk windows as the arrays the layer file keeps (empty: none)."""
    if windows is None:
        return {
            "window_matrix": np.zeros((0, dim), np.float32),
            "window_owner": np.zeros(0, np.int64),
        }
    return {"window_matrix": windows.matrix, "window_owner": windows.owner}


def windows_from_arrays(arrays: Mapping[str, np.ndarray]) -> ChunkWindows | None:
    """The windows :func:`window_arrays` wrote (None: none, or a file without them)."""
    if "window_owner" not in arrays or not len(arrays["window_owner"]):
        return None
    owner = arrays["window_owner"].astype(np.int64)
    return ChunkWindows(arrays["window_matrix"].astype(np.float32), owner)
