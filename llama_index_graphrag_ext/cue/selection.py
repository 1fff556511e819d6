"""Chunk-Selection (CUE-RAG Algorithm 2): chunk values, token weights, 0-1 knapsack.

Chunk ``t_i`` has a weight ``w_i`` (its token count) and a value ``v_i`` (how much the
rest of the corpus resembles it: BLEU, cosine or random, §4.3); the LLM gets the set
maximising ``sum v_i`` subject to ``sum w_i <= ceil(alpha * sum w)`` (Alg. 2, lines 8-9).

The solver (the paper cites Sahni 1975) is a numpy dynamic programme over capacities.
Weights are rounded **up** to a granularity ``g`` that keeps the table under
``max_cells``: the answer is always feasible; with ``g = 1`` it is the optimum, else at
least the optimum under a budget reduced by ``g - 1`` tokens per chosen chunk; the
leftover capacity is then filled greedily by value per token.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..core.text import CorpusNgramIndex, tokenize

logger = logging.getLogger(__name__)

SELECTION_STRATEGIES = ("bleu", "cos", "random")


@dataclass
class KnapsackResult:
    """The chosen items of a 0-1 knapsack.

    Attributes:
        chosen: Indices of the chosen items, ascending.
        value: Their total value.
        weight: Their total (real) weight; never above ``capacity``.
        capacity: The budget.
        granularity: The weight rounding step the DP used (1 = exact).
        greedy_added: Items added by the greedy fill after the DP.
    """

    chosen: list[int] = field(default_factory=list)
    value: float = 0.0
    weight: int = 0
    capacity: int = 0
    granularity: int = 1
    greedy_added: int = 0

    @property
    def exact(self) -> bool:
        """True when the DP ran on the raw weights (the optimum is guaranteed)."""
        return self.granularity == 1


def knapsack(
    weights: Sequence[int],
    values: Sequence[float],
    capacity: int,
    *,
    max_cells: int = 50_000_000,
) -> KnapsackResult:
    """Solve a 0-1 knapsack by (weight-rounded) dynamic programming.

    Args:
        values: Item values (negative values are never worth taking).
        max_cells: Largest ``items x capacity`` table to build; above it the weights
            are rounded up (see the module docs for the guarantee).

    Raises:
        ValueError: Mismatched lengths, negative weights or capacity, or
            ``max_cells`` below 1.
    """
    w = np.asarray(weights, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    if w.shape != v.shape or w.ndim != 1:
        raise ValueError(f"{w.size} weights for {v.size} values")
    if capacity < 0 or (w < 0).any():
        raise ValueError("weights and capacity must be non-negative")
    if max_cells < 1:
        raise ValueError("max_cells must be >= 1")
    capacity = int(capacity)
    result = KnapsackResult(capacity=capacity)
    if w.size == 0:
        return result
    # Free items with positive value are always taken; worthless items never.
    useful = np.flatnonzero((v > 0) & (w <= capacity))
    free = useful[w[useful] == 0]
    items = useful[w[useful] > 0]
    n = items.size
    gran = 1
    if n:
        gran = max(1, math.ceil((n * (capacity + 1)) / max_cells))
    cap = capacity // gran
    rw = -(-w[items] // gran)  # weights rounded up
    chosen: list[int] = [int(i) for i in free]
    if n and cap > 0:
        dp = np.zeros(cap + 1, dtype=np.float64)
        take_bits = []
        for j in range(n):
            wj, vj = int(rw[j]), float(v[items[j]])
            if wj > cap:
                take_bits.append(None)
                continue
            cand = dp[: cap + 1 - wj] + vj
            better = cand > dp[wj:]
            row = np.zeros(cap + 1, dtype=bool)
            row[wj:] = better
            dp[wj:] = np.where(better, cand, dp[wj:])
            take_bits.append(np.packbits(row))
        c = int(np.argmax(dp))  # smallest capacity reaching the best value
        for j in range(n - 1, -1, -1):
            bits = take_bits[j]
            if bits is not None and np.unpackbits(bits, count=cap + 1)[c]:
                chosen.append(int(items[j]))
                c -= int(rw[j])
    used = int(w[chosen].sum()) if chosen else 0
    # Greedy fill of what rounding left over.
    taken = set(chosen)
    rest = [int(i) for i in items if int(i) not in taken]
    rest.sort(key=lambda i: (-v[i] / w[i], i))
    for i in rest:
        if used + int(w[i]) <= capacity:
            chosen.append(i)
            used += int(w[i])
            result.greedy_added += 1
    result.chosen = sorted(chosen)
    result.value = float(v[result.chosen].sum()) if chosen else 0.0
    result.weight = used
    result.granularity = gran
    return result


def bleu_values(texts: Sequence[str], max_n: int = 4) -> np.ndarray:
    """Leave-one-out BLEU (BLEU+1 smoothing, up to ``max_n``-grams) of every text against
    all the others (Alg. 2, line 6), one value in ``[0, 1]`` each.

    One pass over the corpus's n-grams
    (:class:`~llama_index_graphrag_ext.core.text.CorpusNgramIndex`), not ``n^2`` pairs.
    """
    if len(texts) == 0:
        return np.zeros(0)
    index = CorpusNgramIndex([tokenize(t, stopwords=False) for t in texts], max_n=max_n)
    return index.bleu_all()


def cosine_values(matrix: np.ndarray) -> np.ndarray:
    """Mean cosine similarity of each row to every other row (the COS strategy, §4.3).

    With unit rows, ``sum_j e_i . e_j = e_i . sum_j e_j``: one matrix-vector product.
    Zeros when ``n < 2``.
    """
    n = matrix.shape[0]
    if n < 2:
        return np.zeros(n)
    m = np.asarray(matrix, dtype=np.float64)
    self_sim = np.einsum("ij,ij->i", m, m)
    return (m @ m.sum(axis=0) - self_sim) / (n - 1)


def random_values(n: int, seed: int = 0) -> np.ndarray:
    """Uniform random values (the RANDOM strategy, §4.3), reproducible by ``seed``."""
    return np.random.default_rng(seed).random(n)


def token_budget(weights: Sequence[int], alpha: float) -> int:
    """``W_max = ceil(alpha * W_total)`` (Alg. 2, line 8)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    total = int(sum(int(x) for x in weights))
    return math.ceil(alpha * total - 1e-9) if alpha < 1.0 else total
