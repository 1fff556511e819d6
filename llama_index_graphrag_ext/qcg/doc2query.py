"""Extended Doc2Query (paper §3.3 step 1, Prompt C.1): ``M`` LLM question-answer pairs per chunk.

The pairs are then filtered by Doc2Query-- (§3.3 step 2, :func:`~.filtering.doc2query_minus`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.schema import BaseNode
from pydantic import Field, PrivateAttr

from ..core.defaults import resolve_embed_model
from ..core.embeddings import embed_texts
from ..core.llm import (
    LLMCaller,
    LLMChoice,
    LLMOutputError,
    LLMSettings,
    LLMSteps,
    UsageMeter,
    choose_llm,
    is_embedded,
    reason_of,
    run_sync,
)
from ..core.windows import embed_with_windows
from .filtering import doc2query_minus
from .parsing import QAPairs, dedupe_pairs, parse_pairs
from .prompts import DOC2QUERY_LINES_PROMPT, DOC2QUERY_PROMPT, DOC2QUERY_REPAIR_NOTE
from .query_nodes import GeneratedNodes, QueryNodeGenerator, QueryPair, _chunk_text, _with_score
from .sentence_nodes import SentenceQueryGenerator

logger = logging.getLogger(__name__)

#: The LLM step's name in the step ledger.
STEP = "doc2query"


class Doc2QueryGenerator(QueryNodeGenerator, LLMSettings, PromptMixin):
    """Extended Doc2Query + Doc2Query-- (paper §3.3): LLM question-answer pairs per chunk.

    One call per chunk (concurrent, cached, retried). A capable LLM is asked for
    :class:`~.parsing.QAPairs` as structured output; the embedded SmolLM2 writes
    ``Q: ... A: ...`` lines. A chunk whose pairs cannot be had gets its sentence
    nodes (counted in :attr:`llm_steps`; an error with ``on_llm_failure="raise"``).

    ``num_pairs`` and ``alpha`` are the config's ``M`` and ``alpha`` (see
    :class:`~.config.QCGConfig`); the call settings are :class:`~..core.llm.LLMSettings`'.
    Without ``llm`` the suite's rule picks one once.
    """

    llm: LLM | None = Field(default=None, description="Generator LLM (the suite's rule when None).")
    embed_model: BaseEmbedding | None = Field(
        default=None, description="Embedder for Doc2Query-- (Settings fallback).", exclude=True
    )
    num_pairs: int = Field(default=20, gt=0, description="M: pairs requested per chunk.")
    alpha: float = Field(default=0.8, gt=0, le=1, description="Doc2Query-- fraction kept.")
    output_format: Literal["auto", "json", "lines"] = Field(
        default="auto", description="Requested output format."
    )
    max_chunk_chars: int = Field(default=6000, gt=0, description="Chunk text cut for prompting.")
    repair_attempts: int = Field(default=1, ge=0, description="Re-asks after unusable output.")
    prompt: BasePromptTemplate = Field(
        default=DOC2QUERY_PROMPT, description="JSON prompt (num_pairs, chunk)."
    )
    lines_prompt: BasePromptTemplate = Field(
        default=DOC2QUERY_LINES_PROMPT, description="Line-format prompt (num_pairs, chunk)."
    )

    _caller: LLMCaller | None = PrivateAttr(default=None)
    _choice: LLMChoice | None = PrivateAttr(default=None)
    _planned: bool = PrivateAttr(default=False)
    _steps: LLMSteps = PrivateAttr(default_factory=lambda: LLMSteps("QCG Doc2Query"))

    @classmethod
    def class_name(cls) -> str:
        return "Doc2QueryGenerator"

    def _get_prompts(self) -> PromptDictType:
        return {"doc2query_prompt": self.prompt, "doc2query_lines_prompt": self.lines_prompt}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        if "doc2query_prompt" in prompts_dict:
            self.prompt = prompts_dict["doc2query_prompt"]
        if "doc2query_lines_prompt" in prompts_dict:
            self.lines_prompt = prompts_dict["doc2query_lines_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    @property
    def llm_steps(self) -> LLMSteps:
        """Which LLM and tier the step used, items and fallbacks (see :mod:`~..core.llm.steps`)."""
        return self._steps

    def attach_steps(self, steps: LLMSteps, choice: LLMChoice | None = None) -> None:
        """Record into ``steps`` (an index's ledger); ``choice``, the index's LLM, serves
        only when this generator was given none."""
        self._steps = steps
        if choice is not None and (self.llm is None or self.llm is choice.llm):
            self._choice = choice
        self._planned = False

    def caller(self) -> LLMCaller | None:
        """The caller of the planned LLM (``None``: the step runs LLM-free, on sentences)."""
        if not self._planned:
            choice = self._choice or choose_llm(self.llm)
            needs = "json" if self.output_format == "json" else "text"
            llm = self._steps.plan(
                STEP,
                choice,
                needs=needs,
                stand_in="sentence nodes",
                on_failure=self.on_llm_failure,
            )
            self.llm = choice.llm
            self._caller = self.new_caller(llm) if llm is not None else None
            self._planned = True
        return self._caller

    @property
    def usage(self) -> UsageMeter:
        """LLM calls and tokens spent so far."""
        caller = self.caller()
        return caller.meter if caller is not None else UsageMeter()

    def resolved_format(self) -> str:
        """The output format actually requested (``auto`` resolved)."""
        if self.output_format != "auto":
            return self.output_format
        return "lines" if is_embedded(self.llm) else "json"

    def prompt_for(self, chunk_text: str) -> str:
        """The generation prompt of one chunk."""
        template = self.lines_prompt if self.resolved_format() == "lines" else self.prompt
        return template.format(num_pairs=self.num_pairs, chunk=chunk_text[: self.max_chunk_chars])

    def reply_budget(self) -> int:
        """``max_tokens`` of one reply: about 40 tokens a pair (JSON costs a little more)."""
        per_pair = 40 if self.resolved_format() == "lines" else 48
        return self.num_pairs * per_pair + 64

    async def _pairs_of(self, chunk_text: str) -> tuple[list[tuple[str, str]], int]:
        """Pairs of one chunk and the number of re-asks it took."""
        caller = self.caller()
        prompt = self.prompt_for(chunk_text)
        if self.resolved_format() == "json" and caller.mode != "text":
            found = await caller.astructured(
                prompt,
                QAPairs,
                max_tokens=self.reply_budget(),
                repair_attempts=self.repair_attempts,
                check=_has_pairs,
            )
            return dedupe_pairs([(p.query, p.answer) for p in found.pairs])[: self.num_pairs], 0
        current = prompt
        for attempt in range(self.repair_attempts + 1):
            # A reply still cut after the re-asks raises: a cut list is not the list,
            # and the chunk is a counted fallback.
            reply = await caller.acomplete(
                current, max_tokens=self.reply_budget(), accept=lambda t: bool(parse_pairs(t))
            )
            pairs = parse_pairs(reply.text)
            if pairs:
                return pairs[: self.num_pairs], attempt
            current = prompt + DOC2QUERY_REPAIR_NOTE
        raise LLMOutputError("no question-answer pairs in the reply", raw=reply.raw)

    async def agenerate(self, chunks: Sequence[BaseNode]) -> GeneratedNodes:
        """Generate, parse, embed and filter the pairs of ``chunks``."""
        stats = {"chunks": len(chunks), "pairs_generated": 0, "kept": 0, "repairs": 0}
        stats.update(fallback_chunks=0)
        if not chunks:
            return GeneratedNodes([], None, stats)
        caller = self.caller()
        texts = [_chunk_text(c) for c in chunks]
        self._steps.count(STEP, len(chunks))
        if caller is None:  # planned LLM-free: every chunk gets its sentences
            results: list[Any] = [None] * len(chunks)
        else:
            results = await caller.amap(
                texts, self._pairs_of, show_progress=self.show_progress, desc="Doc2Query"
            )
        per_chunk: list[list[QueryPair]] = []
        failed: list[int] = []
        reasons: list[str] = []
        for i, (chunk, result) in enumerate(zip(chunks, results, strict=True)):
            if result is None or isinstance(result, BaseException):
                failed.append(i)
                per_chunk.append([])
                if result is not None:
                    reasons.append(reason_of(result))
                    logger.debug("Doc2Query failed for chunk %s: %s", chunk.node_id, result)
                continue
            pairs, repairs = result
            stats["repairs"] += repairs
            stats["pairs_generated"] += len(pairs)
            per_chunk.append(
                [QueryPair(chunk.node_id, j, q, a, "qa") for j, (q, a) in enumerate(pairs)]
            )
        if reasons:  # WARNING with the count; raises with on_llm_failure="raise"
            self._steps.fell_back(STEP, reasons, what="chunk", on_failure=self.on_llm_failure)
        if failed:
            fallback = SentenceQueryGenerator(title_prefix=True).generate(
                [chunks[i] for i in failed]
            )
            by_chunk: dict[str, list[QueryPair]] = {}
            for pair in fallback.pairs:
                by_chunk.setdefault(pair.chunk_id, []).append(pair)
            for i in failed:
                per_chunk[i] = by_chunk.get(chunks[i].node_id, [])
            stats["fallback_chunks"] = len(failed)
        # Doc2Query-- (paper §3.3 step 2): embed q ⊕ a and keep the top alpha per chunk.
        embed = resolve_embed_model(self.embed_model)
        all_pairs = [p for nodes in per_chunk for p in nodes]
        pair_vecs = await asyncio.to_thread(
            embed_texts, embed, [self.text_of(p) for p in all_pairs]
        )
        chunk_vecs, chunk_windows = await asyncio.to_thread(embed_with_windows, embed, texts)
        kept: list[QueryPair] = []
        kept_rows: list[int] = []
        start = 0
        for ci, nodes in enumerate(per_chunk):
            rows = np.arange(start, start + len(nodes))
            start += len(nodes)
            if not len(nodes):
                continue
            chunk = chunk_vecs[ci] if chunk_windows[ci] is None else chunk_windows[ci]
            keep, scores = doc2query_minus(pair_vecs[rows], chunk, self.alpha)
            if nodes[0].kind == "sentence":  # fallback nodes are not filtered
                keep = np.arange(len(nodes))
            for j in keep:
                kept.append(_with_score(nodes[j], float(scores[j])))
                kept_rows.append(int(rows[j]))
        stats["kept"] = len(kept)
        if caller is not None:
            meter = caller.meter.snapshot()
            stats.update(llm_calls=meter["calls"], cache_hits=meter["cache_hits"])
        vectors = pair_vecs[kept_rows] if kept_rows else pair_vecs[:0]
        return GeneratedNodes(kept, vectors, stats, chunk_vecs, chunk_windows)

    def generate(self, chunks: Sequence[BaseNode]) -> GeneratedNodes:
        """Sync :meth:`agenerate` (the LLM calls run on the suite's event loop)."""
        return run_sync(lambda: self.agenerate(chunks))


def _has_pairs(found: QAPairs) -> QAPairs:
    if not dedupe_pairs([(p.query, p.answer) for p in found.pairs]):
        raise ValueError("no usable question-answer pair")
    return found
