"""Span vectors from a text's own forward pass ("late chunking", Günther et al. 2024,
arXiv:2409.04701).

The mean of a span's contextual word-piece vectors is a vector for the span
(knowing who "he" is), and the mean of all pieces is the passage's own vector,
so :func:`embed_spans` gives a passage and its sentences from one pass. A text
longer than the window is read in the pooling wrapper's windows
(:class:`~.pooling.PooledEmbedding`), so its vector is the one the normal path
gives. Spans no read reaches are embedded alone from a fallback text.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from tqdm.auto import tqdm

from .embeddings import embed_texts, normalize_rows
from .windows import find_pooler

logger = logging.getLogger(__name__)

#: A span: one or more ``(start, end)`` character ranges of its text, pooled together
#: (e.g. the passage's title and one of its sentences).
Span = Sequence[tuple[int, int]]

#: Texts per forward-pass slice: bounds the word-piece vectors held at once.
_SLICE = 256


class LateChunkingUnavailable(RuntimeError):
    """The embedder's word-piece vectors cannot be reached."""


@dataclass
class SpanVectors:
    """What :func:`embed_spans` returns.

    Attributes:
        span_vectors: Per text, an ``(m_i, d)`` matrix of its spans' normalised vectors.
        window_vectors: Per text, the normalised vectors of the windows it was read
            in, or None for a text read whole.
        stats: ``texts``, ``spans``, ``texts_windowed``, ``texts_over_window`` (read
            up to the window, no pooling wrapper), ``spans_alone``.
    """

    text_vectors: np.ndarray
    span_vectors: list[np.ndarray]
    window_vectors: list[np.ndarray | None] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)


def sentence_transformer(embed_model: BaseEmbedding) -> Any:
    """The sentence-transformers model behind ``embed_model`` (through cache and pooling
    wrappers), or raise :class:`LateChunkingUnavailable` saying why."""
    seen = embed_model
    for _ in range(4):  # CachedEmbedding -> PooledEmbedding -> HuggingFaceEmbedding
        inner = seen.__dict__.get("inner")
        if inner is None:
            break
        seen = inner
    model = getattr(seen, "_model", None)
    tokenizer = getattr(model, "tokenizer", None)
    if model is None or not hasattr(model, "encode") or tokenizer is None:
        raise LateChunkingUnavailable(
            f"{type(seen).__name__} does not expose a sentence-transformers model"
        )
    if not getattr(tokenizer, "is_fast", False):
        raise LateChunkingUnavailable("the tokenizer gives no character offsets (not a fast one)")
    if getattr(seen, "text_instruction", None):
        raise LateChunkingUnavailable("the embedder prefixes texts with an instruction")
    return model


def embed_spans(
    embed_model: BaseEmbedding,
    texts: Sequence[str],
    spans: Sequence[Sequence[Span]],
    fallback_texts: Sequence[Sequence[str]],
    *,
    batch_size: int | None = None,
    show_progress: bool = False,
    desc: str = "Embedding (one pass)",
) -> SpanVectors:
    """Embed each text once and pool its spans' word pieces (see the module docs).

    Args:
        embed_model: A sentence-transformers ``HuggingFaceEmbedding``, possibly
            wrapped in the suite's cache or pooling wrappers.
        spans: Per text, its spans; each span is one or more character ranges.
        fallback_texts: Per text, one text per span, embedded alone when the span
            cannot be pooled.

    Raises:
        LateChunkingUnavailable: The embedder's word-piece vectors cannot be reached.
    """
    if len(spans) != len(texts) or len(fallback_texts) != len(texts):
        raise ValueError("texts, spans and fallback_texts must have one entry per text")
    model = sentence_transformer(embed_model)
    pooler = find_pooler(embed_model)
    batch = max(1, int(batch_size or getattr(embed_model, "embed_batch_size", 32) or 32))
    dimension = (
        getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    )
    dim = int(dimension())
    text_vectors = np.zeros((len(texts), dim), dtype=np.float32)
    span_vectors = [np.zeros((len(s), dim), dtype=np.float32) for s in spans]
    window_vectors: list[np.ndarray | None] = [None] * len(texts)
    # Each text whole, or a long one in the pooling wrapper's own windows.
    ranges = pooler.window_ranges(list(texts)) if pooler is not None else [None] * len(texts)
    windows_of = [r or [(0, len(t))] for r, t in zip(ranges, texts, strict=True)]
    # Longest first, a text's windows side by side: each forward batch holds texts of
    # about one length (little padding) and a text's reads arrive together.
    order = sorted(range(len(texts)), key=lambda i: -max(b - a for a, b in windows_of[i]))
    reads = [(i, a, b) for i in order for a, b in windows_of[i]]
    counts = {"windowed": 0, "over": 0}
    alone: list[tuple[int, int]] = []
    pending: list[_Read] = []  # the windows read so far of the text being assembled
    # Counted in windows read, not texts: the longest text goes first, and a bar counting
    # texts sat at 0 through it, promising hours for a build of minutes.
    bar = tqdm(
        total=len(reads),
        desc=f"{desc} {len(texts):,} texts",
        unit="window",
        disable=not show_progress,
        leave=False,
    )
    try:
        for read in _forward(model, texts, reads, batch):
            bar.update(1)
            pending.append(read)
            i = read.text
            if len(pending) < len(windows_of[i]):
                continue
            windows, pending = pending, []
            if len(windows) > 1:
                counts["windowed"] += 1
                means = np.vstack([w.vectors.mean(axis=0) for w in windows])
                text_vectors[i] = pooler.pool(means)
                window_vectors[i] = normalize_rows(means)  # each, as the model pools a window
            else:
                text_vectors[i] = windows[0].vectors.mean(axis=0)  # the model's own mean pooling
                counts["over"] += windows[0].truncated
            for j, span in enumerate(spans[i]):
                vector = _span_vector(windows, span)
                if vector is None:
                    alone.append((i, j))
                else:
                    span_vectors[i][j] = vector
    finally:
        bar.close()
    if alone:
        vecs = embed_texts(embed_model, [fallback_texts[i][j] for i, j in alone])
        for (i, j), v in zip(alone, vecs, strict=True):
            span_vectors[i][j] = v
    stats = {
        "texts": len(texts),
        "spans": sum(len(s) for s in spans),
        "texts_windowed": counts["windowed"],
        "texts_over_window": counts["over"],
        "spans_alone": len(alone),
    }
    return SpanVectors(
        normalize_rows(text_vectors),
        [normalize_rows(v) for v in span_vectors],
        window_vectors,
        stats,
    )


