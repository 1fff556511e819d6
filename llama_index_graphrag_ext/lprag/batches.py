"""Batches of neighbouring chunks, the unit queries are written for (LP-RAG App. A.2).

Every query written for a batch is linked to *every* chunk of it (§3.2); those
links are what the link predictor learns.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..core.arrays import csr


def neighbor_lists(num_chunks: int, rows: np.ndarray, cols: np.ndarray) -> list[np.ndarray]:
    """Sorted neighbour arrays of every chunk from undirected edges ``(rows, cols)``."""
    src = np.concatenate([rows, cols]).astype(np.int64)
    dst = np.concatenate([cols, rows]).astype(np.int64)
    bounds, dst = csr(src, dst, num_chunks, dtype=np.int64)
    return [dst[bounds[i] : bounds[i + 1]] for i in range(num_chunks)]


def sample_batches(
    neighbors: Sequence[np.ndarray], targets: Sequence[int], rng: np.random.Generator
) -> list[np.ndarray]:
    """One batch per target chunk: the target plus ``k_v ~ U{0..deg}`` neighbours (App. A.2).

    Returns:
        One int array per target, the target first, neighbours in sampled order.
        An isolated chunk gets the batch ``[v]`` (gap G12).
    """
    out = []
    for v in targets:
        nb = neighbors[v]
        k = int(rng.integers(0, len(nb) + 1))
        chosen = rng.choice(nb, size=k, replace=False) if k else np.zeros(0, np.int64)
        out.append(np.concatenate([[v], chosen]).astype(np.int64))
    return out
