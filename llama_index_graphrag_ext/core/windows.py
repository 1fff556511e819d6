"""Score a chunk longer than the embedder's window by its best window.

A pooled vector of a chunk about many things (a chat session) averages them all,
so a question about one finds it no better than chance (``docs/benchmarks.md``).
A window's cosine is on the same scale as a short chunk's, so scoring a long
chunk by its best window keeps what any part says. Window vectors come from
:func:`.late_chunking.embed_spans` or :func:`embed_with_windows`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from .embeddings import embed_texts, normalize_rows
from .pooling import PooledEmbedding

logger = logging.getLogger(__name__)

#: Joins a chunk id and a window number into the window's id in a vector table.
_WINDOW_MARK = "#window"

#: How a long chunk is scored: by its best window, or by its one pooled vector.
LONG_CHUNK_SCORES = ("best-window", "pooled")


def window_ids(chunk_id: str, count: int) -> list[str]:
    """The ids of a chunk's ``count`` windows in a vector table."""
    return [f"{chunk_id}{_WINDOW_MARK}{k}" for k in range(count)]


def chunk_of(window_id: str) -> str:
    """The chunk id a window id belongs to (the inverse of :func:`window_ids`)."""
    return window_id.rsplit(_WINDOW_MARK, 1)[0]


def window_rows(
    chunk_ids: Sequence[str], windows: Sequence[np.ndarray | None]
) -> tuple[list[str], np.ndarray | None]:
    """Window ids and their stacked vectors, for the chunks that have windows."""
    ids, parts = [], []
    for chunk_id, vectors in zip(chunk_ids, windows, strict=True):
        if vectors is not None and len(vectors) > 1:
            ids += window_ids(chunk_id, len(vectors))
            parts.append(vectors)
    return ids, (np.vstack(parts).astype(np.float32) if parts else None)


def find_pooler(embed_model: BaseEmbedding) -> PooledEmbedding | None:
    """The pooling wrapper in ``embed_model``'s chain that pools long texts, if any."""
    seen = embed_model
    for _ in range(4):  # CachedEmbedding -> PooledEmbedding -> HuggingFaceEmbedding
        if isinstance(seen, PooledEmbedding):
            return seen if seen.pooling else None
        seen = seen.__dict__.get("inner")
        if seen is None:
            return None
    return None


def embed_with_windows(
    embed_model: BaseEmbedding,
    texts: Sequence[str],
    *,
    show_progress: bool = False,
    desc: str = "Embedding",
) -> tuple[np.ndarray, list[np.ndarray | None]]:
    """The texts' vectors, and per text the unit vectors of its windows (None: read whole).

    A long text's windows are embedded once and its vector is their pool, as the
    pooling wrapper makes it. Without a pooling wrapper nothing is windowed.
    """
    pooler = find_pooler(embed_model)
    windows: list[np.ndarray | None] = [None] * len(texts)
    if pooler is None:
        return embed_texts(embed_model, texts, show_progress=show_progress, desc=desc), windows
    pieces, owner = [], []
    for i, (text, ranges) in enumerate(zip(texts, pooler.window_ranges(list(texts)), strict=True)):
        spans = ranges or [(0, len(text))]
        pieces += [text[a:b] for a, b in spans]
        owner += [i] * len(spans)
    vectors = embed_texts(embed_model, pieces, show_progress=show_progress, desc=desc)
    owners = np.asarray(owner, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]]) if len(owners) else owners
    out = vectors[starts].copy()
    long = np.flatnonzero(np.bincount(owners, minlength=len(texts)) > 1).tolist()
    for i in long:
        windows[i] = normalize_rows(vectors[owners == i])
        out[i] = pooler.pool(windows[i])
    pooler.count_pooled(len(long), sum(len(windows[i]) for i in long))
    return out, windows


