"""``FGRAGQueryEngine``: query-level fine-grained summarization [P §3.3, Eqs. 8-12].

1. query entities from the LLM (Eq. 8; spaCy's when the reply is unusable),
   plus the whole query (the authors' code);
2. map, per unit: follow-up questions (Eq. 10), context-aware entity expansion
   (Eq. 9) and a focused summary of the descriptions (Eq. 11);
3. reduce: the answer from the summaries (Eq. 12); summaries that do not fit one
   prompt are first merged in rounds (as ``TreeSummarize``), so none is dropped.

``response.metadata`` holds each unit's questions and summary (``"fgrag"``) and
the query's LLM usage (``"usage"``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import (
    RESPONSE_TYPE,
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.schema import QueryBundle

from ..core.llm import (
    LLMCaller,
    LLMFallbackError,
    LLMSteps,
    UsageMeter,
    choose_llm,
    on_suite_loop,
    parse_list,
    reason_of,
    run_sync,
    strip_chatter,
)
from ..core.text import count_tokens, truncate_tokens
from .config import FGRAGConfig
from .expansion import Expansion
from .prompts import (
    ANSWER_PROMPT,
    COMBINE_PROMPT,
    QUERY_ENTITIES_PROMPT,
    QUESTIONS_PROMPT,
    STRICT_SUMMARY_PROMPT,
    SUMMARY_PROMPT,
)
from .retriever import FGRAGRetriever, spacy_query_entities

logger = logging.getLogger(__name__)

#: Tokens kept free in the context window for the prompt's own text and the output.
PROMPT_RESERVE = 700
# Reply budgets (max_tokens) per step.
_ENTITIES_BUDGET = 160
_SUMMARY_BUDGET = 500
_ANSWER_BUDGET = 1000
#: Most merge rounds before the answer (each round at least halves the notes).
MAX_REDUCE_ROUNDS = 8


def _clean_lines(text: str, limit: int, max_words: int = 12) -> list[str]:
    """Items of a list reply (reasoning dropped), without duplicates or overlong lines.

    A list still cut after the re-asks never gets here: it is a counted fallback.
    """
    items = parse_list(text)
    out: list[str] = []
    for item in items:
        item = item.strip().strip(".:;").strip()
        if item and len(item.split()) <= max_words and item.lower() not in (o.lower() for o in out):
            out.append(item)
        if len(out) >= limit:
            break
    return out


class FGRAGQueryEngine(BaseQueryEngine):
    """FG-RAG's map-reduce answer over an [`FGRAGIndex`][llama_index_graphrag_ext.fgrag.index.FGRAGIndex].

    Args:
        llm: The LLM; without one, the index's.
        config: A :class:`~.config.FGRAGConfig` or preset name (default: the index's).
        retriever: The expansion retriever (default: one with this config).
        similarity_top_k: Chunks the default retriever gives as ``source_nodes``.
        streaming: Stream the reduce step.
        **overrides: Query-time fields of the config by name (``max_questions=3``).
    """

    def __init__(
        self,
        index: Any,
        llm: LLM | None = None,
        *,
        config: FGRAGConfig | str | None = None,
        retriever: FGRAGRetriever | None = None,
        similarity_top_k: int = 10,
        streaming: bool = False,
        callback_manager: CallbackManager | None = None,
        **overrides: Any,
    ) -> None:
        base = index.config if config is None else FGRAGConfig.resolve(config)
        self.config = base.at_query_time(overrides)
        choice = choose_llm(llm) if llm is not None else index.llm_choice
        if choice.llm is None:
            raise ValueError(
                "FGRAGQueryEngine needs an LLM for its map-reduce; without one use "
                "index.as_retriever() (LLM-free context-aware entity expansion)"
            )
        self._llm = choice.llm
        self._index = index
        self.llm_settings = self.config.llm
        self._caller = self.llm_settings.new_caller(self._llm)
        #: Which LLM and tier each step used, and the per-query fallbacks.
        self.llm_steps = LLMSteps("FG-RAG engine")
        on_failure = self.llm_settings.on_llm_failure
        # The embedded SmolLM2 can try the entity list (a list of lines, not JSON).
        self.llm_steps.plan(
            "query-entities", choice, needs="text", stand_in="spaCy entities", on_failure=on_failure
        )
        self.llm_steps.plan(
            "questions",
            choice,
            needs="text",
            stand_in="the query alone (no follow-up questions)",
            on_failure=on_failure,
        )
        self.llm_steps.plan(
            "summaries",
            choice,
            needs="text",
            stand_in="the unit left out of the answer",
            on_failure=on_failure,
        )
        self._retriever = retriever or FGRAGRetriever(
            index, config=self.config, similarity_top_k=similarity_top_k
        )
        answer = self.config.answer
        self.max_query_entities = self.config.expansion.max_query_entities
        self.max_questions = answer.max_questions
        window = getattr(self._llm.metadata, "context_window", 4096) or 4096
        default_budget = max(256, min(8000, window - PROMPT_RESERVE))
        self.max_context_tokens = answer.max_context_tokens or default_budget
        self.streaming = streaming
        self._prompts: dict[str, BasePromptTemplate] = {
            "query_entities": QUERY_ENTITIES_PROMPT,
            "questions": QUESTIONS_PROMPT,
            "summary": SUMMARY_PROMPT if answer.general_knowledge else STRICT_SUMMARY_PROMPT,
            "combine": COMBINE_PROMPT,
            "answer": ANSWER_PROMPT,
        }
        super().__init__(callback_manager=callback_manager)

    def _get_prompts(self) -> PromptDictType:
        return dict(self._prompts)

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        for key, value in prompts_dict.items():
            if key in self._prompts:
                self._prompts[key] = value

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    @property
    def retriever(self) -> FGRAGRetriever:
        """The expansion retriever."""
        return self._retriever

    @property
    def entity_fallbacks(self) -> int:
        """Queries whose LLM entity list was unusable and spaCy's was used."""
        record = self.llm_steps.record("query-entities")
        return record.fallbacks if record else 0

    def _fell_back(self, step: str, reason: str, what: str) -> None:
        self.llm_steps.fell_back(
            step, [reason], what=what, on_failure=self.llm_settings.on_llm_failure
        )

    async def aquery_entities(self, query: str, llm: LLMCaller) -> list[str]:
        """Eq. 8: the query's entities from the LLM (spaCy's if the reply is unusable)."""
        self.llm_steps.count("query-entities", 1)
        prompt = self._prompts["query_entities"].format(query_str=query)
        try:
            reply = await llm.acomplete(prompt, max_tokens=_ENTITIES_BUDGET)
            entities = _clean_lines(reply.text, self.max_query_entities, max_words=8)
            reason = None if entities else "unusable reply"
        except LLMFallbackError:
            raise
        except Exception as exc:  # counted below; the query gets spaCy's entities
            entities, reason = [], reason_of(exc)
        if reason is not None:
            self._fell_back("query-entities", reason, "query")
            entities = await asyncio.to_thread(spacy_query_entities, query, self.max_query_entities)
        return entities

    def _context(self, expansion: Expansion) -> str:
        """The descriptions of one expansion as lines, within the token budget."""
        lines, used = [], 0
        for d in expansion.descriptions:
            line = f"- {d.text}"
            cost = count_tokens(line)
            if used + cost > self.max_context_tokens:
                break
            lines.append(line)
            used += cost
        return "\n".join(lines) if lines else "(no information found)"

    async def _amap_one(
        self, query: str, unit: str, expansion: Expansion, llm: LLMCaller
    ) -> dict[str, Any]:
        """Eqs. 10-11 for one unit: follow-up questions, then the focused summary."""
        self.llm_steps.count("questions", 1)
        try:
            asked = await llm.acomplete(
                self._prompts["questions"].format(
                    query_str=query, entity=unit, max_questions=self.max_questions
                ),
                max_tokens=40 * self.max_questions + 32,
            )
            questions = _clean_lines(asked.text, self.max_questions, max_words=40)
        except LLMFallbackError:
            raise
        except Exception as exc:  # counted; the summary is asked with the query alone
            self._fell_back("questions", reason_of(exc), "unit")
            questions = []
        # The authors put the query itself first in the questions block.
        question_block = "\n".join([f"**{query}**", *questions])
        summary = await llm.acomplete(
            self._prompts["summary"].format(
                entity=unit, context_str=self._context(expansion), questions=question_block
            ),
            max_tokens=_SUMMARY_BUDGET,
        )
        return {
            "entity": unit,
            "questions": questions,
            **expansion.as_evidence(),
            "summary": strip_chatter(summary.text),
        }

    async def _amap(self, query: str, llm: LLMCaller) -> tuple[list[dict[str, Any]], list]:
        entities = await self.aquery_entities(query, llm)
        expansions = await asyncio.to_thread(self._retriever.expand, query, entities)
        units = [(e.query_entity, e) for e in expansions]
        self.llm_steps.count("summaries", len(units))
        results = await llm.amap(
            units, lambda item: self._amap_one(query, item[0], item[1], llm), desc="FG-RAG map"
        )
        maps, reasons = [], []
        for (unit, _), result in zip(units, results, strict=True):
            if isinstance(result, BaseException):
                logger.debug("FG-RAG: summary for %r failed: %s", unit, result)
                reasons.append(reason_of(result))
                continue
            maps.append(result)
        self.llm_steps.fell_back(
            "summaries", reasons, what="unit", on_failure=self.llm_settings.on_llm_failure
        )
        sources = await asyncio.to_thread(self._retriever.rank_chunks, expansions, query)
        return maps, sources

    def _fits(self, parts: list[str]) -> bool:
        return count_tokens("\n\n".join(parts)) <= self.max_context_tokens

    def _groups(self, parts: list[str]) -> list[list[str]]:
        """Consecutive groups of ``parts``, each within the token budget (at least two per group)."""
        groups: list[list[str]] = [[]]
        for part in parts:
            if len(groups[-1]) >= 2 and not self._fits([*groups[-1], part]):
                groups.append([])
            groups[-1].append(part)
        return groups

    async def _areduce(
        self, query: str, maps: list[dict[str, Any]], llm: LLMCaller, stats: dict[str, Any]
    ) -> str:
        """Eq. 12's prompt, after merging the summaries in rounds until they fit.

        A summary longer than the whole budget on its own is cut to it (counted
        in ``stats["summaries_cut"]``); no summary is ever left out.
        """
        parts = [f"## {m['entity']}\n{m['summary']}" for m in maps if m.get("summary")]
        stats.update(reduce_rounds=0, summaries_cut=0)
        for k, part in enumerate(parts):
            if count_tokens(part) > self.max_context_tokens // 2:
                parts[k] = truncate_tokens(part, self.max_context_tokens // 2)
                stats["summaries_cut"] += 1
        while len(parts) > 1 and not self._fits(parts):
            if stats["reduce_rounds"] >= MAX_REDUCE_ROUNDS:
                raise RuntimeError("FG-RAG reduce: the notes did not fit after merging rounds")
            stats["reduce_rounds"] += 1
            groups = self._groups(parts)

            async def merge(group: list[str]) -> str:
                if len(group) == 1:
                    return group[0]
                prompt = self._prompts["combine"].format(
                    context_str="\n\n".join(group), query_str=query
                )
                reply = await llm.acomplete(prompt, max_tokens=_SUMMARY_BUDGET)
                return strip_chatter(reply.text)

            merged = await llm.amap(groups, merge, desc="FG-RAG reduce")
            failed = [m for m in merged if isinstance(m, BaseException)]
            if failed:
                raise failed[0]
            parts = [str(m) for m in merged]
        context = "\n\n".join(parts)
        return self._prompts["answer"].format(context_str=context or "(no notes)", query_str=query)

    async def _answer(self, query: str) -> Response:
        meter = UsageMeter()
        llm = self._caller.with_meter(meter)
        maps, sources = await self._amap(query, llm)
        reduce: dict[str, Any] = {}
        prompt = await self._areduce(query, maps, llm, reduce)
        answer = await llm.acomplete(prompt, max_tokens=_ANSWER_BUDGET, allow_cut=True)
        metadata = {"fgrag": maps, "reduce": reduce, "usage": meter.snapshot()}
        metadata["answer_cut"] = answer.finish_reason == "length"
        return Response(
            response=strip_chatter(answer.text), source_nodes=sources, metadata=metadata
        )

    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        query = query_bundle.query_str
        if not self.streaming:
            return run_sync(lambda: self._answer(query))
        meter = UsageMeter()
        llm = self._caller.with_meter(meter)
        maps, sources = run_sync(lambda: self._amap(query, llm))
        reduce: dict[str, Any] = {}
        prompt = run_sync(lambda: self._areduce(query, maps, llm, reduce))
        metadata = {"fgrag": maps, "reduce": reduce, "usage": meter.snapshot()}

        def tokens() -> Iterator[str]:
            report: dict = {}
            try:
                yield from llm.stream(prompt, max_tokens=_ANSWER_BUDGET, report=report)
            finally:  # the streamed answer counted too, a broken one as far as it came
                metadata["answer_cut"] = report.get("cut", False)
                metadata["usage"] = meter.snapshot()

        return StreamingResponse(response_gen=tokens(), source_nodes=sources, metadata=metadata)

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        query = query_bundle.query_str
        if not self.streaming:
            return await on_suite_loop(self._answer(query))
        meter = UsageMeter()
        llm = self._caller.with_meter(meter)
        maps, sources = await on_suite_loop(self._amap(query, llm))
        reduce: dict[str, Any] = {}
        prompt = await on_suite_loop(self._areduce(query, maps, llm, reduce))
        metadata = {"fgrag": maps, "reduce": reduce, "usage": meter.snapshot()}

        async def tokens() -> AsyncIterator[str]:
            report: dict = {}
            try:
                async for piece in llm.astream(prompt, max_tokens=_ANSWER_BUDGET, report=report):
                    yield piece
            finally:
                metadata["answer_cut"] = report.get("cut", False)
                metadata["usage"] = meter.snapshot()

        return AsyncStreamingResponse(
            response_gen=tokens(), source_nodes=sources, metadata=metadata
        )
