"""Batched embedding into normalised float32 matrices, exact top-k and kNN graphs.

Every method keeps its vectors as one ``(n, d)`` float32 matrix with unit rows,
so cosine similarity is a matrix product and nothing is quadratic in Python.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from tqdm.auto import tqdm

logger = logging.getLogger(__name__)


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """Return ``matrix`` as float32 with unit-length rows (zero rows stay zero)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def embed_texts(
    embed_model: BaseEmbedding,
    texts: Sequence[str],
    *,
    batch_size: int | None = None,
    show_progress: bool = False,
    desc: str = "Embedding",
) -> np.ndarray:
    """Embed ``texts`` in batches and return a normalised ``(n, d)`` float32 matrix.

    Texts are embedded longest first so each batch pads little, then put back in
    order; blank texts are embedded as a single space.
    """
    n = len(texts)
    if n == 0:
        return np.zeros((0, _dimension(embed_model)), dtype=np.float32)
    out: np.ndarray | None = None
    # Counted in characters, not texts: the longest texts go first, so a bar counting texts
    # sees its slowest batch first and promised hours for a build of minutes.
    total = sum(len(t) for t in texts) or n
    bar = tqdm(
        total=total,
        desc=f"{desc} {n:,} texts",
        unit="char",
        unit_scale=True,
        disable=not show_progress,
        leave=False,
    )
    try:
        for idx, chunk in _length_sorted_batches(embed_model, texts, batch_size):
            vectors = np.asarray(embed_model.get_text_embedding_batch(chunk), dtype=np.float32)
            out = _place(out, n, idx, vectors)
            bar.update(sum(len(texts[i]) for i in idx) if total != n else len(idx))
    finally:
        bar.close()
    return normalize_rows(out)


def _length_sorted_batches(
    embed_model: BaseEmbedding, texts: Sequence[str], batch_size: int | None
):
    """Yield ``(row indices, texts)`` batches, longest texts first; blanks become a space."""
    batch = max(1, int(batch_size or getattr(embed_model, "embed_batch_size", 32) or 32))
    order = np.argsort([-len(t) for t in texts], kind="stable")
    for start in range(0, len(texts), batch):
        idx = order[start : start + batch]
        yield idx, [texts[i] if texts[i].strip() else " " for i in idx]