def sentence_runs(sentences: Sequence[str], words: int) -> list[str]:
    """``sentences`` joined in order into runs of at most ``words`` words (a longer
    sentence is a run alone)."""
    runs: list[str] = []
    current: list[str] = []
    count = 0
    for sentence in sentences:
        n = len(sentence.split())
        if current and count + n > words:
            runs.append(" ".join(current))
            current, count = [], 0
        current.append(sentence)
        count += n
    if current:
        runs.append(" ".join(current))
    return runs


def sentence_windows(
    embed_model: BaseEmbedding,
    texts: Sequence[str],
    windows: Sequence[np.ndarray | None],
    split: Callable[[list[str]], list[list[str]]],
    words: int,
    *,
    show_progress: bool = False,
) -> list[np.ndarray | None]:
    """``windows`` with each long text's (one with windows) replaced by the unit vectors
    of its runs of whole sentences, each of at most ``words`` words (a longer sentence
    is a run alone); a long text that makes one run keeps its windows.

    A window of the embedder's size holds several topics of a many-topic document
    (256 word pieces: two or three short paragraphs), so its cosine blurs them; a
    run of a short passage's size holds about one. Single sentences blur less but
    lift a long chunk above short ones: the best of many small cosines is high by
    chance (LP-RAG's measurements: ``docs/methods/lprag.md``, Long documents).
    """
    long = [i for i, w in enumerate(windows) if w is not None]
    out = list(windows)
    if not long:
        return out
    pieces, owner = [], []
    for i, sentences in zip(long, split([texts[i] for i in long]), strict=True):
        runs = sentence_runs(sentences, words)
        if len(runs) > 1:
            pieces += runs
            owner += [i] * len(runs)
    if not pieces:
        return out
    vectors = embed_texts(
        embed_model, pieces, show_progress=show_progress, desc="Embedding sentences"
    )
    owners = np.asarray(owner, dtype=np.int64)
    for i in np.unique(owners).tolist():
        out[i] = vectors[owners == i]
    return out


def windows_missing(method: str, folder: Any, chunks: int, build_stats: MutableMapping) -> None:
    """Warn that a loaded index without long chunks' windows scores them by their pooled
    vector, and record ``chunk_windows_missing`` in ``build_stats``."""
    build_stats["chunk_windows_missing"] = chunks
    logger.warning(
        "%s index %s was persisted without long chunks' windows: its chunks longer than "
        "the embedder's window, if any, are scored by their pooled vector, not their best "
        "window; rebuild the index to score them by it",
        method,
        folder,
    )


@dataclass(frozen=True)
class ChunkWindows:
    """The windows of an index's long chunks, as rows of one matrix.

    Attributes:
        owner: ``(w,)`` the chunk row each window belongs to.
    """

    matrix: np.ndarray
    owner: np.ndarray

    @classmethod
    def from_table(
        cls, ids: Sequence[str], matrix: np.ndarray, chunk_row: Mapping[str, int]
    ) -> ChunkWindows | None:
        """From a vector table of windows (ids by :func:`window_ids`); None when empty."""
        if not len(ids):
            return None
        owner = np.fromiter((chunk_row[chunk_of(w)] for w in ids), dtype=np.int64, count=len(ids))
        return cls(np.asarray(matrix, dtype=np.float32), owner)

    def __len__(self) -> int:
        return int(self.owner.size)

    def best(self, scores: np.ndarray, rows: Sequence[int], query_vec: np.ndarray) -> np.ndarray:
        """``scores`` of the chunks ``rows``, a long chunk's replaced by its best window's cosine."""
        out = np.array(scores, dtype=np.float32, copy=True)
        rows = np.asarray(rows, dtype=np.int64)
        hit = np.isin(self.owner, rows)
        if not hit.any():
            return out
        owners = self.owner[hit]
        cosines = self.matrix[hit] @ np.asarray(query_vec, dtype=np.float32)
        order = np.argsort(owners, kind="stable")
        owners, cosines = owners[order], cosines[order]
        starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
        best = dict(
            zip(owners[starts].tolist(), np.maximum.reduceat(cosines, starts).tolist(), strict=True)
        )
        for i, row in enumerate(rows.tolist()):
            if row in best:
                out[i] = best[row]
        return out
