"""Sub-question rewriting and the summary of unanswered contexts (ChainRAG §3.3).

A later sub-question often loses its key entity to a pronoun or demonstrative
("this author"): the "lost-in-retrieval" failure the paper names. When one has
(:func:`~.prompts.missing_entity`), the LLM rewrites it from the earlier
sub-questions and their answers. When an earlier sub-question went unanswered
there is nothing to rewrite from, so the contexts it gathered are summarised
and the summary joins the current sub-question's context instead.
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

    Args:
        calls: The engine's prompts, ledger and fallback rule.
        llm: The caller of this question.
        step: The sub-question about to be retrieved; its ``question``,
            ``action`` and ``summary`` are set here.
        done: The earlier sub-questions, answered or not.
        states: Their searches, aligned with ``done``.
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
        parts.append(parse_answer(await calls.text(llm, "summary", prompt)))
    step.summary, step.action = "\n".join(p for p in parts if p), "summary"
