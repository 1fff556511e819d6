"""The chain's record and the LLM calls its steps share (ChainRAG §3.2-§3.4).

:class:`ChainStep` is one sub-question, filled in by the steps in turn;
:class:`ChainCalls` is what every LLM step needs from the engine: its prompts, its
step ledger and the fallback rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llama_index.core.prompts import BasePromptTemplate

from ..core.llm import LLMCaller, LLMFallbackError, LLMSettings, LLMSteps, reason_of

# max_tokens per step, with room to spare.
BUDGET = {
    "decompose": 200,
    "rewrite": 96,
    "summary": 200,
    "sufficiency": 32,
    "subanswer": 96,
    "final": 160,
}


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


class ChainCalls:
    """The engine's prompts, step ledger and fallback rule, as the steps use them.

    ``prompts`` is the engine's own dict, so ``update_prompts`` reaches the steps;
    ``settings.on_llm_failure`` decides between fallback and error.
    """

    def __init__(
        self,
        prompts: dict[str, BasePromptTemplate],
        llm_steps: LLMSteps,
        settings: LLMSettings,
    ) -> None:
        self.prompts = prompts
        self.llm_steps = llm_steps
        self.settings = settings

    def fell_back(self, step: str, exc: BaseException, notes: dict, what: str = "query") -> None:
        """Count one fallback of ``step`` (raises with ``on_llm_failure="raise"``)."""
        if isinstance(exc, LLMFallbackError):
            raise exc
        notes.setdefault("fallbacks", []).append(f"{step}: {reason_of(exc)}")
        on_failure = self.settings.on_llm_failure
        self.llm_steps.fell_back(step, [reason_of(exc)], what=what, on_failure=on_failure)

    async def text(self, llm: LLMCaller, step: str, prompt: str, notes: dict | None = None) -> str:
        """A short reply of ``step``. An answer or summary still cut after the re-asks is kept
        and named in ``notes["cut"]``; a cut verdict, or a reply with no answer at all, raises."""
        free_text = step in ("subanswer", "final", "summary")
        if free_text:
            self.llm_steps.count("answer", 1)
        reply = await llm.acomplete(prompt, max_tokens=BUDGET[step], allow_cut=free_text)
        if reply.finish_reason == "length" and notes is not None:
            notes.setdefault("cut", []).append(step)
        return reply.text
