"""Extended Doc2Query-- (paper §3.3 step 2): keep the top ``alpha`` of each chunk's pairs.

Pairs are ranked by cosine to the chunk; a chunk longer than the embedder's window is
compared by its best window, so a pair about its end is not judged against its average.
"""

from __future__ import annotations

import math

import numpy as np


def keep_count(m: int, alpha: float) -> int:
    """Pairs kept of ``m``: ``round(alpha * m)``, half-up, at least 1 (digest §8.13)."""
    if m <= 0:
        return 0
    return max(1, min(m, math.floor(alpha * m + 0.5)))


def doc2query_minus(
    pair_vectors: np.ndarray, chunk_vector: np.ndarray, alpha: float
) -> tuple[np.ndarray, np.ndarray]:
    """Extended Doc2Query-- (paper §3.3 step 2): the top ``alpha`` of a chunk's pairs.

    Args:
        pair_vectors: ``(m, d)`` unit rows, the embedded ``query ⊕ answer`` texts.
        chunk_vector: ``(d,)`` unit vector of the chunk, or ``(w, d)`` the unit
            vectors of a long chunk's windows.
        alpha: Fraction kept, in ``(0, 1]``.

    Returns:
        ``(kept, scores)``: indices of the kept pairs in their original order,
        and every pair's cosine to the chunk (its best window).
    """
    if not len(pair_vectors):
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    scores = (pair_vectors @ np.atleast_2d(chunk_vector).T).max(axis=1)
    n_keep = keep_count(len(scores), alpha)
    order = np.argsort(-scores, kind="stable")[:n_keep]
    return np.sort(order), scores.astype(np.float32)
