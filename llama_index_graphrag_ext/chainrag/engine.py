"""``ChainRAGQueryEngine``: decompose, retrieve progressively with rewriting, integrate (paper §3.2-§3.4)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import RESPONSE_TYPE, Response, StreamingResponse
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.cache import LLMCache
from ..core.embeddings import embed_query
from ..core.llm import LLMOutputError, StructuredLLM, UsageMeter, run_sync
from ..core.nodes import with_evidence
from .prompts import (
    ANSWER_INTEGRATION_PROMPT,
    CONTEXT_INTEGRATION_PROMPT,
    DECOMPOSE_PROMPT,
    REWRITE_PROMPT,
    SUBANSWER_PROMPT,
    SUFFICIENCY_PROMPT,
    SUMMARY_PROMPT,
    is_unanswered,
    missing_entity,
    parse_yes,
)
from .retriever import SearchState, SentenceSearch, describe_sentence, word_count
from .sentence_graph import EDGE_KINDS

if TYPE_CHECKING:
    from .index import SentenceGraphIndex

logger = logging.getLogger(__name__)

INTEGRATIONS = ("answer", "context")


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


def _is_embedded_tiny(llm: Any) -> bool:
    path = str(getattr(llm, "model_path", "") or "").lower()
    return type(llm).__name__ == "LlamaCPP" and "smollm" in path


def _validate_subquestions(value: Any) -> list[str]:
    if isinstance(value, dict):
        value = next((v for v in value.values() if isinstance(v, list)), None)
    if not isinstance(value, list):
        raise ValueError("expected a JSON array of sub-questions")
    out = [str(v).strip() for v in value if isinstance(v, str | int | float) and str(v).strip()]
    if not out:
        raise ValueError("the array holds no sub-question")
    return out


class ChainRAGQueryEngine(BaseQueryEngine):
    """ChainRAG over a :class:`~.index.SentenceGraphIndex` (paper §3.2-§3.4).

    For each question: decompose it into sub-questions (LLM, JSON); for each in
    turn, rewrite it from the earlier sub-questions and answers when it has lost
    its key entity (a pronoun or demonstrative), or add a summary of earlier
    contexts that went unanswered; retrieve seed sentences and expand over the
    graph, asking the LLM after each expansion whether the sentences suffice, up
    to the word budget; answer it. The final answer integrates the sub-answers
    (``integration="answer"``, AnsInt) or the merged, reranked sentences
    (``"context"``, CxtInt). The response's ``metadata["chain"]`` holds every
    step; ``metadata["usage"]`` the LLM calls and tokens of this question.

    Args:
        index: The sentence graph index.
        llm: The LLM; falls back to the index's (explicit, ``Settings``, environment).
        integration: ``"answer"`` (AnsInt) or ``"context"`` (CxtInt).
        max_subquestions: Sub-questions kept from a decomposition.
        max_hops: Expansions per sub-question at most (the budget usually stops first).
        candidate_k / seed_k / edge_kinds / word_budget / reranker: As in
            :class:`~.retriever.SentenceSearch`.
        decompose: ``None`` decides by model: the embedded SmolLM2 cannot write
            JSON, so the question is kept whole (logged); True/False force it.
        cache: Optional LLM response cache (a re-run then costs no calls).
        streaming: Stream the final synthesis.
        similarity_top_k: Source chunks returned with the response.
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
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if integration not in INTEGRATIONS:
            raise ValueError(f"integration must be one of {INTEGRATIONS}, got {integration!r}")
        if max_subquestions <= 0 or max_hops <= 0 or similarity_top_k <= 0:
            raise ValueError("max_subquestions, max_hops and similarity_top_k must be positive")
        self.index = index
        self.llm = llm if llm is not None else index.llm
        if self.llm is None:
            raise ValueError(
                "ChainRAGQueryEngine needs an LLM; use index.as_retriever() for LLM-free retrieval"
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
        self.decompose = (not _is_embedded_tiny(self.llm)) if decompose is None else decompose
        if not self.decompose:
            logger.info("ChainRAG: decomposition off for %s (keeps the question whole)", self.llm)
        self.cache = cache
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

    async def _decompose(self, sllm: StructuredLLM, question: str, notes: dict) -> list[str]:
        """§3.2 / App. D: sub-questions, or the question itself on failure (counted)."""
        if not self.decompose:
            notes["decomposition"] = "skipped"
            return [question]
        prompt = self._prompts["decompose"].format(query_str=question)
        try:
            subs = await sllm.ajson(prompt, validate=_validate_subquestions)
        except LLMOutputError as exc:
            logger.warning("ChainRAG: decomposition unusable (%s); question kept whole", exc)
            notes["decomposition"] = "fallback"
            return [question]
        notes["decomposition"] = "ok"
        return subs[: self.max_subquestions]

    async def _prepare(
        self, sllm: StructuredLLM, step: ChainStep, done: list[ChainStep], states: list
    ) -> None:
        """§3.3: rewrite from earlier answers, or summarise unanswered earlier contexts."""
        if not done or not missing_entity(step.original):
            return
        unanswered = [i for i, s in enumerate(done) if not s.answered]
        if not unanswered:
            history = "\n".join(f"Q: {s.question}\nA: {s.answer}" for s in done)
            prompt = self._prompts["rewrite"].format(history_str=history, query_str=step.original)
            text = _first_line(await sllm.acomplete(prompt))
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
            parts.append((await sllm.acomplete(prompt)).strip())
        step.summary, step.action = "\n".join(p for p in parts if p), "summary"

    async def _retrieve(self, sllm: StructuredLLM, step: ChainStep) -> SearchState:
        """§3.2: seeds, then expansions each followed by the LLM's sufficiency check."""
        vector = embed_query(self.index.embed_model, step.question)
        state = self.search.start(step.question, vector)
        step.stopped = "max_hops"
        for _ in range(self.max_hops):
            if not self.search.expand(state):
                step.stopped = "budget" if state.budget_hit else "exhausted"
                break
            prompt = self._prompts["sufficiency"].format(
                context_str=state.context(), query_str=step.question
            )
            if parse_yes(await sllm.acomplete(prompt)):
                step.stopped = "sufficient"
                break
            if state.budget_hit:
                step.stopped = "budget"
                break
        step.hops = state.hops
        step.sentences = [describe_sentence(state.graph, g) for g in state.sentences()]
        return state

    async def _answer_step(self, sllm: StructuredLLM, step: ChainStep, state: SearchState) -> None:
        context = state.context()
        if step.summary:
            context = f"{context}\nEarlier findings: {step.summary}"
        prompt = self._prompts["subanswer"].format(context_str=context, query_str=step.question)
        step.answer = _first_line(await sllm.acomplete(prompt))
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

    async def _run_chain(self, question: str, meter: UsageMeter) -> tuple[str, dict[str, Any]]:
        """Everything up to the final prompt; returns it and the response metadata."""
        sllm = StructuredLLM(self.llm, cache=self.cache, meter=meter)
        notes: dict[str, Any] = {}
        subs = await self._decompose(sllm, question, notes)
        chain: list[ChainStep] = []
        states: list[SearchState] = []
        for sub in subs:
            step = ChainStep(original=sub, question=sub)
            await self._prepare(sllm, step, chain, states)
            state = await self._retrieve(sllm, step)
            await self._answer_step(sllm, step, state)
            chain.append(step)
            states.append(state)
        merged = self._merged_rows(question, states)
        meta = {
            "chain": [asdict(s) for s in chain],
            "integration": self.integration,
            "notes": notes,
            "_merged": merged,
            "_states": states,
        }
        return self._final_prompt(question, chain, merged, states), meta

    def _finish(self, meta: dict[str, Any], meter: UsageMeter) -> tuple[list, dict]:
        merged, states = meta.pop("_merged"), meta.pop("_states")
        meta["usage"] = meter.snapshot()
        return self._sources(merged, states), meta

    # ---------------------------------------------------------------- engine API

    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        if self.streaming:
            meter = UsageMeter()
            prompt, meta = run_sync(lambda: self._run_chain(query_bundle.query_str, meter))
            meter.add(calls=1)  # the streamed synthesis is not cached
            sources, meta = self._finish(meta, meter)
            gen = (r.delta or "" for r in self.llm.stream_complete(prompt))
            return StreamingResponse(response_gen=gen, source_nodes=sources, metadata=meta)
        return run_sync(lambda: self._aquery(query_bundle))

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        meter = UsageMeter()
        prompt, meta = await self._run_chain(query_bundle.query_str, meter)
        sllm = StructuredLLM(self.llm, cache=self.cache, meter=meter)
        answer = _first_line(await sllm.acomplete(prompt))
        sources, meta = self._finish(meta, meter)
        return Response(response=answer, source_nodes=sources, metadata=meta)


def _first_line(text: str) -> str:
    """The first non-empty line of an LLM reply, stripped of quotes and a label."""
    for line in str(text).strip().splitlines():
        line = line.strip().strip('"').strip()
        for label in ("Answer:", "Rewritten:", "Reply:"):
            if line.lower().startswith(label.lower()):
                line = line[len(label) :].strip()
        if line:
            return line
    return ""
