"""Sub-question rewriting and the summary of unanswered contexts (ChainRAG §3.3).

A sub-question that lost its key entity to a pronoun ("this author", the paper's
"lost-in-retrieval") is rewritten from the earlier answers; when an earlier one went
unanswered, its contexts are summarised into the current one's instead.
"""

from __future__ import annotations

from ..core.llm import LLMCaller, parse_answer
from .chain import ChainCalls, ChainStep
from .prompts import missing_entity
from .search import SearchState


async def prepare(
    calls: ChainCalls,
    llm: LLMCaller,
    step: ChainStep,
    done: list[ChainStep],
    states: list[SearchState],
) -> None:
    """Rewrite ``step`` from earlier answers, or summarise unanswered earlier contexts.

    Sets ``step.question``, ``action`` and ``summary``; ``states`` are the searches of
    the earlier sub-questions ``done``.
    """
    if not done or not missing_entity(step.original):
        return
    unanswered = [i for i, s in enumerate(done) if not s.answered]
    if not unanswered:
        history = "\n".join(f"Q: {s.question}\nA: {s.answer}" for s in done)
        prompt = calls.prompts["rewrite"].format(history_str=history, query_str=step.original)
        calls.llm_steps.count("rewrite", 1)
        try:
            text = parse_answer(await calls.text(llm, "rewrite", prompt))
        except Exception as exc:  # counted; the sub-question stays as decomposed
            calls.fell_back("rewrite", exc, {}, what="sub-question")
            text = ""
        if text and text.lower() != step.original.lower():
            step.question, step.action = text, "rewritten"
        else:
            step.action = "rewrite-failed"
        return
    parts = []
    for i in unanswered:
        prompt = calls.prompts["summary"].format(
            question=done[i].question, context_str=states[i].context()
        )
        try:
            parts.append(parse_answer(await calls.text(llm, "summary", prompt)))
        except Exception as exc:  # counted; the summary leaves this hop out
            calls.fell_back("answer", exc, {}, what="summary")
    step.summary, step.action = "\n".join(p for p in parts if p), "summary"
