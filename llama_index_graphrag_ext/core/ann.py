"""Approximate k-nearest-neighbour lists for large tables (faiss IVF, inner product).

Exact kNN graphs are quadratic in the corpus (``docs/scaling.md``). Past
:data:`APPROX_FROM_PAIRS` candidate pairs, k-means on a seeded sample puts the
candidates into about ``2 sqrt(m)`` cells and each query is scored exactly against
its ``nprobe`` nearest cells only. The lists are deterministic; a neighbour in an
unprobed cell is missed (:func:`knn_recall` measures it).
"""

from __future__ import annotations

import logging
import math

import numpy as np

logger = logging.getLogger(__name__)

#: Tables with at least this many (query, candidate) pairs use the approximate search.
APPROX_FROM_PAIRS = 2_500_000_000  # e.g. 50k x 50k rows
#: Cells probed per query.
DEFAULT_NPROBE = 24


def _faiss():
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - faiss-cpu is a dependency
        raise ImportError(
            "approximate kNN needs faiss: pip install faiss-cpu "
            "(or pass approximate=False for the exact, quadratic search)"
        ) from exc
    return faiss


def use_approximate(n_queries: int, n_candidates: int, approximate: bool | None) -> bool:
    """Whether a kNN search of this size runs approximately (``None``: by size)."""
    if approximate is not None:
        return bool(approximate)
    return n_queries * n_candidates >= APPROX_FROM_PAIRS


def ivf_knn(
    queries: np.ndarray,
    candidates: np.ndarray,
    k: int,
    *,
    exclude_self: bool = False,
    nprobe: int = DEFAULT_NPROBE,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Approximate top-``k`` candidates by inner product for every query row.

    Args:
        exclude_self: ``queries`` and ``candidates`` are the same table; drop
            each row's own index from its list.
        nprobe: Cells searched per query (more: slower and closer to exact).

    Returns:
        ``(indices, scores)`` of shape ``(n, k)``, best first; ``-1`` / ``-inf``
        where fewer than ``k`` candidates were found in the probed cells.
    """
    faiss = _faiss()
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    candidates = np.ascontiguousarray(candidates, dtype=np.float32)
    n, m = queries.shape[0], candidates.shape[0]
    d = candidates.shape[1]
    idx_out = np.full((n, k), -1, dtype=np.int64)
    sim_out = np.full((n, k), -np.inf, dtype=np.float32)
    if n == 0 or m == 0 or k <= 0:
        return idx_out, sim_out
    nlist = int(min(max(16, 2 * math.sqrt(m)), max(1, m // 39)))
    quantizer = faiss.IndexFlatIP(d)
    index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = seed
    index.cp.niter = 8
    # k-means only places the cells, so a small seeded sample does (40 per cell).
    sample_size = min(m, 40 * nlist)
    rng = np.random.default_rng(seed)
    sample = candidates[np.sort(rng.choice(m, size=sample_size, replace=False))]
    index.train(sample)
    index.add(candidates)
    index.nprobe = min(nprobe, nlist)
    want = k + 1 if exclude_self else k
    want = min(want, m)
    sims, idx = index.search(queries, want)
    if exclude_self:
        own = idx == np.arange(n)[:, None]
        sims = np.where(own, -np.inf, sims)
        idx = np.where(own, -1, idx)
        order = np.argsort(-sims, axis=1, kind="stable")
        sims = np.take_along_axis(sims, order, axis=1)
        idx = np.take_along_axis(idx, order, axis=1)
    take = min(k, idx.shape[1])
    idx_out[:, :take] = idx[:, :take]
    sim_out[:, :take] = sims[:, :take]
    sim_out[idx_out < 0] = -np.inf
    logger.info(
        "approximate kNN: %d queries x %d candidates, k=%d, %d cells, nprobe %d",
        n,
        m,
        k,
        nlist,
        index.nprobe,
    )
    return idx_out, sim_out


def knn_recall(approx: np.ndarray, exact: np.ndarray) -> float:
    """Share of the exact lists' neighbours that the approximate lists hold (``-1`` ignored)."""
    hits = total = 0
    for a, e in zip(approx, exact, strict=True):
        want = {int(x) for x in e if x >= 0}
        total += len(want)
        hits += len(want.intersection(int(x) for x in a if x >= 0))
    return hits / total if total else 1.0
