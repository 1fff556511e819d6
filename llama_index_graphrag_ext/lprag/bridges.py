"""Title-mention bridges: an LLM-free source of multi-hop links (our addition, off by default).

Multi-hop questions usually cross from one passage to another *through an
entity the first one names*. When chunks carry a ``title``, such crossings are
visible without a model: chunk ``a`` mentions the title of chunk ``b``
(:func:`title_mentions`); with ``bridge_links="entities"`` (or ``"both"``), two
chunks that name the same *rare* named entity are linked too (:func:`entity_links`).
With ``bridges=True`` each link is used twice:

* **graph**: a chunk-chunk edge ``a - b`` (weight: the pair's cosine, as in
  Eq. 5) beside the mutual-kNN edges;
* **supervision**: a *bridge pseudo-query* (a window of the sentence with the
  mention) linked to both chunks.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Sequence

import numpy as np

_WORD = re.compile(r"\w+")


def _norm_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def title_mentions(
    titles: Sequence[str | None],
    texts: Sequence[str],
    *,
    min_chars: int = 4,
    max_title_words: int = 8,
    max_mentions: int = 20,
) -> list[tuple[int, int]]:
    """Sorted, distinct pairs ``(a, b)``: chunk ``a``'s text mentions chunk ``b``'s title.

    Matching is on whole lower-cased words. Chunks sharing a title (one page cut
    into several chunks) never link to each other through it.

    Args:
        titles: Title of each chunk (``None`` or empty: the chunk has none).
        min_chars: Shortest title considered (short ones match by accident).
        max_mentions: Titles mentioned by more chunks than this are hubs
            ("United States"), not bridges, and are skipped.
    """
    if len(titles) != len(texts):
        raise ValueError("titles and texts must have the same length")
    by_title: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, title in enumerate(titles):
        if title and len(title.strip()) >= min_chars:
            words = tuple(_norm_words(title))
            if 0 < len(words) <= max_title_words:
                by_title[words].append(i)
    if not by_title:
        return []
    longest = max(len(w) for w in by_title)
    mentioned_by: dict[tuple[str, ...], set[int]] = defaultdict(set)
    for a, text in enumerate(texts):
        words = _norm_words(text)
        for n in range(1, longest + 1):
            for start in range(len(words) - n + 1):
                gram = tuple(words[start : start + n])
                if gram in by_title:
                    mentioned_by[gram].add(a)
    pairs = set()
    for gram, sources in mentioned_by.items():
        if len(sources) > max_mentions:
            continue
        targets = by_title[gram]
        for a in sources:
            own = titles[a]
            for b in targets:
                if b != a and titles[b] != own:
                    pairs.add((a, b))
    return sorted(pairs)


def entity_links(
    entity_keys: Sequence[Collection[str]], *, max_chunks: int = 5, min_chars: int = 3
) -> list[tuple[int, int, str]]:
    """Triples ``(a, b, key)``: chunks ``a`` and ``b`` both name the rare entity ``key``.

    Both directions are returned. When two chunks share several rare entities,
    the rarest names the pair (ties: the alphabetically first).

    Args:
        entity_keys: The normalised entity keys (`normalize_entity`) each chunk names.
        max_chunks: Entities named by more chunks than this are hubs, not bridges.
    """
    if max_chunks < 2:
        raise ValueError("max_chunks must be >= 2 (a link needs two chunks)")
    by_key: dict[str, list[int]] = defaultdict(list)
    for i, keys in enumerate(entity_keys):
        for key in set(keys):
            if len(key) >= min_chars:
                by_key[key].append(i)
    best: dict[tuple[int, int], tuple[int, str]] = {}
    for key, chunks in by_key.items():
        if not 2 <= len(chunks) <= max_chunks:
            continue
        for a in chunks:
            for b in chunks:
                if a != b and (len(chunks), key) < best.get((a, b), (max_chunks + 1, "")):
                    best[(a, b)] = (len(chunks), key)
    return sorted((a, b, key) for (a, b), (_, key) in best.items())


def bridge_edges(
    pairs: Sequence[tuple[int, int] | tuple[int, int, str]], matrix: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Undirected edges ``i < j`` for mention pairs (a name, if any, is ignored),
    weighted by cosine (Eq. 5)."""
    if not pairs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    arr = np.asarray([(p[0], p[1]) for p in pairs], np.int64)
    lo, hi = np.minimum(arr[:, 0], arr[:, 1]), np.maximum(arr[:, 0], arr[:, 1])
    codes = np.unique(lo * len(matrix) + hi)
    rows, cols = codes // len(matrix), codes % len(matrix)
    weights = np.einsum("ij,ij->i", matrix[rows], matrix[cols]).astype(np.float32)
    return rows, cols, weights


