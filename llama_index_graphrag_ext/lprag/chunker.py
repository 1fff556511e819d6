"""``LLMAtomicChunker``: atomic, self-contained chunks written by an LLM (LP-RAG §3.1).

The paper's chunker asks an LLM to go through each paragraph sentence by
sentence and rewrite it as the smallest self-contained statements, with
pronouns replaced by their referents (App. D, Box D.1). Chunks are therefore new
text, not slices (conflict C1): each keeps a link to its source document and
its position, so document-level recall still works.

Without an LLM, with the embedded SmolLM2 (too small to follow the format), or
for a paragraph whose answer cannot be parsed, the chunker falls back to the
paragraph's sentences, logs it and counts it in :attr:`LLMAtomicChunker.stats`.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Sequence
from typing import Any

from llama_index.core.llms import LLM
from llama_index.core.node_parser import NodeParser
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.schema import BaseNode, NodeRelationship, RelatedNodeInfo, TextNode
from pydantic import Field, PrivateAttr

from ..core.cache import LLMCache
from ..core.llm import RetryPolicy, StructuredLLM, parse_numbered_lines
from ..core.nlp import split_long_text, split_sentences_batch
from ..core.nodes import chunk_id
from .prompts import ATOMIC_CHUNK_PROMPT

logger = logging.getLogger(__name__)

#: Metadata keys the chunker adds (kept out of the embedder's and the LLM's view).
CHUNK_META_KEYS = ("lp_position", "lp_origin")

_HEADER = re.compile(
    r"^(?:extracted\s+chunks?\s+in\s+)?(?:sentence|chunk|passage|paragraph|questions?"
    r"(?:\s+chunk)?)\s*\d*\s*:?$",
    re.IGNORECASE,
)
_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n\s*")


def parse_bracketed_items(text: str, *, min_chars: int = 3) -> list[str]:
    """Items of an LLM answer written one per line inside ``[ ]`` (App. D format).

    Section headers such as ``[Sentence 1]`` or ``[Questions Chunk 2]`` are dropped
    (digest §3.5), as are duplicates and items shorter than ``min_chars``. Numbered
    or bulleted lines are accepted too; unmarked preamble lines are ignored when
    any line is marked.

    Args:
        text: The raw answer.
        min_chars: Shortest item kept.

    Returns:
        The items in order.
    """
    out: dict[str, None] = {}
    for item in parse_numbered_lines(text or ""):
        item = item.strip().strip("[]").strip()
        if len(item) < min_chars or _HEADER.match(item):
            continue
        out.setdefault(item, None)
    return list(out)


def new_rule_sentencizer():
    """A fresh fast rule-based spaCy sentence splitter (no model needed).

    A pipeline's lookup tables grow with every new word it tokenises and never
    shrink (spaCy's memory zones free the entries, not the tables): the shared
    :func:`rule_sentencizer` kept 3 MB after splitting 4,000 passages. A build
    that splits a whole corpus makes its own and drops it afterwards.
    """
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


@functools.lru_cache(maxsize=1)
def rule_sentencizer():
    """A shared :func:`new_rule_sentencizer`, for small jobs."""
    return new_rule_sentencizer()


def is_embedded_llm(llm: Any) -> bool:
    """True for the suite's embedded SmolLM2 (too small for bracketed-list extraction)."""
    if llm is None:
        return False
    name = str(getattr(getattr(llm, "metadata", None), "model_name", "") or "")
    path = str(getattr(llm, "model_path", "") or "")
    return "smollm" in (name + path).lower()


class LLMAtomicChunker(NodeParser, PromptMixin):
    """A ``NodeParser`` whose chunks are an LLM's atomic statements (LP-RAG §3.1).

    Each document is cut into paragraphs (blank lines; long ones at natural
    boundaries, at most ``max_chars``), one LLM call per paragraph, run
    concurrently, cached and retried through :class:`~..core.llm.StructuredLLM`.
    Chunks keep their source document (``SOURCE`` relationship, so ``ref_doc_id``
    maps back) and their order (``lp_position`` metadata, previous/next links).

    Attributes:
        llm: The LLM; ``None`` means sentence chunking (LLM-free).
        max_chars: Longest paragraph sent in one call.
        max_concurrency: LLM calls in flight at once.
        max_attempts: Attempts per LLM call (errors, timeouts, rate limits are retried).
        timeout: Seconds allowed per attempt (``None``: no limit).
        cache_path: Optional sqlite LLM cache file (a second run makes no calls).
        allow_embedded_llm: Use the embedded SmolLM2 anyway (by default it is
            detected and the sentence fallback is used, since it cannot follow
            the output format).
        min_chars: Shortest chunk kept.
    """

    llm: LLM | None = Field(default=None, description="LLM that writes the chunks.", exclude=True)
    max_chars: int = Field(default=3000, gt=0, description="Longest paragraph per LLM call.")
    max_concurrency: int = Field(default=4, gt=0, description="LLM calls in flight at once.")
    max_attempts: int = Field(default=3, gt=0, description="Attempts per LLM call (retries).")
    timeout: float | None = Field(default=120.0, gt=0, description="Seconds per LLM attempt.")
    cache_path: str | None = Field(default=None, description="sqlite LLM response cache.")
    allow_embedded_llm: bool = Field(
        default=False, description="Use the embedded SmolLM2 instead of falling back."
    )
    min_chars: int = Field(default=3, gt=0, description="Shortest chunk kept.")

    _prompt: BasePromptTemplate = PrivateAttr(default=ATOMIC_CHUNK_PROMPT)
    _stats: dict[str, int] = PrivateAttr(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "LLMAtomicChunker"

    # ----------------------------------------------------------- prompts

    def _get_prompts(self) -> PromptDictType:
        return {"atomic_chunk_prompt": self._prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "atomic_chunk_prompt" in prompts:
            self._prompt = prompts["atomic_chunk_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    @property
    def stats(self) -> dict[str, int]:
        """Counts of the last run: paragraphs, llm_paragraphs, fallback_paragraphs, failures, chunks."""
        return dict(self._stats)

    # ----------------------------------------------------------- parsing

    def _use_llm(self) -> LLM | None:
        if self.llm is None:
            return None
        if is_embedded_llm(self.llm) and not self.allow_embedded_llm:
            logger.warning(
                "LLMAtomicChunker: the embedded SmolLM2 cannot follow the chunk format; "
                "using sentence chunks instead (pass allow_embedded_llm=True to force it)"
            )
            return None
        return self.llm

    def _paragraphs(self, text: str) -> list[str]:
        out = []
        for para in _PARAGRAPH.split(text):
            for _, piece in split_long_text(para, self.max_chars):
                if piece.strip():
                    out.append(piece.strip())
        return out

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        docs = [n for n in nodes if n.get_content().strip()]
        skipped = len(nodes) - len(docs)
        if skipped:
            logger.warning("LLMAtomicChunker: skipped %d empty document(s)", skipped)
        paragraphs = [
            (d_i, p) for d_i, d in enumerate(docs) for p in self._paragraphs(d.get_content())
        ]
        llm = self._use_llm()
        stats = {
            "paragraphs": len(paragraphs),
            "llm_paragraphs": 0,
            "fallback_paragraphs": 0,
            "failures": 0,
            "chunks": 0,
        }
        answers: list[Any] = [None] * len(paragraphs)
        if llm is None:
            if paragraphs:
                logger.info(
                    "LLMAtomicChunker: no LLM; chunking %d paragraph(s) into sentences",
                    len(paragraphs),
                )
        else:
            structured = StructuredLLM(
                llm,
                cache=LLMCache(self.cache_path) if self.cache_path else None,
                retry=RetryPolicy(max_attempts=self.max_attempts, timeout=self.timeout),
                max_concurrency=self.max_concurrency,
            )
            prompts = [self._prompt.format(text=p) for _, p in paragraphs]

            def usable(answer: str) -> bool:
                return bool(parse_bracketed_items(answer, min_chars=self.min_chars))

            async def ask(prompt: str) -> str:
                # Unusable answers stay out of the cache, so a rerun asks again.
                return await structured.acomplete(prompt, accept=usable)

            answers = structured.map(
                prompts, ask, show_progress=show_progress, desc="Atomic chunks"
            )
        pieces: list[list[str]] = []
        fallback_rows: list[int] = []
        for row, answer in enumerate(answers):
            items = []
            if isinstance(answer, BaseException):
                stats["failures"] += 1
            elif answer is not None:
                items = parse_bracketed_items(answer, min_chars=self.min_chars)
                if not items:
                    logger.debug("unusable chunker answer: %.200s", answer)
            if items:
                stats["llm_paragraphs"] += 1
            else:
                fallback_rows.append(row)
            pieces.append(items)
        if fallback_rows:
            stats["fallback_paragraphs"] = len(fallback_rows)
            if llm is not None:
                logger.warning(
                    "LLMAtomicChunker: %d of %d paragraph(s) fell back to sentences "
                    "(%d failed call(s), the rest unparsable)",
                    len(fallback_rows),
                    len(paragraphs),
                    stats["failures"],
                )
            sentences = split_sentences_batch(
                [paragraphs[r][1] for r in fallback_rows], nlp=rule_sentencizer()
            )
            for row, sents in zip(fallback_rows, sentences, strict=True):
                pieces[row] = [s for s in sents if len(s) >= self.min_chars]
        out: list[BaseNode] = []
        per_doc: dict[int, list[TextNode]] = {}
        sources: dict[int, RelatedNodeInfo] = {}
        for (d_i, _), items, answer in zip(paragraphs, pieces, answers, strict=True):
            origin = (
                "llm"
                if answer is not None and not isinstance(answer, BaseException)
                else "sentence"
            )
            for text in items:
                if d_i not in sources:  # hashing a long document once, not once per chunk
                    sources[d_i] = docs[d_i].as_related_node_info()
                per_doc.setdefault(d_i, []).append(
                    self._make(docs[d_i], text, origin, sources[d_i])
                )
        for d_i, chunks in sorted(per_doc.items()):
            doc = docs[d_i]
            for pos, chunk in enumerate(chunks):
                chunk.id_ = chunk_id(doc.node_id, pos, chunk.text)
                chunk.metadata["lp_position"] = pos
            for prev, nxt in zip(chunks[:-1], chunks[1:], strict=True):
                prev.relationships[NodeRelationship.NEXT] = nxt.as_related_node_info()
                nxt.relationships[NodeRelationship.PREVIOUS] = prev.as_related_node_info()
            out.extend(chunks)
        stats["chunks"] = len(out)
        self._stats = stats
        return out

    def _make(
        self, doc: BaseNode, text: str, origin: str, source: RelatedNodeInfo | None = None
    ) -> TextNode:
        excluded = list(dict.fromkeys([*doc.excluded_embed_metadata_keys, *CHUNK_META_KEYS]))
        excluded_llm = list(dict.fromkeys([*doc.excluded_llm_metadata_keys, *CHUNK_META_KEYS]))
        node = TextNode(
            text=text,
            metadata={**doc.metadata, "lp_origin": origin},
            excluded_embed_metadata_keys=excluded,
            excluded_llm_metadata_keys=excluded_llm,
        )
        link = source.model_copy() if source is not None else doc.as_related_node_info()
        node.relationships[NodeRelationship.SOURCE] = link
        return node


__all__ = ["LLMAtomicChunker", "is_embedded_llm", "parse_bracketed_items"]
