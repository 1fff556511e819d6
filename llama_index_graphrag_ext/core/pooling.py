"""Embed texts longer than the embedder's window as a weighted mean of overlapping windows.

A sentence-transformers model silently drops what lies past ``max_seq_length``
word pieces. :class:`PooledEmbedding` cuts a longer text, with the embedder's
own tokenizer, into overlapping windows and returns the normalised weighted
mean of their unit vectors; the opening window, where encyclopedic passages
name their subject, weighs ``head_weight`` and the others share the rest
(``docs/benchmarks.md``). Texts within the window get exactly the inner
embedder's vectors; queries are embedded as the inner embedder does.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import ConfigDict, Field, PrivateAttr

logger = logging.getLogger(__name__)

#: Word pieces two neighbouring windows share.
DEFAULT_OVERLAP = 64
#: The opening window's share of a pooled vector.
DEFAULT_HEAD_WEIGHT = 2 / 3
#: Texts whose "longer than the window?" answer is remembered (by a digest of the text).
_MEMO_SIZE = 200_000


@dataclass(frozen=True)
class Window:
    """An embedder's window: the tokenizer, the model's limit and the room left for text."""

    tokenizer: Any
    max_tokens: int  # what the model reads, special tokens included
    text_tokens: int  # word pieces of the text itself that fit


def find_window(embed_model: BaseEmbedding) -> Window | None:
    """The window of a sentence-transformers embedder (``HuggingFaceEmbedding``), or None."""
    if isinstance(embed_model, PooledEmbedding):
        return embed_model.window
    model = getattr(embed_model, "_model", None)
    tokenizer = getattr(model, "tokenizer", None)
    limit = getattr(model, "max_seq_length", None)
    if tokenizer is None or not limit or not getattr(tokenizer, "is_fast", False):
        return None  # offsets need a fast tokenizer
    special = int(tokenizer.num_special_tokens_to_add(pair=False))
    instruction = getattr(embed_model, "text_instruction", None) or ""
    prefix = (
        len(tokenizer(instruction, add_special_tokens=False)["input_ids"]) if instruction else 0
    )
    room = int(limit) - special - prefix
    return Window(tokenizer, int(limit), room) if room > 0 else None


def count_over_window(embed_model: BaseEmbedding, texts: list[str]) -> int | None:
    """How many ``texts`` are longer than ``embed_model``'s window (None: window unknown)."""
    window = find_window(embed_model)
    if window is None:
        return None
    return sum(1 for spans in _piece_spans(window, texts) if len(spans) > window.text_tokens)


def _piece_spans(window: Window, texts: list[str]) -> list[list[tuple[int, int, int | None]]]:
    """Per text, each word piece's ``(start char, end char, word index)``.

    A text of no more characters than the window's room cannot hold more pieces:
    it is not tokenised and gets an empty list.
    """
    out: list[list[tuple[int, int, int | None]]] = [[] for _ in texts]
    todo = [i for i, t in enumerate(texts) if len(t) > window.text_tokens]
    if not todo:
        return out
    enc = window.tokenizer(
        [texts[i] for i in todo],
        add_special_tokens=False,
        return_offsets_mapping=True,
        verbose=False,
    )
    for row, i in enumerate(todo):
        words = enc.word_ids(row)
        out[i] = [(s, e, w) for (s, e), w in zip(enc["offset_mapping"][row], words, strict=True)]
    return out


def window_texts(text: str, spans: list[tuple[int, int, int | None]], size: int, overlap: int):
    """The text's windows of ``size`` word pieces, ``overlap`` shared between neighbours.

    Each is the original text between its first and last piece (so casing and
    spacing are the text's own); see :func:`window_ranges`.
    """
    return [text[a:b] for a, b in window_ranges(text, spans, size, overlap)]


