"""Span vectors from a text's own forward pass ("late chunking").

A method that embeds a passage *and* each of its sentences reads the corpus's
text twice. With a sentence-transformers embedder the passage's forward pass
already holds a contextual vector for every word piece; the mean of a span's
pieces is a vector for that span, and the mean of all pieces is exactly the
passage's own vector (the model's mean pooling). :func:`embed_spans` makes
both from one pass, so the sentences cost no second pass over the text.

This is the "late chunking" of Günther et al. (2024, arXiv:2409.04701),
applied to sentences inside a passage. A span vector is not the vector of the
span embedded alone: it also carries what the rest of the passage says (a
sentence "He was born in 1950." is read knowing who "he" is).

What the window holds is pooled; what it does not is embedded alone:

* a text longer than the model's window gets its text vector from the
  embedder's normal path (:class:`~.pooling.PooledEmbedding` pools it), and a
  span ending past the window is embedded alone from the caller's fallback
  text. Both are counted in :attr:`SpanVectors.stats`.
* an embedder whose token vectors cannot be reached (not a sentence-transformers
  ``HuggingFaceEmbedding``, a slow tokenizer, a text instruction) raises
  :class:`LateChunkingUnavailable`; callers fall back with a warning.
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
        text_vectors: ``(n, d)`` normalised vectors of the texts.
        span_vectors: Per text, an ``(m_i, d)`` matrix of its spans' normalised vectors.
        stats: ``texts``, ``spans``, ``texts_over_window`` (text vector from the
            normal path), ``spans_alone`` (span past the window, or holding no word
            piece, embedded alone from its fallback text).
    """

    text_vectors: np.ndarray
    span_vectors: list[np.ndarray]
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
        texts: The texts, exactly as the embedder would read them.
        spans: Per text, its spans; each span is one or more character ranges.
        fallback_texts: Per text, one text per span, embedded alone when the span
            cannot be pooled.
        batch_size: Texts per forward batch (default: the embedder's).
        show_progress: Show a progress bar.
        desc: Label of the progress bar.

    Raises:
        LateChunkingUnavailable: The embedder's word-piece vectors cannot be reached.
    """
    if len(spans) != len(texts) or len(fallback_texts) != len(texts):
        raise ValueError("texts, spans and fallback_texts must have one entry per text")
    model = sentence_transformer(embed_model)
    tokenizer, limit = model.tokenizer, int(model.max_seq_length)
    batch = max(1, int(batch_size or getattr(embed_model, "embed_batch_size", 32) or 32))
    dimension = (
        getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    )
    dim = int(dimension())
    text_vectors = np.zeros((len(texts), dim), dtype=np.float32)
    span_vectors = [np.zeros((len(s), dim), dtype=np.float32) for s in spans]
    over: list[int] = []
    alone: list[tuple[int, int]] = []
    bar = tqdm(total=len(texts), desc=desc, unit="text", disable=not show_progress, leave=False)
    try:
        for start in range(0, len(texts), _SLICE):
            rows = range(start, min(len(texts), start + _SLICE))
            chunk = [texts[i] if texts[i].strip() else " " for i in rows]
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
            for row, i in enumerate(rows):
                vectors = tokens[row].detach().float().cpu().numpy()
                offsets = enc["offset_mapping"][row]
                if len(offsets) != len(vectors):  # not the tokenisation the model saw
                    raise LateChunkingUnavailable("the tokenizer's pieces differ from the model's")
                truncated = len(enc["input_ids"][row]) >= limit and _longer(
                    tokenizer, chunk[row], limit
                )
                if truncated:
                    over.append(i)
                else:
                    text_vectors[i] = vectors.mean(axis=0)  # the model's own mean pooling
                reach = max((e for _, e in offsets), default=0)
                for j, ranges in enumerate(spans[i]):
                    picked = _pieces(offsets, ranges)
                    if not picked or (truncated and max(e for _, e in ranges) > reach):
                        alone.append((i, j))
                        continue
                    span_vectors[i][j] = vectors[picked].mean(axis=0)
            bar.update(len(rows))
    finally:
        bar.close()
    if over:  # the normal path reads the whole text (pooled windows)
        text_vectors[over] = embed_texts(embed_model, [texts[i] for i in over])
    if alone:
        vecs = embed_texts(embed_model, [fallback_texts[i][j] for i, j in alone])
        for (i, j), v in zip(alone, vecs, strict=True):
            span_vectors[i][j] = v
    stats = {
        "texts": len(texts),
        "spans": sum(len(s) for s in spans),
        "texts_over_window": len(over),
        "spans_alone": len(alone),
    }
    return SpanVectors(
        normalize_rows(text_vectors), [normalize_rows(v) for v in span_vectors], stats
    )


def _longer(tokenizer: Any, text: str, limit: int) -> bool:
    """Whether ``text`` holds more word pieces than the model reads."""
    return len(tokenizer(text, add_special_tokens=True, verbose=False)["input_ids"]) > limit


def _pieces(offsets: Sequence[tuple[int, int]], ranges: Span) -> list[int]:
    """Indices of the word pieces overlapping any of ``ranges`` (special tokens excluded)."""
    return [
        k for k, (s, e) in enumerate(offsets) if e > s and any(s < b and e > a for a, b in ranges)
    ]
