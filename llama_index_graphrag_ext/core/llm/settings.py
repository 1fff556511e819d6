"""The settings every LLM-using component shares, in one pydantic model.

Node parsers and extractors (pydantic ``TransformComponent`` s) inherit
:class:`LLMSettings`, so each has the same validated fields; query engines and
retrievers take the same names as keyword arguments and keep an instance.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from .retry import RetryPolicy

if TYPE_CHECKING:  # a method's config holds these settings: reading it imports no LLM stack
    from .calls import LLMCaller
    from .usage import UsageMeter

__all__ = ["LLMSettings"]


class LLMSettings(BaseModel):
    """Concurrency, retries, time-out, cache and failure policy of a component's LLM calls."""

    max_concurrency: int = Field(default=4, gt=0, description="LLM calls in flight at once.")
    max_attempts: int = Field(
        default=3,
        gt=0,
        description="Attempts per LLM call; 429 (Retry-After), 5xx, time-outs and "
        "connection errors are retried, 400/401/403 are not.",
    )
    timeout: float | None = Field(default=60.0, gt=0, description="Seconds per LLM attempt.")
    cache_path: str | None = Field(
        default=None, description="sqlite file caching LLM replies (a rerun pays nothing twice)."
    )
    reasoning_budget: int | None = Field(
        default=None,
        ge=0,
        description="Tokens of room for a reasoning model's thinking, added to every LLM "
        "step's limit: None adds 2048 once the model is seen reasoning, 0 declares a model "
        "that does not reason (or whose reasoning is off; streams are then shown as they "
        "arrive), N always adds N.",
    )
    on_llm_failure: Literal["fallback", "raise"] = Field(
        default="fallback",
        description="`fallback`: an item whose LLM call fails gets the LLM-free stand-in, "
        "with a warning and a count; `raise`: it is an error.",
    )

    def retry_policy(self) -> RetryPolicy:
        """The :class:`.retry.RetryPolicy` of these settings."""
        return RetryPolicy(max_attempts=self.max_attempts, timeout=self.timeout)

    def new_caller(self, llm: Any, meter: UsageMeter | None = None) -> LLMCaller:
        """An :class:`.calls.LLMCaller` for ``llm`` with these settings (cache file opened)."""
        from .cache import LLMCache
        from .calls import LLMCaller

        cache = None
        if self.cache_path:
            Path(self.cache_path).expanduser().parent.mkdir(parents=True, exist_ok=True)
            cache = LLMCache(self.cache_path)
        return LLMCaller(
            llm,
            cache=cache,
            retry=self.retry_policy(),
            max_concurrency=self.max_concurrency,
            meter=meter,
            reasoning_budget=self.reasoning_budget,
        )

    def llm_settings(self) -> dict[str, Any]:
        """These fields as plain settings (for a component's persisted configuration)."""
        return {name: getattr(self, name) for name in LLMSettings.model_fields}
