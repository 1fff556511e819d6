"""Question decomposition (ChainRAG §3.2, App. D, Fig. 8).

The LLM splits a multi-hop question into the fewest sub-questions, in order, as
structured output. The paper does not say what to do with an unusable
decomposition; we keep the question whole and count the fallback.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..core.llm import LLMCaller
from .chain import BUDGET, ChainCalls


class SubQuestions(BaseModel):
    """A decomposition (§3.2, App. D): the sub-questions, in the order to answer them."""

    questions: list[str] = Field(description="The sub-questions, fewest needed, in order.")


def _subquestions(found: SubQuestions) -> SubQuestions:
    questions = [" ".join(str(q).split()) for q in found.questions if str(q).strip()]
    if not questions:
        raise ValueError("the decomposition holds no sub-question")
    return SubQuestions(questions=questions)


async def decompose(
    calls: ChainCalls,
    llm: LLMCaller,
    question: str,
    notes: dict,
    *,
    enabled: bool,
    max_subquestions: int,
) -> list[str]:
    """Sub-questions of ``question``, or the question itself when unusable (counted).

    Args:
        notes: The response's notes; ``decomposition`` says ``ok``, ``fallback`` or ``skipped``.
        enabled: False when the engine planned the step LLM-free.
    """
    if not enabled:
        notes["decomposition"] = "skipped"
        return [question]
    calls.llm_steps.count("decompose", 1)
    prompt = calls.prompts["decompose"].format(query_str=question)
    try:
        found = await llm.astructured(
            prompt, SubQuestions, max_tokens=BUDGET["decompose"], check=_subquestions
        )
    except Exception as exc:  # counted; the question is kept whole
        calls.fell_back("decompose", exc, notes)
        notes["decomposition"] = "fallback"
        return [question]
    notes["decomposition"] = "ok"
    return found.questions[:max_subquestions]