def union_edges(
    first: tuple[np.ndarray, np.ndarray, np.ndarray],
    second: tuple[np.ndarray, np.ndarray, np.ndarray],
    n: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of two ``i < j`` edge lists; an edge in both keeps its first weight."""
    rows = np.concatenate([first[0], second[0]]).astype(np.int64)
    cols = np.concatenate([first[1], second[1]]).astype(np.int64)
    weights = np.concatenate([first[2], second[2]]).astype(np.float32)
    _, keep = np.unique(rows * n + cols, return_index=True)
    return rows[keep], cols[keep], weights[keep]


def bridge_queries(
    pairs: Sequence[tuple[int, int] | tuple[int, int, str]],
    titles: Sequence[str | None],
    sentences: Sequence[Sequence[str]],
    targets: Sequence[int],
    rng: np.random.Generator,
    *,
    max_words: int = 20,
    mask: bool = False,
    per_source: int = 1,
) -> list[tuple[str, list[int]]]:
    """Bridge (cross-passage) pseudo-queries of the target chunks that mention another chunk.

    The query is the sentence of ``a`` that names ``b``'s title (or the entity the
    pair shares), cut to ``max_words`` words around the mention; it is linked to
    ``a`` and ``b``.

    Args:
        pairs: Mention pairs ``(a, b)`` from :func:`title_mentions` (the name is
            ``titles[b]``), or ``(a, b, name)`` from :func:`entity_links`.
        targets: The chunks ``a`` to write queries for.
        mask: Drop the mentioned name from the window, so the query reads like
            the first hop of a multi-hop question and the link to ``b`` is a hint
            the text encoder cannot see.
        per_source: Most mentioned chunks ``b`` per source chunk ``a`` (one query each).
    """
    if per_source <= 0:
        raise ValueError("per_source must be > 0")
    by_source: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for pair in pairs:
        a, b = int(pair[0]), int(pair[1])
        by_source[a].append((b, pair[2] if len(pair) > 2 else titles[b] or ""))
    out = []
    for a in targets:
        options = by_source.get(int(a))
        if not options:
            continue
        if len(options) > per_source:
            options = [
                options[i] for i in sorted(rng.choice(len(options), per_source, replace=False))
            ]
        for b, name in options:
            query = _mention_window(sentences[a], _norm_words(name), max_words, mask)
            if query:
                out.append((query, [int(a), int(b)]))
    return out


def _mention_window(
    sentences: Sequence[str], title_words: list[str], max_words: int, mask: bool
) -> str | None:
    """The window around the first sentence naming ``title_words`` (masked: without them)."""
    for sentence in sentences:
        words = sentence.split()
        lowered = [" ".join(_norm_words(w)) for w in words]
        hit = _find(lowered, title_words)
        if hit is None:
            continue
        if mask:
            end = _span_end(lowered, hit, len(title_words))
            words = words[:hit] + words[end:]
            if not words:
                return None
        start = max(0, min(hit - max_words // 2, len(words) - max_words))
        return " ".join(words[start : start + max_words])
    return None


def _span_end(lowered: list[str], hit: int, n_words: int) -> int:
    """Index after the word tokens holding the ``n_words`` title words starting at ``hit``."""
    seen, end = 0, hit
    while end < len(lowered) and seen < n_words:
        seen += len(lowered[end].split())
        end += 1
    return end


def _find(lowered: list[str], title_words: list[str]) -> int | None:
    """Index of the first word where ``title_words`` starts (word tokens may hold several)."""
    flat: list[tuple[str, int]] = [(w, i) for i, tok in enumerate(lowered) for w in tok.split()]
    n = len(title_words)
    for s in range(len(flat) - n + 1):
        if [w for w, _ in flat[s : s + n]] == title_words:
            return flat[s][1]
    return None
