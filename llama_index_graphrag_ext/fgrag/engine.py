"""``FGRAGQueryEngine``: query-level fine-grained summarization [P §3.3, Eqs. 8-12].

For a query ``Q``:

1. query entities ``E_1..E_n`` from the LLM (Eq. 8, few-shot, one per line; at
   most ``max_query_entities``; spaCy's when the answer is unusable, counted),
   plus the whole query as one more unit (the authors' code);
2. map, per unit and concurrently: follow-up questions "as a user would" (Eq. 10),
   context-aware entity expansion (Eq. 9, [`FGRAGRetriever.expand`][llama_index_graphrag_ext.fgrag.retriever.FGRAGRetriever.expand]),
   and a focused summary of the gathered descriptions steered by the questions (Eq. 11);
3. reduce: the answer from the summaries only (Eq. 12), streamed when
   ``streaming=True``.

The response's ``source_nodes`` are the chunks behind the descriptions (with
evidence); ``response.metadata["fgrag"]`` holds every unit's questions,
weak/strong context entities, description count and summary, and
``response.metadata["usage"]`` the LLM calls and tokens of this query (the
paper's cost table, Table 5, is a headline result).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import RESPONSE_TYPE, Response, StreamingResponse
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.schema import QueryBundle

from ..core.cache import LLMCache
from ..core.defaults import resolve_llm
from ..core.llm import StructuredLLM, UsageMeter, estimate_tokens, parse_numbered_lines, run_sync
from ..core.nlp import truncate_tokens
from .expansion import Expansion
from .prompts import ANSWER_PROMPT, QUERY_ENTITIES_PROMPT, QUESTIONS_PROMPT, SUMMARY_PROMPT
from .retriever import FGRAGRetriever, spacy_query_entities

if TYPE_CHECKING:
    from .index import FGRAGIndex

logger = logging.getLogger(__name__)

#: Tokens kept free in the context window for the prompt's own text and the output.
PROMPT_RESERVE = 700


def _clean_lines(text: str, limit: int, max_words: int = 12) -> list[str]:
    """Items of a list answer, without duplicates or overlong lines."""
    out: list[str] = []
    for item in parse_numbered_lines(text):
        item = item.strip().strip(".:;").strip()
        if item and len(item.split()) <= max_words and item.lower() not in (o.lower() for o in out):
            out.append(item)
        if len(out) >= limit:
            break
    return out


class FGRAGQueryEngine(BaseQueryEngine):
    """FG-RAG's map-reduce answer over an [`FGRAGIndex`][llama_index_graphrag_ext.fgrag.index.FGRAGIndex].

    Args:
        index: The index.
        llm: The LLM (explicit, ``Settings``, the environment, else the embedded SmolLM2).
        retriever: The expansion retriever; built from ``index`` and
            ``retriever_kwargs`` when omitted.
        max_query_entities: Query entities kept (authors: 9).
        max_questions: Follow-up questions per entity (authors: 10).
        max_context_tokens: Token budget of one summary's descriptions and of
            the reduce step's summaries; by default the LLM's context window
            minus a reserve (the paper sets none; small models need one).
        streaming: Stream the reduce step.
        cache_path: Optional sqlite file caching LLM answers.
        num_workers: Concurrent LLM calls in the map step.
        callback_manager: Callbacks; ``Settings`` when omitted.
        **retriever_kwargs: Passed to [`FGRAGRetriever`][llama_index_graphrag_ext.fgrag.retriever.FGRAGRetriever].
    """

    def __init__(
        self,
        index: FGRAGIndex,
        llm: LLM | None = None,
        retriever: FGRAGRetriever | None = None,
        max_query_entities: int = 9,
        max_questions: int = 10,
        max_context_tokens: int | None = None,
        streaming: bool = False,
        cache_path: str | None = None,
        num_workers: int = 4,
        callback_manager: CallbackManager | None = None,
        **retriever_kwargs: Any,
    ) -> None:
        if max_query_entities <= 0 or max_questions <= 0 or num_workers <= 0:
            raise ValueError("max_query_entities, max_questions and num_workers must be > 0")
        resolved = resolve_llm(llm)
        if resolved is None:
            raise ValueError(
                "FGRAGQueryEngine needs an LLM for its map-reduce; without one use "
                "index.as_retriever() (LLM-free context-aware entity expansion)"
            )
        self._llm = resolved
        self._index = index
        retriever_kwargs.setdefault("max_query_entities", max_query_entities)
        self._retriever = retriever or FGRAGRetriever(index, **retriever_kwargs)
        self.max_query_entities = max_query_entities
        self.max_questions = max_questions
        window = getattr(resolved.metadata, "context_window", 4096) or 4096
        self.max_context_tokens = max_context_tokens or max(256, min(8000, window - PROMPT_RESERVE))
        self.streaming = streaming
        self.num_workers = num_workers
        self._cache = LLMCache(cache_path) if cache_path else None
        self._entity_fallbacks = 0
        self._lock = threading.Lock()
        self._prompts: dict[str, BasePromptTemplate] = {
            "query_entities": QUERY_ENTITIES_PROMPT,
            "questions": QUESTIONS_PROMPT,
            "summary": SUMMARY_PROMPT,
            "answer": ANSWER_PROMPT,
        }
        super().__init__(callback_manager=callback_manager)

    # ----------------------------------------------------------------- prompts

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
        return self._entity_fallbacks

    # ----------------------------------------------------------------- steps

    async def aquery_entities(self, query: str, llm: StructuredLLM) -> list[str]:
        """Eq. 8: the query's entities from the LLM (spaCy's if the answer is unusable)."""
        answer = await llm.acomplete(self._prompts["query_entities"].format(query_str=query))
        entities = _clean_lines(answer, self.max_query_entities, max_words=8)
        if not entities:
            with self._lock:
                self._entity_fallbacks += 1
            logger.warning("FG-RAG: no usable query entities from the LLM; using spaCy's")
            entities = spacy_query_entities(query, self.max_query_entities)
        return entities

    def _context(self, expansion: Expansion) -> str:
        """The descriptions of one expansion as lines, within the token budget."""
        lines, used = [], 0
        for d in expansion.descriptions:
            line = f"- {d.text}"
            cost = estimate_tokens(line)
            if used + cost > self.max_context_tokens:
                break
            lines.append(line)
            used += cost
        return "\n".join(lines) if lines else "(no information found)"

    async def _amap_one(
        self, query: str, unit: str, expansion: Expansion, llm: StructuredLLM
    ) -> dict[str, Any]:
        """Eqs. 10-11 for one unit: follow-up questions, then the focused summary."""
        asked = await llm.acomplete(
            self._prompts["questions"].format(
                query_str=query, entity=unit, max_questions=self.max_questions
            )
        )
        questions = _clean_lines(asked, self.max_questions, max_words=40)
        # The authors put the query itself first in the questions block.
        question_block = "\n".join([f"**{query}**", *questions])
        summary = await llm.acomplete(
            self._prompts["summary"].format(
                entity=unit, context_str=self._context(expansion), questions=question_block
            )
        )
        return {
            "entity": unit,
            "questions": questions,
            **expansion.as_evidence(),
            "summary": summary.strip(),
        }

    async def _amap(self, query: str, llm: StructuredLLM) -> tuple[list[dict[str, Any]], list]:
        entities = await self.aquery_entities(query, llm)
        expansions = await asyncio.to_thread(self._retriever.expand, query, entities)
        units = [(e.query_entity, e) for e in expansions]
        results = await llm.amap(
            units,
            lambda item: self._amap_one(query, item[0], item[1], llm),
            return_exceptions=True,
            desc="FG-RAG map",
        )
        maps = []
        for (unit, _), result in zip(units, results, strict=True):
            if isinstance(result, BaseException):
                logger.warning("FG-RAG: summary for %r failed: %s", unit, result)
                continue
            maps.append(result)
        sources = self._retriever.rank_chunks(expansions)
        return maps, sources

    def reduce_prompt(self, query: str, maps: list[dict[str, Any]]) -> str:
        """Eq. 12's prompt: the query and the per-unit summaries, within the budget."""
        parts = [f"## {m['entity']}\n{m['summary']}" for m in maps if m.get("summary")]
        context = truncate_tokens("\n\n".join(parts), self.max_context_tokens) if parts else ""
        return self._prompts["answer"].format(context_str=context or "(no notes)", query_str=query)

    def _new_llm(self) -> StructuredLLM:
        return StructuredLLM(
            self._llm, cache=self._cache, max_concurrency=self.num_workers, meter=UsageMeter()
        )

    def _metadata(self, maps, llm: StructuredLLM) -> dict[str, Any]:
        return {"fgrag": maps, "usage": llm.meter.snapshot()}

    # ----------------------------------------------------------------- query

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        query = query_bundle.query_str
        llm = self._new_llm()
        maps, sources = await self._amap(query, llm)
        prompt = self.reduce_prompt(query, maps)
        if self.streaming:
            return self._stream(prompt, maps, sources, llm)
        answer = await llm.acomplete(prompt)
        return Response(
            response=answer.strip(), source_nodes=sources, metadata=self._metadata(maps, llm)
        )

    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        if self.streaming:
            llm = self._new_llm()
            query = query_bundle.query_str
            maps, sources = run_sync(lambda: self._amap(query, llm))
            return self._stream(self.reduce_prompt(query, maps), maps, sources, llm)
        return run_sync(lambda: self._aquery(query_bundle))

    def _stream(self, prompt: str, maps, sources, llm: StructuredLLM) -> StreamingResponse:
        """The reduce step as a token stream; usage is counted when the stream ends."""
        metadata = self._metadata(maps, llm)

        def generate() -> Generator[str, None, None]:
            text = ""
            llm.meter.add(calls=1)
            for chunk in self._llm.stream_complete(prompt):
                delta = chunk.delta or ""
                text += delta
                yield delta
            llm.meter.add(
                prompt_tokens=estimate_tokens(prompt), completion_tokens=estimate_tokens(text)
            )
            metadata["usage"] = llm.meter.snapshot()

        return StreamingResponse(response_gen=generate(), source_nodes=sources, metadata=metadata)
