"""Progressive retrieval with sufficiency checks, and the sub-answer (ChainRAG §3.2).

Seeds, then graph expansions (:class:`~.search.SentenceSearch`), each followed by the
LLM's verdict on whether the sentences suffice; the search stops when they do, at
the word budget (§4.1), when the graph has nothing left, or after ``max_hops``. An
unreadable verdict counts as "not yet", as without an LLM.
"""

from __future__ import annotations

import asyncio

from llama_index.core.base.embeddings.base import BaseEmbedding

from ..core.embeddings import embed_query
from ..core.llm import LLMCaller, LLMOutputError, is_unanswered, parse_answer, parse_yes_no
from .chain import ChainCalls, ChainStep
from .search import SearchState, SentenceSearch, describe_sentence


async def retrieve(
    calls: ChainCalls,
    llm: LLMCaller,
    search: SentenceSearch,
    embed_model: BaseEmbedding,
    step: ChainStep,
    notes: dict,
    *,
    max_hops: int,
) -> SearchState:
    """Seeds, then expansions each followed by the LLM's sufficiency check (the search
    runs in worker threads); sets ``step.stopped``, ``hops`` and ``sentences``."""
    vector = await asyncio.to_thread(embed_query, embed_model, step.question)
    state = await asyncio.to_thread(search.start, step.question, vector)
    step.stopped = "max_hops"
    for _ in range(max_hops):
        if not await asyncio.to_thread(search.expand, state):
            step.stopped = "budget" if state.budget_hit else "exhausted"
            break
        prompt = calls.prompts["sufficiency"].format(
            context_str=state.context(), query_str=step.question
        )
        calls.llm_steps.count("sufficiency", 1)
        try:
            reply = await calls.text(llm, "sufficiency", prompt)
            verdict = parse_yes_no(reply)
            if verdict is None:
                raise LLMOutputError("the sufficiency reply says neither yes nor no", reply)
        except Exception as exc:  # counted; the search goes on
            calls.fell_back("sufficiency", exc, notes, what="check")
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


async def answer_subquestion(
    calls: ChainCalls, llm: LLMCaller, step: ChainStep, state: SearchState, notes: dict
) -> None:
    """The sub-answer from the gathered sentences (and any summary of unanswered ones)."""
    context = state.context()
    if step.summary:
        context = f"{context}\nEarlier findings: {step.summary}"
    prompt = calls.prompts["subanswer"].format(context_str=context, query_str=step.question)
    try:
        step.answer = parse_answer(await calls.text(llm, "subanswer", prompt, notes))
    except Exception as exc:  # counted; the hop stays unanswered and the chain goes on
        calls.fell_back("answer", exc, notes, what="sub-answer")
        step.answer, step.answered = "", False
        return
    step.answered = not is_unanswered(step.answer)
