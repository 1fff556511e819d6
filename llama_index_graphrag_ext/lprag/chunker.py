"""``LLMAtomicChunker``: atomic, self-contained chunks written by an LLM (LP-RAG §3.1).

The LLM rewrites each paragraph as the smallest self-contained statements
(App. D, Box D.1), so chunks are new text, not slices (conflict C1); each keeps
a link to its source document and its position. Without an LLM that can follow
the format (the embedded SmolLM2 cannot), or for a paragraph whose reply is
unusable, the paragraph is split into sentences, counted in ``stats`` and ``llm_steps``.
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

from ..core.llm import (
    LLMChoice,
    LLMOutputError,
    LLMSettings,
    LLMSteps,
    UsageMeter,
    choose_llm,
    parse_list,
    reason_of,
)
from ..core.nodes import chunk_id
from ..core.text import count_tokens, split_long_text, split_sentences_batch
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
    """Items of an LLM answer written one per line inside ``[ ]`` (App. D format), in order.

    Section headers such as ``[Sentence 1]`` are dropped (digest §3.5), as are
    duplicates and items shorter than ``min_chars``. Numbered or bulleted lines
    are accepted too.
    """
    out: dict[str, None] = {}
    for item in parse_list(text or ""):
        item = item.strip().strip("[]").strip()
        if len(item) < min_chars or _HEADER.match(item):
            continue
        out.setdefault(item, None)
    return list(out)


def new_rule_sentencizer():
    """A fresh rule-based spaCy sentence splitter (no model needed).

    A pipeline's vocabulary grows with every new word and never shrinks, so a
    build that splits a whole corpus makes its own and drops it afterwards.
    """
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


@functools.lru_cache(maxsize=1)
def rule_sentencizer():
    """A shared :func:`new_rule_sentencizer`, for small jobs."""
    return new_rule_sentencizer()


#: The LLM step's name in the step ledger.
STEP = "atomic-chunks"


class LLMAtomicChunker(NodeParser, LLMSettings, PromptMixin):
    """A ``NodeParser`` whose chunks are an LLM's atomic statements (LP-RAG §3.1).

    Each document is cut into paragraphs (blank lines; long ones at natural
    boundaries, at most ``max_chars``), one LLM call per paragraph. Chunks keep
    their source document (``SOURCE`` relationship, so ``ref_doc_id`` maps back)
    and their order (``lp_position`` metadata, previous/next links). The call
    settings are :class:`~..core.llm.LLMSettings`'.
    """

    llm: LLM | None = Field(default=None, description="LLM that writes the chunks.", exclude=True)
    max_chars: int = Field(default=3000, gt=0, description="Longest paragraph per LLM call.")
    min_chars: int = Field(default=3, gt=0, description="Shortest chunk kept.")

    _prompt: BasePromptTemplate = PrivateAttr(default=ATOMIC_CHUNK_PROMPT)
    _stats: dict[str, int] = PrivateAttr(default_factory=dict)
    _steps: LLMSteps = PrivateAttr(default_factory=lambda: LLMSteps("LP-RAG LLMAtomicChunker"))
    _choice: LLMChoice | None = PrivateAttr(default=None)
    _meter: UsageMeter = PrivateAttr(default_factory=UsageMeter)

    @classmethod
    def class_name(cls) -> str:
        return "LLMAtomicChunker"

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

    @property
    def usage(self) -> UsageMeter:
        """LLM calls and tokens of every run of this chunker."""
        return self._meter

    @property
    def llm_steps(self) -> LLMSteps:
        """Which LLM and tier the step used, paragraphs and fallbacks."""
        return self._steps

    def attach_steps(self, steps: LLMSteps, choice: LLMChoice | None = None) -> None:
        """Record into ``steps`` (an index's ledger); ``choice``: the index's LLM, if it has one."""
        self._steps = steps
        if choice is not None and (self.llm is None or self.llm is choice.llm):
            self._choice = choice

    def _use_llm(self) -> LLM | None:
        """The LLM planned for this run (``None``: sentences, LLM-free; the ledger says why)."""
        choice = self._choice or choose_llm(self.llm)
        return self._steps.plan(
            STEP,
            choice,
            needs="json",
            stand_in="sentence chunks",
            on_failure=self.on_llm_failure,
        )

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
        self._steps.count(STEP, len(paragraphs))
        if llm is not None:
            caller = self.new_caller(llm, meter=self._meter)

            def usable(text: str) -> bool:
                return bool(parse_bracketed_items(text, min_chars=self.min_chars))

            async def ask(paragraph: str) -> str:
                # Unusable replies stay out of the cache, so a rerun asks again.
                budget = 2 * count_tokens(paragraph) + 64
                prompt = self._prompt.format(text=paragraph)
                return (await caller.acomplete(prompt, max_tokens=budget, accept=usable)).text

            answers = caller.map(
                [p for _, p in paragraphs], ask, show_progress=show_progress, desc="Atomic chunks"
            )
        pieces: list[list[str]] = []
        fallback_rows: list[int] = []
        reasons: list[str] = []
        for row, answer in enumerate(answers):
            items = []
            if isinstance(answer, BaseException):
                # An empty reply is an unusable answer, not a failed call.
                stats["failures"] += type(answer) is not LLMOutputError
                reasons.append(reason_of(answer))
            elif answer is not None:
                items = parse_bracketed_items(answer, min_chars=self.min_chars)
                if not items:
                    reasons.append("unusable reply")
                    logger.debug("unusable chunker answer: %.200s", answer)
            if items:
                stats["llm_paragraphs"] += 1
            else:
                fallback_rows.append(row)
            pieces.append(items)
        self._steps.fell_back(STEP, reasons, what="paragraph", on_failure=self.on_llm_failure)
        if fallback_rows:
            stats["fallback_paragraphs"] = len(fallback_rows)
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
                if answer is not None
                and not isinstance(answer, BaseException)
                and parse_bracketed_items(answer, min_chars=self.min_chars)
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

    def _make(self, doc: BaseNode, text: str, origin: str, source: RelatedNodeInfo) -> TextNode:
        excluded = list(dict.fromkeys([*doc.excluded_embed_metadata_keys, *CHUNK_META_KEYS]))
        excluded_llm = list(dict.fromkeys([*doc.excluded_llm_metadata_keys, *CHUNK_META_KEYS]))
        node = TextNode(
            text=text,
            metadata={**doc.metadata, "lp_origin": origin},
            excluded_embed_metadata_keys=excluded,
            excluded_llm_metadata_keys=excluded_llm,
        )
        node.relationships[NodeRelationship.SOURCE] = source.model_copy()
        return node


__all__ = ["LLMAtomicChunker", "parse_bracketed_items"]
