"""BLEU, and leave-one-out BLEU of every document of a corpus (CUE-RAG's chunk value)."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

_SMOOTHINGS = ("add1", "none")


def _ngram_counts(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(zip(*(tokens[i:] for i in range(n)), strict=False))


def _closest_length(lengths: Iterable[int], c: int) -> int:
    return min(lengths, key=lambda r: (abs(r - c), r))


def _combine_bleu(
    c: int, r: int, matches: Sequence[int], totals: Sequence[int], smoothing: str
) -> float:
    """Geometric mean of the (smoothed) precisions times the brevity penalty."""
    log_sum = 0.0
    for n, (m, t) in enumerate(zip(matches, totals, strict=True), start=1):
        if smoothing == "add1" and n > 1:
            m, t = m + 1, t + 1
        if m == 0 or t == 0:
            return 0.0
        log_sum += math.log(m / t)
    brevity = 1.0 if c > r else math.exp(1.0 - r / c)
    return brevity * math.exp(log_sum / len(matches))


def _check_bleu_args(max_n: int, smoothing: str) -> None:
    if max_n < 1:
        raise ValueError(f"max_n must be >= 1, got {max_n}")
    if smoothing not in _SMOOTHINGS:
        raise ValueError(f"smoothing must be one of {_SMOOTHINGS}, got {smoothing!r}")


def bleu(
    candidate: Sequence[str],
    references: Sequence[Sequence[str]],
    max_n: int = 4,
    smoothing: str = "add1",
) -> float:
    """Sentence-level BLEU of a token sequence against one or more references.

    ``BLEU = BP * exp(mean_{n=1..max_n} log p_n)`` with clipped n-gram precisions
    ``p_n`` and the brevity penalty against the closest reference length (ties:
    the shorter). ``"add1"`` smoothing is Lin and Och's BLEU+1 (``p_n`` for
    ``n > 1``); ``"none"`` is zero as soon as one order has no match.

    Returns:
        BLEU in ``[0, 1]``; ``0.0`` for an empty candidate or no references.

    Raises:
        ValueError: Bad ``max_n`` or ``smoothing``.
    """
    _check_bleu_args(max_n, smoothing)
    if isinstance(candidate, str) or any(isinstance(r, str) for r in references):
        raise TypeError("candidate and references must be token sequences, not str")
    if not candidate or not references:
        return 0.0
    c = len(candidate)
    matches, totals = [], []
    for n in range(1, max_n + 1):
        cand = _ngram_counts(candidate, n)
        max_ref: Counter[tuple[str, ...]] = Counter()
        for ref in references:
            for gram, count in _ngram_counts(ref, n).items():
                if gram in cand and count > max_ref[gram]:
                    max_ref[gram] = count
        matches.append(sum(min(count, max_ref[g]) for g, count in cand.items()))
        totals.append(max(c - n + 1, 0))
    r = _closest_length((len(ref) for ref in references), c)
    return _combine_bleu(c, r, matches, totals, smoothing)


class CorpusNgramIndex:
    """Leave-one-out BLEU of every document against all the other documents.

    Equals ``bleu(docs[i], docs[:i] + docs[i+1:], max_n, smoothing)`` exactly, without
    the quadratic cost: per n-gram it keeps the two highest per-document counts (and
    the holder of the highest), so the left-out maximum is an O(1) look-up.
    """

    def __init__(
        self,
        corpus_tokens: Sequence[Sequence[str]],
        max_n: int = 4,
        smoothing: str = "add1",
    ) -> None:
        _check_bleu_args(max_n, smoothing)
        self.max_n = max_n
        self.smoothing = smoothing
        self._docs: list[tuple[str, ...]] = [tuple(doc) for doc in corpus_tokens]
        self._sorted_lengths = sorted(len(doc) for doc in self._docs)
        # per order n: n-gram -> [best count, document of best, second-best count]
        self._top2: list[dict[tuple[str, ...], list[int]]] = []
        for n in range(1, max_n + 1):
            stats: dict[tuple[str, ...], list[int]] = {}
            for doc_id, doc in enumerate(self._docs):
                for gram, count in _ngram_counts(doc, n).items():
                    entry = stats.get(gram)
                    if entry is None:
                        stats[gram] = [count, doc_id, 0]
                    elif count > entry[0]:
                        entry[2] = entry[0]
                        entry[0] = count
                        entry[1] = doc_id
                    elif count > entry[2]:
                        entry[2] = count
            self._top2.append(stats)

    def __len__(self) -> int:
        return len(self._docs)

    def _closest_other_length(self, c: int) -> int:
        """Closest reference length to ``c`` with one document of length ``c`` left out."""
        lengths = self._sorted_lengths
        lo = bisect.bisect_left(lengths, c)
        hi = bisect.bisect_right(lengths, c)
        if hi - lo > 1:  # another document has exactly the candidate's length
            return c
        below = lengths[lo - 1] if lo > 0 else None
        above = lengths[hi] if hi < len(lengths) else None
        if below is None:
            return above  # type: ignore[return-value]
        if above is None or c - below <= above - c:
            return below
        return above

    def bleu(self, doc_index: int) -> float:
        """BLEU of document ``doc_index`` against every other document (0.0 when alone)."""
        n_docs = len(self._docs)
        if not -n_docs <= doc_index < n_docs:
            raise IndexError(f"document index {doc_index} out of range for {n_docs} documents")
        doc_index %= n_docs
        candidate = self._docs[doc_index]
        if not candidate or n_docs < 2:
            return 0.0
        c = len(candidate)
        matches, totals = [], []
        for n, stats in enumerate(self._top2, start=1):
            matched = 0
            for gram, count in _ngram_counts(candidate, n).items():
                best, holder, second = stats[gram]
                ref_max = second if holder == doc_index else best
                matched += min(count, ref_max)
            matches.append(matched)
            totals.append(max(c - n + 1, 0))
        r = self._closest_other_length(c)
        return _combine_bleu(c, r, matches, totals, self.smoothing)

    def bleu_all(self) -> np.ndarray:
        """Leave-one-out BLEU of every document (float64)."""
        return np.fromiter((self.bleu(i) for i in range(len(self))), dtype=np.float64)
