"""``ChainRAGQueryEngine``: the chain of ChainRAG's steps (paper §3.2-§3.4).

| step | paper | module |
|---|---|---|
| decomposition into sub-questions | §3.2, App. D | :mod:`.decompose` |
| rewriting, or a summary of unanswered contexts | §3.3 | :mod:`.rewriting` |
| seeds, expansions with sufficiency checks, sub-answer | §3.2 | :mod:`.progressive` |
| answer or context integration | §3.4 | :mod:`.integration` |

Fallbacks are counted per query in :attr:`ChainRAGQueryEngine.llm_steps`: an unusable
decomposition keeps the question whole; an unreadable sufficiency reply counts as
"not yet". The embedded SmolLM2 cannot write the decomposition's JSON, so with it
that step runs LLM-free.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import asdict
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
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.schema import QueryBundle

from ..core.llm import (
    LLMCaller,
    LLMChoice,
    LLMSteps,
    UsageMeter,
    choose_llm,
    on_suite_loop,
    parse_answer,
    reason_of,
    run_sync,
)
from .chain import BUDGET, ChainCalls, ChainStep
from .config import ChainRAGConfig
from .decompose import decompose
from .integration import final_prompt, merged_rows, sources
from .progressive import answer_subquestion, retrieve
from .prompts import (
    ANSWER_INTEGRATION_PROMPT,
    CONTEXT_INTEGRATION_PROMPT,
    DECOMPOSE_PROMPT,
    REWRITE_PROMPT,
    SUBANSWER_PROMPT,
    SUFFICIENCY_PROMPT,
    SUMMARY_PROMPT,
)
from .rewriting import prepare
from .search import SearchState, SentenceSearch

logger = logging.getLogger(__name__)


def words_that_fit(llm: LLM, reserve_tokens: int = 400, words_per_token: float = 0.6) -> int:
    """Words of gathered sentences a prompt can carry within the LLM's context window,
    beside the answer (``num_output``) and the prompt's own text (``reserve_tokens``)."""
    meta = llm.metadata
    room = int(meta.context_window) - int(meta.num_output or 0) - reserve_tokens
    return max(50, int(room * words_per_token))