def _place(out: np.ndarray | None, n: int, idx: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    if out is None:
        out = np.empty((n, vectors.shape[1]), dtype=np.float32)
    out[idx] = vectors
    return out


async def aembed_texts(
    embed_model: BaseEmbedding, texts: Sequence[str], *, batch_size: int | None = None
) -> np.ndarray:
    """Async twin of :func:`embed_texts` (no progress bar)."""
    n = len(texts)
    if n == 0:
        return np.zeros((0, _dimension(embed_model)), dtype=np.float32)
    out: np.ndarray | None = None
    for idx, chunk in _length_sorted_batches(embed_model, texts, batch_size):
        vectors = np.asarray(await embed_model.aget_text_embedding_batch(chunk), np.float32)
        out = _place(out, n, idx, vectors)
    return normalize_rows(out)


def embed_query(embed_model: BaseEmbedding, query: str) -> np.ndarray:
    """Embed one query and return a unit float32 vector."""
    return normalize_rows(np.asarray(embed_model.get_query_embedding(query or " ")))[0]


async def aembed_query(embed_model: BaseEmbedding, query: str) -> np.ndarray:
    """Async twin of :func:`embed_query`."""
    vector = await embed_model.aget_query_embedding(query or " ")
    return normalize_rows(np.asarray(vector))[0]


def _dimension(embed_model: BaseEmbedding) -> int:
    return len(embed_model.get_text_embedding("dimension probe"))


def top_k(
    matrix: np.ndarray, query: np.ndarray, k: int, *, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` rows of ``matrix`` by dot product with ``query``.

    Returns ``(indices, scores)``, best first, ties by lower index; rows where the
    boolean ``mask`` is False are skipped.
    """
    n = matrix.shape[0]
    if n == 0 or k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    scores = matrix @ np.asarray(query, dtype=np.float32)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
        k = min(k, int(mask.sum()))
        if k == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    return top_k_of_scores(scores, k)


def top_k_of_scores(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and values of the ``k`` largest scores, best first, ties by lower index."""
    n = scores.shape[0]
    k = min(int(k), n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=scores.dtype)
    if k < n:
        part = np.argpartition(-scores, k - 1)[:k]
        # Widen to all ties of the k-th value so the lower-index rule holds exactly.
        kth = scores[part].min()
        part = np.union1d(part, np.flatnonzero(scores == kth))
    else:
        part = np.arange(n)
    order = np.lexsort((part, -scores[part]))[:k]
    chosen = part[order]
    return chosen.astype(np.int64), scores[chosen]


def knn_graph(
    matrix: np.ndarray,
    k: int,
    *,
    block_size: int = 2048,
    exclude_self: bool = True,
    others: np.ndarray | None = None,
    show_progress: bool = False,
    approximate: bool | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """k-nearest-neighbour lists by cosine: exact in row blocks, or approximate when large.

    The exact search multiplies a block of rows against all candidates at once,
    so memory stays at ``block_size * m`` floats.

    Args:
        matrix: ``(n, d)`` unit rows (the queries).
        k: Neighbours per row; capped at the number of candidates.
        exclude_self: Drop each row's own index (only when ``others`` is None).
        others: Optional ``(m, d)`` candidate rows; defaults to ``matrix`` itself.
        approximate: ``None``: exact below :data:`~.ann.APPROX_FROM_PAIRS`
            query-candidate pairs, :func:`~.ann.ivf_knn` above; a bool forces one.

    Returns:
        ``(indices, scores)`` of shape ``(n, k')``, best first, ties by lower index.
    """
    cand = matrix if others is None else others
    n, m = matrix.shape[0], cand.shape[0]
    same = others is None and exclude_self
    kk = max(0, min(k, m - (1 if same else 0)))
    idx_out = np.zeros((n, kk), dtype=np.int64)
    sim_out = np.zeros((n, kk), dtype=np.float32)
    if n == 0 or kk == 0:
        return idx_out, sim_out
    from .ann import ivf_knn, use_approximate

    if use_approximate(n, m, approximate):
        idx_out, sim_out = ivf_knn(matrix, cand, kk, exclude_self=same)
        short = np.flatnonzero((idx_out < 0).any(axis=1))
        if len(short):  # rare: the probed cells held fewer than k rows; fill exactly
            sims = matrix[short] @ cand.T
            if same:
                sims[np.arange(len(short)), short] = -np.inf
            idx_out[short], sim_out[short] = _block_top_k(sims, kk)
        return idx_out, sim_out
    starts = range(0, n, block_size)
    for start in tqdm(starts, desc="kNN graph", disable=not show_progress, leave=False):
        stop = min(n, start + block_size)
        sims = matrix[start:stop] @ cand.T
        if same:
            rows = np.arange(stop - start)
            sims[rows, rows + start] = -np.inf
        idx_out[start:stop], sim_out[start:stop] = _block_top_k(sims, kk)
    return idx_out, sim_out


def _block_top_k(sims: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise top-k of a block, best first, ties broken by the lower column."""
    m = sims.shape[1]
    if k < m:
        # Take a few spare columns so ties at the cut are resolved by index below.
        spare = min(m, k + 8)
        part = np.argpartition(-sims, spare - 1, axis=1)[:, :spare]
    else:
        part = np.broadcast_to(np.arange(m), sims.shape).copy()
    vals = np.take_along_axis(sims, part, axis=1)
    order = np.lexsort((part, -vals), axis=1)[:, :k]
    idx = np.take_along_axis(part, order, axis=1)
    return idx, np.take_along_axis(vals, order, axis=1).astype(np.float32)


def _knn_sparse(indices: np.ndarray, scores: np.ndarray):
    from scipy import sparse

    n, k = indices.shape
    rows = np.repeat(np.arange(n), k)
    cols = indices.reshape(-1)
    keep = rows != cols
    return sparse.csr_matrix(
        (scores.reshape(-1)[keep].astype(np.float32), (rows[keep], cols[keep])), shape=(n, n)
    )


def _upper_edges(mat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from scipy import sparse

    upper = sparse.triu(mat, k=1).tocoo()
    return upper.row.astype(np.int64), upper.col.astype(np.int64), upper.data.astype(np.float32)


def mutual_knn_edges(
    indices: np.ndarray, scores: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, cols, scores)`` of edges ``i < j`` where each lists the other (mutual kNN)."""
    if indices.size == 0:
        return _no_edges()
    mat = _knn_sparse(indices, scores)
    both = mat.multiply(mat.T > 0)  # keeps (i, j) only where (j, i) also exists
    return _upper_edges(both)


def union_knn_edges(
    indices: np.ndarray, scores: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, cols, scores)`` of edges ``i < j`` where either lists the other."""
    if indices.size == 0:
        return _no_edges()
    mat = _knn_sparse(indices, scores)
    return _upper_edges(mat.maximum(mat.T))


def _no_edges() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    empty = np.zeros(0, dtype=np.int64)
    return empty, empty, np.zeros(0, dtype=np.float32)
