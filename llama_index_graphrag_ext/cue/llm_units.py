"""LLM knowledge units (CUE-RAG §3.2, Algorithm 1 line 8, Fig. 7 prompt).

Each chunk Chunk-Selection picked is rewritten into short, self-contained,
pronoun-resolved statements, asked for as structured output (:class:`Units`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.prompts import BasePromptTemplate
from pydantic import BaseModel, Field, field_validator

from ..core.llm import LLMCaller

#: The LLM step's name in the step ledger.
STEP = "knowledge-units"


class Units(BaseModel):
    """The knowledge units of one passage (Alg. 1, line 8): what the LLM is asked for."""

    units: list[str] = Field(description="Short, self-contained statements, one fact each.")

    @field_validator("units", mode="before")
    @classmethod
    def _statements(cls, value: Any) -> Any:
        # Models sometimes write units as objects ({"unit": "..."}) or numbers.
        if not isinstance(value, list):
            return value
        out = []
        for item in value:
            if isinstance(item, dict):
                item = next((v for v in item.values() if isinstance(v, str)), "")
            text = " ".join(str(item).split()) if isinstance(item, (str, int, float)) else ""
            if text:
                out.append(text)
        return out


def _has_units(found: Units) -> Units:
    if not found.units:
        raise ValueError("no knowledge units in the reply")
    return found


async def allm_units(
    caller: LLMCaller,
    prompt: BasePromptTemplate,
    texts: Sequence[str],
    *,
    reply_budget: Callable[[str], int],
    repair_attempts: int,
    show_progress: bool = False,
) -> list[list[str] | Exception]:
    """The units of each text, or the exception that ended its calls (in input order).

    Args:
        prompt: The extraction prompt (slot ``passage``).
        reply_budget: ``max_tokens`` of one text's reply.
        repair_attempts: Re-asks after an unusable reply.
    """

    async def one(text: str) -> list[str]:
        found = await caller.astructured(
            prompt.format(passage=text),
            Units,
            max_tokens=reply_budget(text),
            repair_attempts=repair_attempts,
            check=_has_units,
        )
        return found.units

    return await caller.amap(list(texts), one, show_progress=show_progress, desc="Knowledge units")
