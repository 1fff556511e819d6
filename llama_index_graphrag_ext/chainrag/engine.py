"""``ChainRAGQueryEngine``: decompose, retrieve progressively with rewriting, integrate (paper §3.2-§3.4).

The LLM is picked once (``llm=``, else the index's, by the suite's rule) and
called through one :class:`~..core.llm.LLMCaller`: on the suite's event loop,
with retries, a response cache and ``max_tokens`` set per step. Replies are
read as real models write them: reasoning blocks dropped, labels such as
"Rewritten question:" stripped, "Based on the context, yes" read as yes,
"I don't know" or "Not specified" read as unanswered. The graph search and the
embedding run in worker threads, so ``aquery`` never blocks its loop.

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
from dataclasses import asdict, dataclass, field
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
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import BaseModel, Field

from ..core.embeddings import embed_query
from ..core.llm import (
    LLMCaller,
    LLMChoice,
    LLMFallbackError,
    LLMOutputError,
    LLMSettings,
    LLMSteps,
    UsageMeter,
    choose_llm,
    is_unanswered,
    on_suite_loop,
    parse_answer,
    parse_yes_no,
    reason_of,
    run_sync,
)
from ..core.llm.cache import LLMCache
from ..core.nodes import with_evidence
from .prompts import (
    ANSWER_INTEGRATION_PROMPT,
    CONTEXT_INTEGRATION_PROMPT,
    DECOMPOSE_PROMPT,
    REWRITE_PROMPT,
    SUBANSWER_PROMPT,
    SUFFICIENCY_PROMPT,
    SUMMARY_PROMPT,
    missing_entity,
)
from .retriever import SearchState, SentenceSearch, describe_sentence, word_count
from .sentence_graph import EDGE_KINDS

if TYPE_CHECKING:
    from .index import SentenceGraphIndex

logger = logging.getLogger(__name__)

INTEGRATIONS = ("answer", "context")

# Reply budgets (max_tokens) per step: what each reply needs, with room to spare.
_BUDGET = {
    "decompose": 200,
    "rewrite": 96,
    "summary": 200,
    "sufficiency": 32,
    "subanswer": 96,
    "final": 160,
}


class SubQuestions(BaseModel):
    """A decomposition (§3.2, App. D): the sub-questions, in the order to answer them."""

    questions: list[str] = Field(description="The sub-questions, fewest needed, in order.")


@dataclass
class ChainStep:
    """One sub-question of the chain, as the response reports it.

    Attributes:
        original: The sub-question as decomposed.
        question: The sub-question retrieved and answered (after rewriting).
        action: ``none``, ``rewritten``, ``summary`` (an earlier one went
            unanswered) or ``rewrite-failed``.
        answer: The sub-answer.
        answered: False when the answer says it could not answer.
        hops: Graph expansions made; ``stopped`` says why they stopped.
        stopped: ``sufficient``, ``budget``, ``exhausted`` or ``max_hops``.
        sentences: The gathered sentences (text, score, role, hop, edges).
        summary: The summary of unanswered earlier contexts, when one was made.
    """

    original: str
    question: str
    action: str = "none"
    answer: str = ""
    answered: bool = False
    hops: int = 0
    stopped: str = ""
    sentences: list[dict[str, Any]] = field(default_factory=list)
    summary: str = ""


def words_that_fit(llm: LLM, reserve_tokens: int = 400, words_per_token: float = 0.6) -> int:
    """Words of gathered sentences a prompt can carry within the LLM's context window.

    Leaves room for the answer (``num_output``) and the prompt's own text
    (``reserve_tokens``); ``words_per_token`` is conservative for text full of names.
    """
    meta = llm.metadata
    room = int(meta.context_window) - int(meta.num_output or 0) - reserve_tokens
    return max(50, int(room * words_per_token))


def _subquestions(found: SubQuestions) -> SubQuestions:
    questions = [" ".join(str(q).split()) for q in found.questions if str(q).strip()]
    if not questions:
        raise ValueError("the decomposition holds no sub-question")
    return SubQuestions(questions=questions)


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

    # ---------------------------------------------------------------- steps

    def _fell_back(self, step: str, exc: BaseException, notes: dict, what: str = "query") -> None:
        """Count one fallback of ``step`` (raises with ``on_llm_failure="raise"``)."""
        if isinstance(exc, LLMFallbackError):
            raise exc
        notes.setdefault("fallbacks", []).append(f"{step}: {reason_of(exc)}")
        on_failure = self.llm_settings.on_llm_failure
        self.llm_steps.fell_back(step, [reason_of(exc)], what=what, on_failure=on_failure)

    async def _text(self, llm: LLMCaller, step: str, prompt: str) -> str:
        """A short reply of ``step`` (reasoning dropped).

        Answers and summaries still cut after the re-asks with more room are kept
        (counted in the usage's ``truncated``); a cut sufficiency verdict is not.
        """
        free_text = step in ("subanswer", "final", "summary")
        if free_text:
            self.llm_steps.count("answer", 1)
        reply = await llm.acomplete(prompt, max_tokens=_BUDGET[step], allow_cut=free_text)
        return reply.text

    async def _decompose(self, llm: LLMCaller, question: str, notes: dict) -> list[str]:
        """§3.2 / App. D: sub-questions, or the question itself when unusable (counted)."""
        if not self.decompose:
            notes["decomposition"] = "skipped"
            return [question]
        self.llm_steps.count("decompose", 1)
        prompt = self._prompts["decompose"].format(query_str=question)
        try:
            found = await llm.astructured(
                prompt, SubQuestions, max_tokens=_BUDGET["decompose"], check=_subquestions
            )
        except Exception as exc:  # counted; the question is kept whole
            self._fell_back("decompose", exc, notes)
            notes["decomposition"] = "fallback"
            return [question]
        notes["decomposition"] = "ok"
        return found.questions[: self.max_subquestions]

    async def _prepare(
        self, llm: LLMCaller, step: ChainStep, done: list[ChainStep], states: list
    ) -> None:
        """§3.3: rewrite from earlier answers, or summarise unanswered earlier contexts."""
        if not done or not missing_entity(step.original):
            return
        unanswered = [i for i, s in enumerate(done) if not s.answered]
        if not unanswered:
            history = "\n".join(f"Q: {s.question}\nA: {s.answer}" for s in done)
            prompt = self._prompts["rewrite"].format(history_str=history, query_str=step.original)
            self.llm_steps.count("rewrite", 1)
            try:
                text = parse_answer(await self._text(llm, "rewrite", prompt))
            except Exception as exc:  # counted; the sub-question stays as decomposed
                self._fell_back("rewrite", exc, {}, what="sub-question")
                text = ""
            if text and text.lower() != step.original.lower():
                step.question, step.action = text, "rewritten"
            else:
                step.action = "rewrite-failed"
            return
        parts = []
        for i in unanswered:
            prompt = self._prompts["summary"].format(
                question=done[i].question, context_str=states[i].context()
            )
            parts.append(parse_answer(await self._text(llm, "summary", prompt)))
        step.summary, step.action = "\n".join(p for p in parts if p), "summary"

    async def _retrieve(self, llm: LLMCaller, step: ChainStep, notes: dict) -> SearchState:
        """§3.2: seeds, then expansions each followed by the LLM's sufficiency check."""
        vector = await asyncio.to_thread(embed_query, self.index.embed_model, step.question)
        state = await asyncio.to_thread(self.search.start, step.question, vector)
        step.stopped = "max_hops"
        for _ in range(self.max_hops):
            if not await asyncio.to_thread(self.search.expand, state):
                step.stopped = "budget" if state.budget_hit else "exhausted"
                break
            prompt = self._prompts["sufficiency"].format(
                context_str=state.context(), query_str=step.question
            )
            self.llm_steps.count("sufficiency", 1)
            try:
                reply = await self._text(llm, "sufficiency", prompt)
                verdict = parse_yes_no(reply)
                if verdict is None:
                    raise LLMOutputError("the sufficiency reply says neither yes nor no", reply)
            except Exception as exc:  # counted; the search goes on, as without an LLM
                self._fell_back("sufficiency", exc, notes, what="check")
                verdict = False
            if verdict:
                step.stopped = "sufficient"
                break
            if state.budget_hit:
                step.stopped = "budget"
                break
        step.hops = state.hops
        step.sentences = [describe_sentence(state.graph, g) for g in state.sentences()]
        return state

    async def _answer_step(self, llm: LLMCaller, step: ChainStep, state: SearchState) -> None:
        context = state.context()
        if step.summary:
            context = f"{context}\nEarlier findings: {step.summary}"
        prompt = self._prompts["subanswer"].format(context_str=context, query_str=step.question)
        step.answer = parse_answer(await self._text(llm, "subanswer", prompt))
        step.answered = not is_unanswered(step.answer)

    def _merged_rows(self, question: str, states: list[SearchState]) -> list[tuple[int, float]]:
        """§3.4 CxtInt: all sub-questions' sentences, deduplicated, reranked to the question."""
        if not states:
            return []
        sg = states[0].graph
        rows = list(dict.fromkeys(r for st in states for r in st.gathered))
        if not rows:
            return []
        qv = embed_query(self.index.embed_model, question)
        probe = SearchState(query=question, graph=sg, query_vector=qv, candidates=[])
        return self.search._rerank(probe, rows, sg.vectors[rows] @ qv)

    def _final_prompt(self, question: str, chain: list[ChainStep], merged, states) -> str:
        if self.integration == "answer":
            lines = "\n".join(f"{i}. {s.question} -> {s.answer}" for i, s in enumerate(chain, 1))
            return self._prompts["answer_integration"].format(chain_str=lines, query_str=question)
        sg = states[0].graph if states else self.index.sentence_graph
        kept, words = [], 0
        for row, _ in merged:
            text = sg.text(row)
            words += word_count(text)
            if words > self.search.word_budget and kept:
                break
            kept.append(text)
        return self._prompts["context_integration"].format(
            context_str="\n".join(kept), query_str=question
        )

    def _sources(self, merged, states) -> list[NodeWithScore]:
        if not states:
            return []
        sg = states[0].graph
        best: dict[str, tuple[float, list[str]]] = {}
        for row, score in merged:
            chunk_id = sg.chunk_id(row)
            if chunk_id not in best:
                best[chunk_id] = (score, [])
            best[chunk_id][1].append(sg.text(row))
        order = list(best)[: self.similarity_top_k]
        chunks = {n.node_id: n for n in self.index.get_chunks(order)}
        return [
            with_evidence(
                chunks[c],
                best[c][0],
                {"method": "chainrag-engine", "rank": i, "sentences": best[c][1]},
            )
            for i, c in enumerate(order, start=1)
        ]

    async def _run_chain(self, question: str, llm: LLMCaller) -> tuple[str, dict[str, Any], list]:
        """Everything up to the final prompt: ``(prompt, metadata, sources)``."""
        notes: dict[str, Any] = {}
        subs = await self._decompose(llm, question, notes)
        chain: list[ChainStep] = []
        states: list[SearchState] = []
        for sub in subs:
            step = ChainStep(original=sub, question=sub)
            await self._prepare(llm, step, chain, states)
            state = await self._retrieve(llm, step, notes)
            await self._answer_step(llm, step, state)
            chain.append(step)
            states.append(state)
        merged = await asyncio.to_thread(self._merged_rows, question, states)
        prompt = self._final_prompt(question, chain, merged, states)
        sources = await asyncio.to_thread(self._sources, merged, states)
        meta = {
            "chain": [asdict(s) for s in chain],
            "integration": self.integration,
            "notes": notes,
        }
        return prompt, meta, sources

    # ---------------------------------------------------------------- engine API

    async def _answer(self, question: str) -> Response:
        meter = UsageMeter()
        llm = self._caller.with_meter(meter)
        prompt, meta, sources = await self._run_chain(question, llm)
        answer = parse_answer(await self._text(llm, "final", prompt))
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
            yield from llm.stream(prompt, max_tokens=_BUDGET["final"])
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
            async for piece in llm.astream(prompt, max_tokens=_BUDGET["final"]):
                yield piece
            meta["usage"] = meter.snapshot()

        return AsyncStreamingResponse(response_gen=tokens(), source_nodes=sources, metadata=meta)
