"""LLM-free pseudo-queries: the stand-in for the paper's questions (ours; the paper has none).

These are *not* questions. Query 1 of a batch is a window of at most
``max_words`` words of one sentence of the target chunk; query 2 joins such a
window with one from another chunk of the batch (a crude multi-hop imitation).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from spacy.language import Language


def _window(sentence: str, max_words: int, rng: np.random.Generator) -> str:
    words = sentence.split()
    if len(words) <= max_words:
        return sentence
    start = int(rng.integers(0, len(words) - max_words + 1))
    return " ".join(words[start : start + max_words])


def chunk_sentences(texts: Sequence[str], nlp: Language | None = None) -> list[list[str]]:
    """Sentences of each text (the text itself if it has none).

    ``nlp``: the splitter (default: the shared :func:`.chunker.rule_sentencizer`).
    """
    from ..core.text import split_sentences_batch  # spaCy: imported when sentences are split
    from .chunker import rule_sentencizer

    split = split_sentences_batch(list(texts), nlp=nlp or rule_sentencizer())
    return [s or ([t.strip()] if t.strip() else []) for s, t in zip(split, texts, strict=True)]


class ChunkSentences:
    """The :func:`chunk_sentences` of many chunks, kept as offsets into their texts.

    Only each sentence's ``(start, end)`` is kept, in one integer array, so no
    per-sentence string outlives the batch that asks for it (memory stays bounded).

    Args:
        texts: Text of each chunk, by chunk row (the rows this object answers for).
        block: Texts split per call.
    """

    def __init__(self, texts: Mapping[int, str], nlp: Language, *, block: int = 512) -> None:
        self._texts = texts
        rows = sorted(texts)
        ptr, bounds = array("q", [0]), array("q")
        for start in range(0, len(rows), block):
            part = [texts[r] for r in rows[start : start + block]]
            for text, sentences in zip(part, chunk_sentences(part, nlp), strict=True):
                cursor = 0
                for sentence in sentences:
                    # Sentences come in text order, separated by whitespace only.
                    at = text.find(sentence, cursor)
                    if at < 0:
                        raise RuntimeError(f"sentence not found in its text: {sentence[:60]!r}")
                    cursor = at + len(sentence)
                    bounds.extend((at, cursor))
                ptr.append(len(bounds) // 2)
        self._rows = np.asarray(rows, np.int64)
        self._ptr = np.frombuffer(ptr, np.int64)
        self._bounds = np.frombuffer(bounds, np.int64).reshape(-1, 2)

    def __getitem__(self, row: int) -> list[str]:
        """Sentences of chunk ``row`` (``[]`` for a row not given)."""
        k = int(np.searchsorted(self._rows, row))
        if k == len(self._rows) or self._rows[k] != row:
            return []
        text = self._texts[int(row)]
        spans = self._bounds[self._ptr[k] : self._ptr[k + 1]].tolist()
        return [text[start:end] for start, end in spans]


def pseudo_queries(
    batches: Sequence[np.ndarray],
    sentences: Sequence[Sequence[str]],
    rng: np.random.Generator,
    *,
    per_batch: int = 2,
    max_words: int = 20,
) -> list[list[str]]:
    """LLM-free pseudo-queries for each batch (see the module docs for what they are).

    Args:
        batches: Batches from :func:`sample_batches` (chunk indices, target first).
        per_batch: Pseudo-queries per batch (the paper's ``n_B``).

    Returns:
        Distinct pseudo-queries per batch (fewer than ``per_batch`` when the batch
        has too little text).
    """
    out: list[list[str]] = []
    for batch in batches:
        target = sentences[batch[0]]
        queries: dict[str, None] = {}
        if target:
            order = rng.permutation(len(target))
            for j in range(per_batch):
                text = _window(target[order[j % len(order)]], max_words, rng)
                others = [c for c in batch[1:] if sentences[c]]
                if j % 2 == 1 and others:
                    partner = sentences[others[int(rng.integers(0, len(others)))]]
                    extra = _window(partner[int(rng.integers(0, len(partner)))], max_words, rng)
                    text = f"{text} {extra}"
                queries.setdefault(text, None)
        out.append(list(queries))
    return out
