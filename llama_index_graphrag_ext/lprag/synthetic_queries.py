"""LLM-written questions for batches of chunks: the paper's synthetic queries (§3.2, Eq. 3).

Batches whose call fails or whose reply holds no question are counted; the index
gives them pseudo-queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType

from ..core.llm import LLMOutputError, LLMSettings, UsageMeter, reason_of
from .chunker import parse_bracketed_items
from .prompts import SYNTHETIC_QUERY_PROMPT


class SyntheticQueryGenerator(PromptMixin):
    """LLM-written questions for batches of chunks (LP-RAG Eq. 3, Box D.3 format).

    Args:
        per_batch: Questions kept per batch (``n_B = 2``; extra ones are dropped,
            conflict C3).
        max_chunk_chars: Each chunk is clipped to this many characters in the prompt.
        settings: The LLM call settings (:class:`~..core.llm.LLMSettings`).
        meter: Where calls and tokens are counted (default: :attr:`usage`, its own).
    """

    def __init__(
        self,
        llm: LLM,
        *,
        per_batch: int = 2,
        max_chunk_chars: int = 600,
        min_words: int = 3,
        settings: LLMSettings | None = None,
        meter: UsageMeter | None = None,
    ) -> None:
        if llm is None:
            raise ValueError("SyntheticQueryGenerator needs an LLM")
        if per_batch <= 0 or max_chunk_chars <= 0 or min_words <= 0:
            raise ValueError("per_batch, max_chunk_chars and min_words must be > 0")
        self.llm = llm
        self.per_batch = per_batch
        self.max_chunk_chars = max_chunk_chars
        self.min_words = min_words
        self.prompt: BasePromptTemplate = SYNTHETIC_QUERY_PROMPT
        self.caller = (settings or LLMSettings()).new_caller(llm, meter=meter)
        self.stats: dict[str, int] = {}
        #: One reason per batch that got no question (the caller counts them as fallbacks).
        self.failures: list[str] = []

    def _get_prompts(self) -> PromptDictType:
        return {"synthetic_query_prompt": self.prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "synthetic_query_prompt" in prompts:
            self.prompt = prompts["synthetic_query_prompt"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    @property
    def usage(self) -> UsageMeter:
        """LLM calls and tokens spent by this generator."""
        return self.caller.meter

    def format(self, chunk_texts: Sequence[str]) -> str:
        """The prompt for one batch."""
        body = "\n".join(
            f"[Passage {i + 1}] {' '.join(t.split())[: self.max_chunk_chars]}"
            for i, t in enumerate(chunk_texts)
        )
        return self.prompt.format(
            chunks=body, num_chunks=len(chunk_texts), num_queries=self.per_batch
        )

    def parse(self, answer: str) -> list[str]:
        """Questions in a reply (bracketed or listed lines), at most ``per_batch``."""
        items = [q for q in parse_bracketed_items(answer) if len(q.split()) >= self.min_words]
        return items[: self.per_batch]

    def generate(
        self, batch_texts: Sequence[Sequence[str]], *, show_progress: bool = False
    ) -> list[list[str]]:
        """Questions for each batch; ``[]`` where the call failed or gave nothing usable
        (counted in :attr:`stats`, reasons in :attr:`failures`)."""
        prompts = [self.format(texts) for texts in batch_texts]
        budget = 48 * self.per_batch + 48

        async def ask(prompt: str) -> str:
            # Unusable replies stay out of the cache, so a rerun asks again.
            reply = await self.caller.acomplete(
                prompt, max_tokens=budget, accept=lambda a: bool(self.parse(a))
            )
            return reply.text

        answers: list[Any] = self.caller.map(
            prompts, ask, show_progress=show_progress, desc="Synthetic queries"
        )
        out: list[list[str]] = []
        failed = empty = 0
        self.failures = []
        for answer in answers:
            if isinstance(answer, BaseException):
                # An empty reply is an unusable answer, not a failed call.
                unusable = type(answer) is LLMOutputError
                empty, failed = empty + unusable, failed + (not unusable)
                self.failures.append(reason_of(answer))
                out.append([])
                continue
            questions = self.parse(answer)
            if not questions:
                empty += 1
                self.failures.append("unusable reply")
            out.append(questions)
        self.stats = {
            "batches": len(prompts),
            "failed_calls": failed,
            "unusable_answers": empty,
            "queries": sum(len(q) for q in out),
        }
        return out
