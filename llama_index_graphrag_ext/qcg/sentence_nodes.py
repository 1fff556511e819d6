"""Sentence nodes: the LLM-free query nodes (paper §4.2, Fig. 4, "Sentence Nodes").

The ablation replaces the LLM's question-answer pairs (§3.3 step 1) by the chunk's
sentences; it is also Doc2Query's stand-in for a chunk whose pairs cannot be had.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode
from pydantic import Field

from ..core.defaults import resolve_embed_model
from ..core.embeddings import embed_texts
from ..core.late_chunking import LateChunkingUnavailable, embed_spans
from ..core.text import load_spacy, split_sentences_batch
from ..core.windows import embed_with_windows
from .filtering import doc2query_minus
from .query_nodes import GeneratedNodes, QueryNodeGenerator, QueryPair, _chunk_text, _with_score

logger = logging.getLogger(__name__)

#: Chunks split per spaCy stream.
_SPLIT_BATCH = 256


class SentenceQueryGenerator(QueryNodeGenerator):
    """LLM-free query nodes: each sentence of a chunk (the paper's "Sentence Nodes").

    Our additions: ``title_prefix`` prepends the chunk's ``metadata[title_key]`` (a
    sentence such as "It was founded in 1963." is otherwise unanchored), and
    ``alpha < 1`` applies the Doc2Query-- filter to sentences. ``vectors="late"`` pools
    each sentence's (and title's) word pieces from the chunk's own forward pass
    (:mod:`~..core.late_chunking`). ``alpha`` and ``vectors`` are the config's
    ``sentence_alpha`` and ``sentence_vectors`` (see :class:`~.config.QCGConfig`).
    """

    title_prefix: bool = Field(default=True, description="Prefix sentences with the title.")
    title_key: str = Field(default="title", description="Metadata key of the chunk title.")
    min_chars: int = Field(default=12, ge=0, description="Shorter sentences join the next.")
    splitter: Literal["spacy", "rule"] = Field(default="rule", description="Sentence splitter.")
    alpha: float = Field(default=1.0, gt=0, le=1, description="Fraction of sentences kept.")
    embed_model: BaseEmbedding | None = Field(
        default=None, description="Embedder for the alpha filter (Settings fallback).", exclude=True
    )
    vectors: Literal["separate", "late"] = Field(
        default="separate", description="Sentence vectors: own pass, or from the chunk's pass."
    )
    late_fallback: Literal["separate", "raise"] = Field(
        default="separate",
        description="With vectors='late' and an embedder without word pieces: embed separately "
        "(warned, counted) or raise.",
    )

    @classmethod
    def class_name(cls) -> str:
        return "SentenceQueryGenerator"

    def _nlp(self):
        if self.splitter == "spacy":
            return load_spacy()
        import spacy

        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        return nlp

    def _sentences(self, chunk: BaseNode, sentences: list[str]) -> list[tuple[str, int, int]]:
        """The chunk's sentence nodes as ``(text, start, end)`` spans of its content."""
        title = str(chunk.metadata.get(self.title_key) or "").strip() if self.title_prefix else ""
        content = chunk.get_content()
        out: list[tuple[str, int, int]] = []
        carry, carry_start, cursor = "", -1, 0
        for raw in sentences:
            # spaCy's sentences are stripped substrings of the content, in order.
            at = content.find(raw, cursor)
            start, end = (at, at + len(raw)) if at >= 0 else (-1, -1)
            cursor = end if at >= 0 else cursor
            sentence = raw
            # The benchmarks put the title on the text's first line.
            if title and not out and not carry and sentence.startswith(title + "\n"):
                sentence = sentence[len(title) + 1 :].strip()
                start = start + len(raw) - len(sentence) if start >= 0 else start
            sentence = " ".join(sentence.split())
            if not sentence:
                continue
            if len(carry) + len(sentence) < self.min_chars:
                carry, carry_start = f"{carry} {sentence}".strip(), carry_start if carry else start
                continue
            if carry:
                sentence, start = f"{carry} {sentence}".strip(), carry_start
                carry = ""
            out.append((self._prefixed(title, sentence), start, end))
        if carry and out:  # a short last sentence joins the previous one
            text, start, _ = out[-1]
            out[-1] = (f"{text} {carry}", start, end)
        elif carry:
            out.append((self._prefixed(title, carry), carry_start, end))
        return out

    @staticmethod
    def _prefixed(title: str, sentence: str) -> str:
        return f"{title}: {sentence}" if title and sentence != title else sentence

    def generate(self, chunks: Sequence[BaseNode]) -> GeneratedNodes:
        """Split every chunk into sentence nodes (one spaCy stream per batch of chunks)."""
        nlp = self._nlp()
        pairs: list[QueryPair] = []
        stats = {"chunks": len(chunks), "sentences": 0, "kept": 0, "empty_chunks": 0}
        per_chunk: list[list[QueryPair]] = []
        spans: list[list[tuple[int, int]]] = []
        # In batches, so the splitter's output never holds a whole corpus
        # (docs/scaling.md, "Memory").
        for start in range(0, len(chunks), _SPLIT_BATCH):
            batch = chunks[start : start + _SPLIT_BATCH]
            split = split_sentences_batch([c.get_content() for c in batch], nlp)
            for chunk, sentences in zip(batch, split, strict=True):
                found = self._sentences(chunk, sentences)
                nodes = [
                    QueryPair(chunk.node_id, i, text, "", "sentence")
                    for i, (text, _, _) in enumerate(found)
                ]
                ranges = [(start, end) for _, start, end in found]
                if not nodes:  # a chunk with no sentence boundary is one node
                    stats["empty_chunks"] += 1
                    text = " ".join(chunk.get_content().split())
                    nodes = [QueryPair(chunk.node_id, 0, text, "", "sentence")] if text else []
                    ranges = [(0, len(chunk.get_content()))] if text else []
                per_chunk.append(nodes)
                spans.append(ranges)
                stats["sentences"] += len(nodes)
            del split
        vectors = chunk_vecs = all_vecs = windows = None
        if self.vectors == "late" and per_chunk:
            all_vecs, chunk_vecs, windows = self._late_vectors(chunks, per_chunk, spans, stats)
        if self.alpha < 1.0 and per_chunk:
            embed = resolve_embed_model(self.embed_model)
            all_nodes = [p for nodes in per_chunk for p in nodes]
            if all_vecs is None:
                all_vecs = embed_texts(embed, [self.text_of(p) for p in all_nodes])
                chunk_vecs, windows = embed_with_windows(embed, [_chunk_text(c) for c in chunks])
            kept_rows, start = [], 0
            for ci, nodes in enumerate(per_chunk):
                rows = np.arange(start, start + len(nodes))
                chunk = chunk_vecs[ci] if windows[ci] is None else windows[ci]
                keep, scores = doc2query_minus(all_vecs[rows], chunk, self.alpha)
                for j in keep:
                    pairs.append(_with_score(nodes[j], float(scores[j])))
                    kept_rows.append(rows[j])
                start += len(nodes)
            vectors = all_vecs[kept_rows]
        else:
            pairs = [p for nodes in per_chunk for p in nodes]
            vectors = all_vecs
        stats["kept"] = len(pairs)
        return GeneratedNodes(pairs, vectors, stats, chunk_vecs, windows)

    def _late_vectors(
        self,
        chunks: Sequence[BaseNode],
        per_chunk: list[list[QueryPair]],
        spans: list[list[tuple[int, int]]],
        stats: dict,
    ) -> tuple[np.ndarray | None, np.ndarray | None, list[np.ndarray | None] | None]:
        """Sentence and chunk vectors, and long chunks' windows, from one pass per chunk.

        A node pools its sentence's word pieces with its title's (as the separate text
        is "title: sentence"). An embedder without reachable word pieces gets separate
        vectors, warned and counted (``late_unavailable``).
        """
        embed = resolve_embed_model(self.embed_model)
        texts, groups, alone = [], [], []
        for chunk, nodes, ranges in zip(chunks, per_chunk, spans, strict=True):
            text, content = _chunk_text(chunk), chunk.get_content()
            shift = text.find(content) if content else -1
            title = str(chunk.metadata.get(self.title_key) or "").strip()
            at = text.find(title) if title and self.title_prefix else -1
            head = [(at, at + len(title))] if at >= 0 else []
            groups.append(
                [
                    # a span not found in the text pools nothing: embedded alone
                    head + [(shift + a, shift + b)] if shift >= 0 and a >= 0 else [(0, 0)]
                    for a, b in ranges
                ]
            )
            texts.append(text)
            alone.append([self.text_of(p) for p in nodes])
        try:
            result = embed_spans(
                embed, texts, groups, alone, show_progress=self.show_progress, desc="Chunks (late)"
            )
        except LateChunkingUnavailable as err:
            if self.late_fallback == "raise":
                raise
            logger.warning(
                "QCG sentence nodes: vectors='late' is unavailable with %s (%s); "
                "%d chunk(s) get separately embedded sentences",
                type(embed).__name__,
                err,
                len(chunks),
            )
            stats["late_unavailable"] = stats.get("late_unavailable", 0) + len(chunks)
            return None, None, None
        for key in ("texts_windowed", "texts_over_window", "spans_alone"):
            stats[f"late_{key}"] = stats.get(f"late_{key}", 0) + result.stats[key]
        return np.vstack(result.span_vectors), result.text_vectors, result.window_vectors
