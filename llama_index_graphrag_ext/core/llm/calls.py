"""``LLMCaller``: the one way the suite calls an LLM.

It adds to any LlamaIndex ``LLM``: the suite's event loop (:mod:`.loop`), one
retry layer (:mod:`.retry`), replies read as models write them (:mod:`.parse`),
re-asking with a larger limit when a reply is cut, a response cache of complete
usable answers, bounded concurrency and usage counting (:mod:`.usage`).
Structured output and streams are mixins (:mod:`.structured`, :mod:`.streams`).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from .cache import LLMCache, cache_key, llm_fingerprint
from .loop import on_suite_loop, run_sync
from .parse import LLMOutputError, strip_reasoning
from .reasoning import (
    REASONING_ROOM,
    known_style,
    learn,
    prior_style,
    reasoning_text,
    style_of,
)
from .resolve import accepts_max_tokens, describe_llm, structured_mode
from .retry import RetryPolicy, refusal_of
from .steps import LLMFallbackError
from .streams import StreamCalls
from .structured import StructuredCalls
from .target import (
    LENGTH_RETRIES,
    LLMRequestError,
    LLMTruncatedError,
    Reply,
    call_copy,
    is_blocking,
    lock_of,
    output_ceiling,
)
from .usage import UsageMeter, capture, finish_reason, fresh_call_depth

logger = logging.getLogger(__name__)

__all__ = ["LLMCaller", "LLMRequestError", "LLMTruncatedError", "Reply", "call_copy"]

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class LLMCaller(StructuredCalls, StreamCalls):
    """Calls one LLM for one component (see the module docs).

    Args:
        cache: A response cache; ``None`` disables caching.
        max_concurrency: Calls in flight at once (``amap`` and every call share it).
        meter: The usage meter to update (a fresh one by default).
        reasoning_budget: Room for a reasoning model's thinking, added to every
            step's ``max_tokens``: ``None`` adds ``REASONING_ROOM`` once the model
            is seen reasoning in a reply, ``0`` declares a model that does not
            reason (or whose reasoning is switched off), ``N`` always adds ``N``.

    Attributes:
        mode: How structured output is asked for (see :func:`.resolve.structured_mode`).
    """

    def __init__(
        self,
        llm: Any,
        *,
        cache: LLMCache | None = None,
        retry: RetryPolicy | None = None,
        max_concurrency: int = 4,
        meter: UsageMeter | None = None,
        reasoning_budget: int | None = None,
    ) -> None:
        if llm is None:
            raise ValueError("LLMCaller needs an LLM")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.llm = llm
        self.cache = cache
        self.retry = retry or RetryPolicy()
        self.max_concurrency = int(max_concurrency)
        self.meter = meter if meter is not None else UsageMeter()
        self.mode = structured_mode(llm)
        if reasoning_budget is not None and reasoning_budget < 0:
            raise ValueError(f"reasoning_budget must be >= 0 or None, got {reasoning_budget}")
        self.reasoning_budget = reasoning_budget
        self._target = call_copy(llm, self.retry)
        self._fingerprint = llm_fingerprint(llm)
        learn(self._fingerprint, prior_style(llm))
        self._sized = accepts_max_tokens(llm)
        self._ceiling = output_ceiling(llm)
        # Bound to a loop on first use: the suite's loop, the only one it serves.
        self._semaphore = asyncio.Semaphore(self.max_concurrency)

    def __repr__(self) -> str:
        return f"LLMCaller({describe_llm(self.llm)}, mode={self.mode}, cache={self.cache!r})"

    def with_meter(self, meter: UsageMeter) -> LLMCaller:
        """This caller counting into ``meter`` (one query's usage); client, cache and bound shared."""
        view = copy.copy(self)
        view.meter = meter
        return view

    def cache_key(self, prompt: str, kind: str = "text") -> str:
        """The key a reply to ``prompt`` is cached under (the length limit is not part of it)."""
        return cache_key(self._fingerprint, prompt, {"kind": kind})

    def _sem(self) -> asyncio.Semaphore:
        return self._semaphore

    def _window(self) -> int:
        try:
            return int(self.llm.metadata.context_window)
        except Exception:  # metadata that needs a live connection
            return 8192

    @property
    def reasoning_room(self) -> int:
        """Tokens each step's budget gets for the model's reasoning (see ``reasoning_budget``)."""
        if self.reasoning_budget is not None:
            return self.reasoning_budget
        return REASONING_ROOM if known_style(self._fingerprint) not in (None, "none") else 0

    @property
    def holds_streams(self) -> bool:
        """Whether a stream must be held back until its reasoning ends: a model seen writing
        R1's stray closing tag, or one not seen yet (unless declared not to reason)."""
        if self.reasoning_budget == 0:
            return False
        return known_style(self._fingerprint) in (None, "stray")

    def _learn(self, raw: str, reasoning: str) -> None:
        learn(self._fingerprint, style_of(raw, reasoning))

    def _limit_kwargs(self, limit: int | None) -> dict[str, Any]:
        """``max_tokens`` for one request: what the step needs plus room for reasoning, within
        the LLM's own ceiling."""
        if limit:
            limit += self.reasoning_room
        limit = min(limit, self._ceiling) if (limit and self._ceiling) else (limit or self._ceiling)
        return {"max_tokens": int(limit)} if (limit and self._sized) else {}

    async def _retrying(
        self,
        attempt: Callable[[], Awaitable[T]],
        what: str,
        expected: Callable[[BaseException], bool] | None = None,
    ) -> T:
        """Run ``attempt`` under the retry policy, counting retries and failures.

        Unusable output, cancellation and errors ``expected`` accepts are the
        caller's to count.
        """
        policy = self.retry

        def before_sleep(state: Any) -> None:
            exc = state.outcome.exception()
            self.meter.add(retries=1)
            logger.warning(
                "%s: attempt %d/%d failed (%s: %s); retrying in %.2fs",
                what,
                state.attempt_number,
                policy.max_attempts,
                type(exc).__name__,
                policy.describe(exc),
                state.next_action.sleep if state.next_action else 0.0,
            )

        try:
            async for attempt_state in AsyncRetrying(
                stop=stop_after_attempt(policy.max_attempts),
                wait=policy.wait,
                retry=retry_if_exception(policy.retryable),
                before_sleep=before_sleep,
                reraise=True,
            ):
                with attempt_state:
                    result = await attempt()
        except (LLMOutputError, ValidationError, asyncio.CancelledError):
            raise
        except Exception as exc:
            if expected is not None and expected(exc):
                raise
            self.meter.add(failures=1)
            refusal = refusal_of(exc)
            if refusal is not None:
                logger.error("%s failed for good (%s): %s", what, refusal, policy.describe(exc))
                raise LLMRequestError(refusal, policy.describe(exc)) from exc
            logger.error(
                "%s failed for good: %s: %s", what, type(exc).__name__, policy.describe(exc)
            )
            raise
        return result

    async def _timed(self, coro: Awaitable[T]) -> T:
        timeout = self.retry.timeout
        return await (asyncio.wait_for(coro, timeout) if timeout is not None else coro)

    async def _request(self, prompt: str, limit: int | None) -> tuple[str, str | None, str]:
        """One request: ``(text, finish_reason, reasoning)``; usage counted from the provider's
        answer; what it shows of the model's reasoning is learned."""
        kwargs = self._limit_kwargs(limit)
        async with self._sem():
            self.meter.add(calls=1)
            with fresh_call_depth(), capture() as cap:
                if is_blocking(self._target):
                    lock = lock_of(self._target)

                    def call() -> Any:
                        with lock:
                            return self._target.complete(prompt, **kwargs)

                    response = await self._timed(asyncio.to_thread(call))
                else:
                    response = await self._timed(self._target.acomplete(prompt, **kwargs))
            prompt_tokens, completion_tokens = cap.tokens(prompt)
        self.meter.add(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        text = "" if getattr(response, "text", None) is None else str(response.text)
        reasoning = reasoning_text(response)
        self._learn(text, reasoning)
        return text, finish_reason(response), reasoning

    def _next_limit(self, limit: int | None, prompt: str) -> int | None:
        """Twice the limit, within the context window and the LLM's ceiling; ``None``: it cannot grow."""
        from ..text.tokens import count_tokens

        room = self._window() - count_tokens(prompt) - 16
        if self._ceiling:
            room = min(room, self._ceiling)
        current = min(limit, self._ceiling) if (limit and self._ceiling) else limit
        if not self._sized or room <= 0:
            return None
        grown = min(room, 2 * current) if current else room
        return grown if (current is None or grown > current) else None

    async def _complete(self, prompt: str, limit: int | None, allow_cut: bool = False) -> Reply:
        """A complete reply: retried on transient errors, asked again with more room when cut.

        A reply that stays cut raises :class:`LLMTruncatedError`, or with
        ``allow_cut`` is returned with ``finish_reason="length"`` when it has an
        answer at all. A reply with nothing but reasoning is never an answer.
        """
        for round_ in range(LENGTH_RETRIES + 1):
            text, reason, reasoning = await self._retrying(
                lambda limit=limit: self._request(prompt, limit), f"LLM call ({self.llm_name})"
            )
            answer = strip_reasoning(text)
            if reason != "length":
                if not answer:
                    what = "only reasoning" if (reasoning or text.strip()) else "nothing"
                    raise LLMOutputError(f"empty reply ({what})", raw=text)
                return Reply(answer, text, reason)
            bigger = self._next_limit(limit, prompt) if round_ < LENGTH_RETRIES else None
            if bigger is None:
                break
            self.meter.add(length_retries=1)
            logger.info("reply cut at %s tokens; asking again with %d", limit, bigger)
            limit = bigger
        self.meter.add(truncated=1)
        ceiling = f" (the LLM's own ceiling is {self._ceiling})" if self._ceiling else ""
        if allow_cut and answer:
            logger.warning(
                "%s: reply still cut by the length limit after %d re-ask(s)%s; kept as cut",
                self.llm_name,
                LENGTH_RETRIES,
                ceiling,
            )
            return Reply(answer, text, "length")
        where = " inside its reasoning" if not answer else ""
        raise LLMTruncatedError(
            f"reply cut by the length limit{where} ({limit} tokens){ceiling}", raw=text
        )

    @property
    def llm_name(self) -> str:
        """``Class(model)`` of the LLM, for logs."""
        return describe_llm(self.llm)

    async def acomplete(
        self,
        prompt: str,
        *,
        max_tokens: int | None = None,
        accept: Callable[[str], bool] | None = None,
        allow_cut: bool = False,
    ) -> Reply:
        """A complete reply to ``prompt``, from the cache when it holds one.

        Args:
            max_tokens: What the reply may need (grown when the reply is cut,
                never beyond the LLM's own ceiling).
            accept: Check of a usable reply; rejected replies are returned but
                never cached, and a rejected cached reply is asked again.
            allow_cut: Return a reply that stays cut (``finish_reason="length"``,
                not cached) instead of raising. For free-text answers only.

        Raises:
            LLMTruncatedError: The reply stayed cut by the length limit.
            Exception: The LLM's error, once retries are spent or not worth it.
        """
        return await on_suite_loop(self._acomplete(prompt, max_tokens, accept, allow_cut))

    async def _acomplete(
        self,
        prompt: str,
        limit: int | None,
        accept: Callable[[str], bool] | None,
        allow_cut: bool = False,
    ) -> Reply:
        key = self.cache_key(prompt) if self.cache is not None else None
        if key is not None:
            cached = self.cache.get(key)
            if cached is not None:
                reply = Reply(strip_reasoning(cached), cached, "stop", from_cache=True)
                if accept is None or accept(reply.text):
                    self.meter.add(cache_hits=1)
                    return reply
        reply = await self._complete(prompt, limit, allow_cut)
        complete = reply.finish_reason != "length"
        if key is not None and complete and (accept is None or accept(reply.text)):
            self.cache.put(key, reply.raw)
        return reply

    def complete(self, prompt: str, **kwargs: Any) -> Reply:
        """Synchronous :meth:`acomplete`."""
        return run_sync(lambda: self.acomplete(prompt, **kwargs))

    async def amap(
        self,
        items: Sequence[Any],
        fn: Callable[[Any], Awaitable[T]],
        *,
        show_progress: bool = False,
        desc: str = "LLM",
    ) -> list[T | BaseException]:
        """``fn`` over ``items`` on the suite's loop, at most ``max_concurrency`` at once.

        A failed item's slot holds its exception, except
        :class:`~.steps.LLMFallbackError` and cancellation, which propagate.
        """
        return await on_suite_loop(self._amap(list(items), fn, show_progress, desc))

    async def _amap(
        self, items: list[Any], fn: Callable[[Any], Awaitable[T]], show_progress: bool, desc: str
    ) -> list[T | BaseException]:
        results: list[Any] = [None] * len(items)
        if not items:
            return results
        bar = None
        if show_progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(items), desc=desc)
        pending = iter(enumerate(items))

        async def worker() -> None:
            for index, item in pending:
                try:
                    results[index] = await fn(item)
                except Exception as exc:
                    if isinstance(exc, LLMFallbackError):
                        raise
                    results[index] = exc
                finally:
                    if bar is not None:
                        bar.update(1)

        tasks = [
            asyncio.ensure_future(worker()) for _ in range(min(self.max_concurrency, len(items)))
        ]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            if bar is not None:
                bar.close()
        return results

    def map(self, items: Sequence[Any], fn: Callable[[Any], Awaitable[T]], **kwargs: Any) -> list:
        """Synchronous :meth:`amap` (``fn`` is still async)."""
        return run_sync(lambda: self.amap(items, fn, **kwargs))