def window_ranges(
    text: str, spans: list[tuple[int, int, int | None]], size: int, overlap: int
) -> list[tuple[int, int]]:
    """The ``(start, end)`` characters of the text's windows (see :func:`window_texts`).

    Windows start every ``size - overlap`` pieces, moved back to the start of
    a word, and the last one ends at the text's last piece.
    """
    n = len(spans)
    if n <= size:
        return [(0, len(text))]
    stride = max(1, size - overlap)
    starts = list(range(0, n - size, stride)) + [n - size]

    def inside_word(i: int) -> bool:
        return 0 < i < n and spans[i][2] is not None and spans[i][2] == spans[i - 1][2]

    windows, previous = [], -1
    for planned in starts:
        start = planned
        while inside_word(start):  # a window never opens inside a word: back to its start,
            start -= 1
        if start <= previous:  # or on to the next word when that is where the last one opened
            start = planned
            while inside_word(start):
                start += 1
            start = planned if start >= n else start
        if start <= previous:
            continue
        previous = start
        stop = min(n, start + size)
        windows.append((spans[start][0], spans[stop - 1][1]))
    return windows


class PooledEmbedding(BaseEmbedding):
    """An embedder that reads texts past its inner embedder's window (see the module docs).

    An embedder whose window cannot be found is used as it is, with a warning
    (or a ``ValueError`` with ``strict=True``).

    Args:
        inner: The embedder doing the work (a ``HuggingFaceEmbedding`` for pooling).
        head_weight: The opening window's share, in ``(0, 1]``; ``None``: a plain mean.
        enabled: ``False`` embeds every text as the inner embedder does.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)
    inner: BaseEmbedding = Field(description="The embedder doing the work.")
    overlap: int = Field(default=DEFAULT_OVERLAP, description="Word pieces shared by windows.")
    head_weight: float | None = Field(
        default=DEFAULT_HEAD_WEIGHT, description="The opening window's share (None: plain mean)."
    )
    enabled: bool = Field(default=True, description="Pool texts longer than the window.")
    _window: Window | None = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)
    _counts: dict = PrivateAttr(default_factory=dict)
    _memo: dict = PrivateAttr(default_factory=dict)

    def __init__(
        self,
        inner: BaseEmbedding,
        overlap: int = DEFAULT_OVERLAP,
        enabled: bool = True,
        strict: bool = False,
        window: Window | None = None,
        head_weight: float | None = DEFAULT_HEAD_WEIGHT,
        **kw: Any,
    ) -> None:
        if head_weight is not None and not 0 < head_weight <= 1:
            raise ValueError("head_weight must be in (0, 1], or None for a plain mean")
        kw.setdefault("embed_batch_size", inner.embed_batch_size)
        kw.setdefault("model_name", inner.model_name)
        super().__init__(
            inner=inner, overlap=overlap, enabled=enabled, head_weight=head_weight, **kw
        )
        self._window = window if window is not None else find_window(inner)
        self._counts = {"texts": 0, "texts_pooled": 0, "windows_embedded": 0}
        if self._window is not None and not 0 <= overlap < self._window.text_tokens:
            raise ValueError(f"overlap must be in [0, {self._window.text_tokens})")
        if self._window is None and enabled:
            message = (
                f"embedder {type(inner).__name__}({inner.model_name}): its window or tokenizer "
                "cannot be found, so texts longer than its window are embedded as it does "
                "(no pooling)"
            )
            if strict:
                raise ValueError(message)
            logger.warning(message)

    @classmethod
    def class_name(cls) -> str:
        return "PooledEmbedding"

    def __getattr__(self, item: str) -> Any:
        # A drop-in: the wrapped embedder's public settings read through the wrapper.
        try:
            return super().__getattr__(item)
        except AttributeError:
            inner = self.__dict__.get("inner")
            if item.startswith("_") or inner is None:
                raise
            return getattr(inner, item)

    @property
    def window(self) -> Window | None:
        """The inner embedder's window (None: unknown, nothing is pooled)."""
        return self._window

    @property
    def pooling(self) -> bool:
        """Whether texts longer than the window are pooled."""
        return self.enabled and self._window is not None

    @property
    def cache_tag(self) -> str:
        """What tells a pooled vector apart in a cache key (window, overlap, weights)."""
        size = self._window.text_tokens if self._window is not None else 0
        head = "mean" if self.head_weight is None else f"{self.head_weight:.4f}"
        return f"pooled:{size}:{self.overlap}:{head}"

    @property
    def stats(self) -> dict[str, Any]:
        """Texts embedded, texts pooled, windows embedded for them, and the settings."""
        with self._lock:
            counts = dict(self._counts)
        window = self._window
        return {
            **counts,
            "pooling": self.pooling,
            "window_known": window is not None,
            "window_tokens": window.max_tokens if window is not None else None,
            "overlap": self.overlap,
            "head_weight": self.head_weight,
        }

    def pooled(self, texts: list[str]) -> list[bool]:
        """For each text, whether it is embedded as a pool of windows."""
        return [bool(r) for r in self.window_ranges(texts)]

    def window_ranges(self, texts: list[str]) -> list[list[tuple[int, int]] | None]:
        """Each long text's windows as ``(start, end)`` characters; None for a text
        the embedder reads whole. Whether a text is long is memoised by digest.
        """
        out: list[list[tuple[int, int]] | None] = [None] * len(texts)
        if not self.pooling:
            return out
        window = self._window
        digests = [hashlib.blake2b(t.encode("utf-8"), digest_size=16).digest() for t in texts]
        todo = [
            i
            for i, (t, d) in enumerate(zip(texts, digests, strict=True))
            if len(t) > window.text_tokens and self._memo.get(d, True)
        ]
        if not todo:
            return out
        spans = _piece_spans(window, [texts[i] for i in todo])
        for i, text_spans in zip(todo, spans, strict=True):
            long = len(text_spans) > window.text_tokens
            if len(self._memo) < _MEMO_SIZE:
                self._memo[digests[i]] = long
            if long:
                out[i] = window_ranges(texts[i], text_spans, window.text_tokens, self.overlap)
        return out

    def pool(self, window_vectors: np.ndarray) -> np.ndarray:
        """A long text's vector from its windows' vectors, as this wrapper pools them."""
        return pool_windows(window_vectors, self.head_weight)

    def count_pooled(self, texts: int, windows: int) -> None:
        """Count ``texts`` long texts pooled from ``windows`` windows by a caller that
        embedded the windows through this wrapper (:func:`.windows.embed_with_windows`)."""
        with self._lock:
            self._counts["texts_pooled"] += texts
            self._counts["windows_embedded"] += windows

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        windows = [
            [text[a:b] for a, b in ranges] if ranges else None
            for text, ranges in zip(texts, self.window_ranges(texts), strict=True)
        ]
        # A long text is replaced by its first window, so texts within the window
        # get exactly the inner embedder's vectors.
        first = [w[0] if w else t for t, w in zip(texts, windows, strict=True)]
        vectors = [list(v) for v in self.inner.get_text_embedding_batch(first)]
        long = [i for i, w in enumerate(windows) if w]
        rest = [piece for i in long for piece in windows[i][1:]]
        if long:  # a long text has two windows at least
            others = np.asarray(self.inner.get_text_embedding_batch(rest), dtype=np.float64)
            row = 0
            for i in long:
                count = len(windows[i]) - 1
                pieces = np.vstack([np.asarray(vectors[i], np.float64), others[row : row + count]])
                row += count
                vectors[i] = self.pool(pieces).tolist()
        with self._lock:
            self._counts["texts"] += len(texts)
            self._counts["texts_pooled"] += len(long)
            self._counts["windows_embedded"] += len(long) + len(rest)
        return vectors

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return (await self._aget_text_embeddings([text]))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        # In a worker thread, as HuggingFaceEmbedding does: the event loop never waits.
        return await asyncio.to_thread(self._get_text_embeddings, texts)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self.inner.get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await self.inner.aget_query_embedding(query)


def pool_windows(window_vectors: np.ndarray, head_weight: float | None) -> np.ndarray:
    """The normalised weighted mean of a text's windows' unit vectors (opening window first)."""
    pieces = np.asarray(window_vectors, np.float64)
    norms = np.linalg.norm(pieces, axis=1, keepdims=True)
    units = pieces / np.where(norms == 0, 1.0, norms)
    mean = units.T @ _window_weights(len(units), head_weight)
    norm = np.linalg.norm(mean)
    return (mean / norm if norm else mean).astype(np.float32)


def _window_weights(count: int, head_weight: float | None) -> np.ndarray:
    """Each window's share of a pooled vector: the opening one ``head_weight``, the
    others equal parts of the rest (all equal when ``head_weight`` is None)."""
    if head_weight is None:
        return np.full(count, 1.0 / count)
    weights = np.full(count, (1.0 - head_weight) / (count - 1))
    weights[0] = head_weight
    return weights
