"""Retrieval and answer metrics (the benchmarks README defines each one)."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def recall_at_k(retrieved: Sequence[str], gold: Iterable[str], k: int) -> float:
    """|gold ∩ top-k| / |gold| (duplicates in ``retrieved`` count once)."""
    gold = set(gold)
    if not gold:
        raise ValueError("recall needs at least one gold id")
    return len(gold.intersection(retrieved[:k])) / len(gold)


def all_at_k(retrieved: Sequence[str], gold: Iterable[str], k: int) -> float:
    """1.0 when the whole gold set is in the top k, else 0.0."""
    gold = set(gold)
    return float(bool(gold) and gold.issubset(retrieved[:k]))


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and articles, collapse spaces (SQuAD convention)."""
    text = text.lower().translate(_PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, answers: Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(a) for a in answers))


def token_f1(prediction: str, answers: Iterable[str]) -> float:
    """Best token-level F1 of the prediction against any gold answer."""
    pred_tokens = normalize_answer(prediction).split()
    best = 0.0
    for answer in answers:
        gold_tokens = normalize_answer(answer).split()
        common = Counter(pred_tokens) & Counter(gold_tokens)
        same = sum(common.values())
        if same == 0:
            continue
        precision, recall = same / len(pred_tokens), same / len(gold_tokens)
        best = max(best, 2 * precision * recall / (precision + recall))
    return best


def accuracy(prediction: str, answers: Iterable[str]) -> float:
    """1.0 if any normalised gold answer is contained in the normalised prediction."""
    pred = normalize_answer(prediction)
    return float(any(normalize_answer(a) and normalize_answer(a) in pred for a in answers))


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation); 0.0 for no values."""
    return float(np.percentile(values, q)) if len(values) else 0.0


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, float | int]:
    """Paired bootstrap interval of ``mean(a - b)`` over the same questions.

    A percentile interval of the resampled mean differences, reproducible by ``seed``;
    ``b`` holds the other method's scores on the same questions, in the same order.

    Returns:
        ``{"mean": observed mean difference, "low": ..., "high": ..., "n": questions}``.
    """
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if diff.ndim != 1 or len(a) != len(b):
        raise ValueError("paired scores must be two sequences of the same length")
    n = len(diff)
    if n == 0:
        raise ValueError("a paired bootstrap needs at least one question")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    # Resampled in blocks so memory stays at block * n indices.
    block = max(1, min(resamples, 1_000_000 // n))
    for start in range(0, resamples, block):
        stop = min(resamples, start + block)
        means[start:stop] = diff[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return {"mean": float(diff.mean()), "low": float(low), "high": float(high), "n": n}