class ChainRAGQueryEngine(BaseQueryEngine):
    """ChainRAG over a :class:`~.index.SentenceGraphIndex` (paper §3.2-§3.4; see the module).

    The response's ``metadata["chain"]`` holds every step; ``metadata["usage"]``
    the LLM calls and tokens of this question.

    Args:
        llm: The LLM (default: the index's), picked once.
        config: A :class:`~.config.ChainRAGConfig` or preset name (default: the
            index's); its ``retrieval``, ``answer`` and ``llm`` sections are used.
        similarity_top_k: Source chunks returned with the response.
        reranker: Any LlamaIndex reranking postprocessor (cosine when ``None``).
        **overrides: Config fields by name (``integration="answer"``, ``max_hops=1``).
    """

    def __init__(
        self,
        index: Any,
        llm: LLM | None = None,
        *,
        config: ChainRAGConfig | str | None = None,
        similarity_top_k: int = 10,
        streaming: bool = False,
        reranker: BaseNodePostprocessor | None = None,
        callback_manager: CallbackManager | None = None,
        **overrides: Any,
    ) -> None:
        if similarity_top_k <= 0:
            raise ValueError("similarity_top_k must be positive")
        base = index.config if config is None else ChainRAGConfig.resolve(config)
        self.config = base.at_query_time(overrides, "retrieval", "answer", "llm")
        self.params = self.config.answer
        self.index = index
        choice: LLMChoice = choose_llm(llm) if llm is not None else index.llm_choice
        if choice.llm is None:
            raise ValueError(
                "ChainRAGQueryEngine needs an LLM; use index.as_retriever() for LLM-free retrieval"
            )
        self.llm = choice.llm
        self.llm_settings = self.config.llm
        self._caller = self.llm_settings.new_caller(self.llm)
        #: Which LLM and tier each step used, and the per-query fallbacks.
        self.llm_steps = LLMSteps("ChainRAG engine")
        self._decompose = self._plan_steps(choice)
        retrieval = self.config.retrieval
        word_budget = min(retrieval.word_budget, words_that_fit(self.llm))
        if word_budget < retrieval.word_budget:
            # The paper's 3,000 words assume a long-context LLM.
            logger.info(
                "ChainRAG: word budget %d cut to %d to fit %s's context window",
                retrieval.word_budget,
                word_budget,
                type(self.llm).__name__,
            )
        # Sub-questions are completed by the LLM (§3.3): neighbours are scored against
        # them, not by the LLM-free retriever's propagated scores.
        params = retrieval.model_copy(
            update={"word_budget": word_budget, "neighbor_score": "question"}
        )
        self.search = SentenceSearch(index, params, reranker)
        self.streaming = streaming
        self.similarity_top_k = int(similarity_top_k)
        self._prompts: dict[str, BasePromptTemplate] = {
            "decompose": DECOMPOSE_PROMPT,
            "rewrite": REWRITE_PROMPT,
            "summary": SUMMARY_PROMPT,
            "sufficiency": SUFFICIENCY_PROMPT,
            "subanswer": SUBANSWER_PROMPT,
            "answer_integration": ANSWER_INTEGRATION_PROMPT,
            "context_integration": CONTEXT_INTEGRATION_PROMPT,
        }
        self._calls = ChainCalls(self._prompts, self.llm_steps, self.llm_settings)
        super().__init__(callback_manager=callback_manager or index._callback_manager)

    def _plan_steps(self, choice: LLMChoice) -> bool:
        """Plan each LLM step's tier; True when the question is decomposed."""
        on_failure = self.llm_settings.on_llm_failure

        def plan(step: str, needs: str, stand_in: str, failure: str = on_failure):
            return self.llm_steps.plan(
                step, choice, needs=needs, stand_in=stand_in, on_failure=failure
            )

        plan("answer", "text", "none (the engine needs an LLM)")
        wanted, enabled = self.params.decompose, False
        if wanted is not False:  # None: planned, falls back; True: as on_llm_failure says
            failure = on_failure if wanted else "fallback"
            enabled = plan("decompose", "json", "the question kept whole", failure) is not None
        plan("rewrite", "text", "the sub-question as decomposed")
        plan("sufficiency", "text", "expand until the budget (the LLM-free schedule)")
        return enabled

    # ---------------------------------------------------------------- prompts

    def _get_prompts(self) -> PromptDictType:
        return dict(self._prompts)

    def _update_prompts(self, prompts: PromptDictType) -> None:
        for name, prompt in prompts.items():
            if name in self._prompts:
                self._prompts[name] = prompt

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    # ---------------------------------------------------------------- the chain

    async def _run_chain(self, question: str, llm: LLMCaller) -> tuple[str, dict[str, Any], list]:
        """Everything up to the final prompt: ``(prompt, metadata, sources)``."""
        notes: dict[str, Any] = {}
        subs = await decompose(
            self._calls,
            llm,
            question,
            notes,
            enabled=self._decompose,
            max_subquestions=self.params.max_subquestions,
        )
        chain: list[ChainStep] = []
        states: list[SearchState] = []
        for sub in subs:
            step = ChainStep(original=sub, question=sub)
            await prepare(self._calls, llm, step, chain, states)
            state = await retrieve(
                self._calls,
                llm,
                self.search,
                self.index.embed_model,
                step,
                notes,
                max_hops=self.params.max_hops,
            )
            await answer_subquestion(self._calls, llm, step, state, notes)
            chain.append(step)
            states.append(state)
        merged = await asyncio.to_thread(
            merged_rows, self.search, self.index.embed_model, question, states
        )
        prompt = final_prompt(
            self._prompts,
            self.params.integration,
            question,
            chain,
            merged,
            states,
            index=self.index,
            word_budget=self.search.params.word_budget,
        )
        found = await asyncio.to_thread(sources, self.index, merged, states, self.similarity_top_k)
        meta = {
            "chain": [asdict(s) for s in chain],
            "integration": self.params.integration,
            "notes": notes,
        }
        return prompt, meta, found

    # ---------------------------------------------------------------- engine API

    async def _answer(self, question: str) -> Response:
        meter = UsageMeter()
        llm = self._caller.with_meter(meter)
        prompt, meta, sources = await self._run_chain(question, llm)
        try:
            answer = parse_answer(await self._calls.text(llm, "final", prompt, meta["notes"]))
        except Exception as exc:  # no stand-in for the answer itself: counted, then raised
            self._calls.llm_steps.fell_back("answer", [reason_of(exc)], what="final answer")
            raise
        meta["answer_cut"] = "final" in meta["notes"].get("cut", ())
        meta["usage"] = meter.snapshot()
        return Response(response=answer, source_nodes=sources, metadata=meta)

    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        question = query_bundle.query_str
        if not self.streaming:
            return run_sync(lambda: self._answer(question))
        meter = UsageMeter()
        llm = self._caller.with_meter(meter)
        prompt, meta, sources = run_sync(lambda: self._run_chain(question, llm))
        meta["usage"] = meter.snapshot()

        def tokens():
            report: dict = {}
            try:
                yield from llm.stream(prompt, max_tokens=BUDGET["final"], report=report)
            finally:  # the streamed answer counted too, a broken one as far as it came
                meta["answer_cut"] = report.get("cut", False)
                meta["usage"] = meter.snapshot()

        return StreamingResponse(response_gen=tokens(), source_nodes=sources, metadata=meta)

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        question = query_bundle.query_str
        if not self.streaming:
            return await on_suite_loop(self._answer(question))
        meter = UsageMeter()
        llm = self._caller.with_meter(meter)
        prompt, meta, sources = await on_suite_loop(self._run_chain(question, llm))
        meta["usage"] = meter.snapshot()

        async def tokens() -> AsyncIterator[str]:
            report: dict = {}
            try:
                async for piece in llm.astream(prompt, max_tokens=BUDGET["final"], report=report):
                    yield piece
            finally:
                meta["answer_cut"] = report.get("cut", False)
                meta["usage"] = meter.snapshot()

        return AsyncStreamingResponse(response_gen=tokens(), source_nodes=sources, metadata=meta)