@dataclass
class _Read:
    """One forward read: a text (or one window of it) and its word pieces."""

    text: int
    vectors: np.ndarray  # (pieces, d), special tokens included
    starts: np.ndarray  # each piece's first character in the whole text
    ends: np.ndarray  # ... and its end; a special token has start == end
    truncated: bool  # the model stopped before the read's end

    def __post_init__(self) -> None:
        real = np.flatnonzero(self.ends > self.starts)
        self.first = int(self.starts[real[0]]) if len(real) else 0
        self.last = int(self.ends[real[-1]]) if len(real) else -1

    def pieces(self, span: Span) -> np.ndarray:
        """Indices of the word pieces overlapping any of the span's ranges."""
        hit = np.zeros(len(self.starts), dtype=bool)
        for a, b in span:
            hit |= (self.starts < b) & (self.ends > a)
        return np.flatnonzero(hit & (self.ends > self.starts))


def _forward(model: Any, texts: Sequence[str], reads: list[tuple[int, int, int]], batch: int):
    """Run the model over ``reads`` (``(text, start, end)``), a slice at a time, in order."""
    tokenizer, limit = model.tokenizer, int(model.max_seq_length)
    for first in range(0, len(reads), _SLICE):
        part = reads[first : first + _SLICE]
        chunk = [texts[i][a:b] if texts[i][a:b].strip() else " " for i, a, b in part]
        tokens = model.encode(
            chunk,
            batch_size=batch,
            output_value="token_embeddings",
            convert_to_numpy=False,
            show_progress_bar=False,
        )
        enc = tokenizer(
            chunk, truncation=True, max_length=limit, return_offsets_mapping=True, verbose=False
        )
        for row, (i, a, _b) in enumerate(part):
            vectors = tokens[row].detach().float().cpu().numpy()
            offsets = np.asarray(enc["offset_mapping"][row], dtype=np.int64).reshape(-1, 2)
            if len(offsets) != len(vectors):  # not the tokenisation the model saw
                raise LateChunkingUnavailable("the tokenizer's pieces differ from the model's")
            truncated = len(enc["input_ids"][row]) >= limit and _longer(
                tokenizer, chunk[row], limit
            )
            yield _Read(i, vectors, offsets[:, 0] + a, offsets[:, 1] + a, truncated)


def _span_vector(windows: list[_Read], span: Span) -> np.ndarray | None:
    """The mean of a span's word pieces, read in the window that holds it with the
    most context around it; across windows when none holds it whole. None when no
    read reaches it (a span past a truncated text's end, or an empty one)."""
    lo, hi = min(a for a, _ in span), max(b for _, b in span)
    best, margin = None, -1
    for w in windows:
        if w.first <= lo and hi <= w.last and min(lo - w.first, w.last - hi) > margin:
            best, margin = w, min(lo - w.first, w.last - hi)
    if best is not None:
        picked = best.pieces(span)
        return best.vectors[picked].mean(axis=0) if len(picked) else None
    if len(windows) == 1 and windows[0].truncated:
        return None  # the model never read its end: embedded alone
    parts, covered = [], -1
    for w in windows:  # each character's pieces from the first window that read it
        picked = w.pieces(span)
        picked = picked[w.starts[picked] >= covered]
        if len(picked):
            parts.append(w.vectors[picked])
            covered = int(w.ends[picked].max())
    return np.vstack(parts).mean(axis=0) if parts else None


def _longer(tokenizer: Any, text: str, limit: int) -> bool:
    """Whether ``text`` holds more word pieces than the model reads."""
    return len(tokenizer(text, add_special_tokens=True, verbose=False)["input_ids"]) > limit
