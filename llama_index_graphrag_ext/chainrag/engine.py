"""``ChainRAGQueryEngine``: the chain of ChainRAG's steps (paper §3.2-§3.4).

For each question the engine runs, in order:

| step | paper | module |
|---|---|---|
| decomposition into sub-questions | §3.2, App. D | :mod:`.decompose` |
| rewriting, or a summary of unanswered contexts | §3.3 | :mod:`.rewriting` |
| seeds, expansions with sufficiency checks, sub-answer | §3.2 | :mod:`.progressive` |
| answer or context integration | §3.4 | :mod:`.integration` |

The chain's record and the calls the steps share are in :mod:`.chain`. This
module picks the LLM, plans each step's tier and runs the chain.

The LLM is picked once (``llm=``, else the index's, by the suite's rule) and
called through one :class:`~..core.llm.LLMCaller`: on the suite's event loop,
with retries, a response cache and ``max_tokens`` set per step.

Fallbacks are counted per query in :attr:`ChainRAGQueryEngine.llm_steps` (and
raise with ``on_llm_failure="raise"``): an unusable decomposition keeps the
question whole; an unreadable sufficiency reply counts as "not yet" (the
search goes on, as without an LLM). The embedded SmolLM2 cannot write the
decomposition's JSON, so with it that step runs LLM-free (planned, logged).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

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
    LLMSettings,
    LLMSteps,
    UsageMeter,
    choose_llm,
    on_suite_loop,
    parse_answer,
    run_sync,
)
from ..core.llm.cache import LLMCache
from .chain import BUDGET, ChainCalls, ChainStep
from .decompose import SubQuestions, decompose  # noqa: F401 (re-exported: its old home)
from .integration import INTEGRATIONS, final_prompt, merged_rows, sources
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
from .retriever import SearchState, SentenceSearch
from .rewriting import prepare
from .sentence_graph import EDGE_KINDS

if TYPE_CHECKING:
    from .index import SentenceGraphIndex

logger = logging.getLogger(__name__)


def words_that_fit(llm: LLM, reserve_tokens: int = 400, words_per_token: float = 0.6) -> int:
    """Words of gathered sentences a prompt can carry within the LLM's context window.

    Leaves room for the answer (``num_output``) and the prompt's own text
    (``reserve_tokens``); ``words_per_token`` is conservative for text full of names.
    """
    meta = llm.metadata
    room = int(meta.context_window) - int(meta.num_output or 0) - reserve_tokens
    return max(50, int(room * words_per_token))


class ChainRAGQueryEngine(BaseQueryEngine):
    """ChainRAG over a :class:`~.index.SentenceGraphIndex` (paper §3.2-§3.4).

    For each question: decompose it into sub-questions (structured output);
    for each in turn, rewrite it from the earlier sub-questions and answers
    when it has lost its key entity (a pronoun or demonstrative), or add a
    summary of earlier contexts that went unanswered; retrieve seed sentences
    and expand over the graph, asking the LLM after each expansion whether the
    sentences suffice, up to the word budget; answer it. The final answer
    integrates the sub-answers (``integration="answer"``, AnsInt) or the
    merged, reranked sentences (``"context"``, CxtInt). The response's
    ``metadata["chain"]`` holds every step; ``metadata["usage"]`` the LLM calls
    and tokens of this question.

    Args:
        index: The sentence graph index.
        llm: The LLM; without one, the index's (picked once by the suite's rule).
        integration: ``"answer"`` (AnsInt) or ``"context"`` (CxtInt).
        max_subquestions: Sub-questions kept from a decomposition.
        max_hops: Expansions per sub-question at most (the budget usually stops first).
        candidate_k / seed_k / edge_kinds / word_budget / reranker: As in
            :class:`~.retriever.SentenceSearch`; the reranker (any LlamaIndex
            reranking postprocessor) is asked for every candidate it ranks.
        decompose: ``None``: decompose when the LLM can write JSON (not the
            embedded SmolLM2: the question is kept whole, logged); True/False force it.
        cache: An LLM response cache (a re-run then costs no calls); or ``cache_path``.
        streaming: Stream the final synthesis.
        similarity_top_k: Source chunks returned with the response.
        max_attempts, timeout, max_concurrency, on_llm_failure, cache_path: The
            LLM call settings (see :class:`~..core.llm.LLMSettings`).
        callback_manager: LlamaIndex callbacks; falls back to ``Settings``.
    """

    def __init__(
        self,
        index: SentenceGraphIndex,
        llm: LLM | None = None,
        *,
        integration: str = "context",
        max_subquestions: int = 4,
        max_hops: int = 3,
        candidate_k: int = 100,
        seed_k: int = 3,
        edge_kinds: Sequence[str] = EDGE_KINDS,
        word_budget: int = 3000,
        reranker: BaseNodePostprocessor | None = None,
        decompose: bool | None = None,
        cache: LLMCache | None = None,
        streaming: bool = False,
        similarity_top_k: int = 10,
        max_attempts: int = 3,
        timeout: float | None = 60.0,
        max_concurrency: int = 4,
        on_llm_failure: str = "fallback",
        cache_path: str | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if integration not in INTEGRATIONS:
            raise ValueError(f"integration must be one of {INTEGRATIONS}, got {integration!r}")
        if max_subquestions <= 0 or max_hops <= 0 or similarity_top_k <= 0:
            raise ValueError("max_subquestions, max_hops and similarity_top_k must be positive")
        self.index = index
        choice: LLMChoice = choose_llm(llm) if llm is not None else index.llm_choice
        if choice.llm is None:
            raise ValueError(
                "ChainRAGQueryEngine needs an LLM; use index.as_retriever() for LLM-free retrieval"
            )
        self.llm = choice.llm
        self.llm_settings = LLMSettings(
            max_attempts=max_attempts,
            timeout=timeout,
            max_concurrency=max_concurrency,
            on_llm_failure=on_llm_failure,
            cache_path=cache_path,
        )
        self._caller = self.llm_settings.new_caller(self.llm)
        if cache is not None:
            self._caller.cache = cache
        #: Which LLM and tier each step used, and the per-query fallbacks.
        self.llm_steps = LLMSteps("ChainRAG engine")
        on_failure = self.llm_settings.on_llm_failure
        self.llm_steps.plan(
            "answer",
            choice,
            needs="text",
            stand_in="none (the engine needs an LLM)",
            on_failure=on_failure,
        )
        if decompose is False:
            self.decompose = False
        else:
            planned = self.llm_steps.plan(
                "decompose",
                choice,
                needs="json",
                stand_in="the question kept whole",
                on_failure=on_failure if decompose else "fallback",
            )
            self.decompose = planned is not None
        self.llm_steps.plan(
            "rewrite",
            choice,
            needs="text",
            stand_in="the sub-question as decomposed",
            on_failure=on_failure,
        )
        self.llm_steps.plan(
            "sufficiency",
            choice,
            needs="text",
            stand_in="expand until the budget (the LLM-free schedule)",
            on_failure=on_failure,
        )
        self.integration = integration
        self.max_subquestions = int(max_subquestions)
        self.max_hops = int(max_hops)
        fits = words_that_fit(self.llm)
        if word_budget > fits:
            # The paper's 3,000 words assume a long-context LLM; a small window
            # (the embedded SmolLM2 has 2,048 tokens) would reject the prompts.
            logger.info(
                "ChainRAG: word budget %d cut to %d to fit %s's context window",
                word_budget,
                fits,
                type(self.llm).__name__,
            )
            word_budget = fits
        self.search = SentenceSearch(
            index,
            candidate_k=candidate_k,
            seed_k=seed_k,
            edge_kinds=edge_kinds,
            word_budget=word_budget,
            reranker=reranker,
        )
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
        super().__init__(callback_manager=callback_manager)

    @property
    def cache(self) -> LLMCache | None:
        """The response cache."""
        return self._caller.cache

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
            enabled=self.decompose,
            max_subquestions=self.max_subquestions,
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
                max_hops=self.max_hops,
            )
            await answer_subquestion(self._calls, llm, step, state)
            chain.append(step)
            states.append(state)
        merged = await asyncio.to_thread(
            merged_rows, self.search, self.index.embed_model, question, states
        )
        prompt = final_prompt(
            self._prompts,
            self.integration,
            question,
            chain,
            merged,
            states,
            index=self.index,
            word_budget=self.search.word_budget,
        )
        found = await asyncio.to_thread(sources, self.index, merged, states, self.similarity_top_k)
        meta = {
            "chain": [asdict(s) for s in chain],
            "integration": self.integration,
            "notes": notes,
        }
        return prompt, meta, found

    # ---------------------------------------------------------------- engine API

    async def _answer(self, question: str) -> Response:
        meter = UsageMeter()
        llm = self._caller.with_meter(meter)
        prompt, meta, sources = await self._run_chain(question, llm)
        answer = parse_answer(await self._calls.text(llm, "final", prompt))
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
            yield from llm.stream(prompt, max_tokens=BUDGET["final"])
            meta["usage"] = meter.snapshot()  # the streamed answer counted too

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
            async for piece in llm.astream(prompt, max_tokens=BUDGET["final"]):
                yield piece
            meta["usage"] = meter.snapshot()

        return AsyncStreamingResponse(response_gen=tokens(), source_nodes=sources, metadata=meta)
