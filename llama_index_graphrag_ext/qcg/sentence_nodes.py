"""Sentence nodes: the LLM-free query nodes (paper §4.2, Fig. 4, "Sentence Nodes").

The paper's ablation replaces the LLM's question-answer pairs (§3.3 step 1) by
the chunk's sentences, so indexing needs no LLM. It is the suite's LLM-free
tier for QCG-RAG, and the stand-in :class:`~.doc2query.Doc2QueryGenerator` falls
back to for a chunk whose pairs cannot be had.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode
from pydantic import Field

from ..core.defaults import resolve_embed_model
from ..core.embeddings import embed_texts
from ..core.text import load_spacy, split_sentences_batch
from .filtering import doc2query_minus
from .query_nodes import GeneratedNodes, QueryNodeGenerator, QueryPair, _chunk_text, _with_score

#: Chunks split per spaCy stream by :class:`SentenceQueryGenerator`.
_SPLIT_BATCH = 256


class SentenceQueryGenerator(QueryNodeGenerator):
    """LLM-free query nodes: each sentence of a chunk (the paper's "Sentence Nodes").

    Our additions to the ablation, both optional and documented on the docs page:
    ``title_prefix`` prepends the chunk's ``metadata[title_key]`` to every
    sentence (a sentence such as "It was founded in 1963." is otherwise
    unanchored), and ``alpha < 1`` applies the Doc2Query-- filter to sentences.

    Args:
        title_prefix: Prefix each sentence with the chunk's title, when it has one.
        title_key: Metadata key of the title.
        min_chars: Sentences shorter than this are merged into the next one.
        splitter: ``spacy`` (the dependency parse of ``en_core_web_sm``) or
            ``rule`` (spaCy's punctuation sentencizer; several times faster).
        alpha: Fraction of sentences kept per chunk by cosine to the chunk (1 keeps all).
        embed_model: Embedder for the filter (only used when ``alpha < 1``).
    """

    title_prefix: bool = Field(default=True, description="Prefix sentences with the title.")
    title_key: str = Field(default="title", description="Metadata key of the chunk title.")
    min_chars: int = Field(default=12, ge=0, description="Shorter sentences join the next.")
    splitter: Literal["spacy", "rule"] = Field(default="rule", description="Sentence splitter.")
    alpha: float = Field(default=1.0, gt=0, le=1, description="Fraction of sentences kept.")
    embed_model: BaseEmbedding | None = Field(
        default=None, description="Embedder for the alpha filter (Settings fallback).", exclude=True
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

    def _sentences(self, chunk: BaseNode, sentences: list[str]) -> list[str]:
        title = str(chunk.metadata.get(self.title_key) or "").strip() if self.title_prefix else ""
        out: list[str] = []
        carry = ""
        for sentence in sentences:
            # The benchmark convention puts the title on the text's first line.
            if title and not out and not carry and sentence.startswith(title + "\n"):
                sentence = sentence[len(title) + 1 :].strip()
            sentence = " ".join(sentence.split())
            if not sentence:
                continue
            if len(carry) + len(sentence) < self.min_chars:
                carry = f"{carry} {sentence}".strip()
                continue
            sentence = f"{carry} {sentence}".strip()
            carry = ""
            out.append(f"{title}: {sentence}" if title and sentence != title else sentence)
        if carry and out:  # a short last sentence joins the previous one
            out[-1] = f"{out[-1]} {carry}"
        elif carry:
            out.append(f"{title}: {carry}" if title and carry != title else carry)
        return out

    def generate(self, chunks: Sequence[BaseNode]) -> GeneratedNodes:
        """Split every chunk into sentence nodes (one spaCy stream per batch of chunks)."""
        nlp = self._nlp()
        pairs: list[QueryPair] = []
        stats = {"chunks": len(chunks), "sentences": 0, "kept": 0, "empty_chunks": 0}
        per_chunk: list[list[QueryPair]] = []
        # In batches: the splitter's output for a whole corpus, alive while the
        # query nodes (which outlive the build) were made among it, kept its
        # memory resident after the build (docs/scaling.md, "Memory").
        for start in range(0, len(chunks), _SPLIT_BATCH):
            batch = chunks[start : start + _SPLIT_BATCH]
            split = split_sentences_batch([c.get_content() for c in batch], nlp)
            for chunk, sentences in zip(batch, split, strict=True):
                nodes = [
                    QueryPair(chunk.node_id, i, s, "", "sentence")
                    for i, s in enumerate(self._sentences(chunk, sentences))
                ]
                if not nodes:  # a chunk with no sentence boundary is one node
                    stats["empty_chunks"] += 1
                    text = " ".join(chunk.get_content().split())
                    nodes = [QueryPair(chunk.node_id, 0, text, "", "sentence")] if text else []
                per_chunk.append(nodes)
                stats["sentences"] += len(nodes)
            del split
        vectors = None
        if self.alpha < 1.0 and per_chunk:
            embed = resolve_embed_model(self.embed_model)
            all_nodes = [p for nodes in per_chunk for p in nodes]
            all_vecs = embed_texts(embed, [self.text_of(p) for p in all_nodes])
            chunk_vecs = embed_texts(embed, [_chunk_text(c) for c in chunks])
            kept_rows, start = [], 0
            for ci, nodes in enumerate(per_chunk):
                rows = np.arange(start, start + len(nodes))
                keep, scores = doc2query_minus(all_vecs[rows], chunk_vecs[ci], self.alpha)
                for j in keep:
                    pairs.append(_with_score(nodes[j], float(scores[j])))
                    kept_rows.append(rows[j])
                start += len(nodes)
            vectors = all_vecs[kept_rows]
        else:
            pairs = [p for nodes in per_chunk for p in nodes]
            chunk_vecs = None
        stats["kept"] = len(pairs)
        return GeneratedNodes(pairs, vectors, stats, chunk_vecs)
