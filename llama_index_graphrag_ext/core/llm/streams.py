"""Streamed replies (a mixin of ``LLMCaller``).

Served from the cache when possible, cached once complete (not when cut).
Reasoning never reaches the reader (:class:`.reasoning.ReasoningFilter`). A
stream that shows nothing is asked again like any reply: with more room when
its reasoning used up the limit, after a transient error or a reset. Once part
of the answer is shown, a reset raises :class:`.target.LLMStreamError` and a
cut is reported (``report["cut"]``); the usage counts what arrived either way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ..text.tokens import count_tokens
from .loop import iterate_async, iterate_sync
from .parse import LLMOutputError, strip_reasoning
from .reasoning import ReasoningFilter, reasoning_text
from .retry import is_retryable
from .target import LENGTH_RETRIES, LLMStreamError, LLMTruncatedError, is_blocking, lock_of
from .usage import capture, finish_reason, fresh_call_depth

# The caller's log: one logger for everything an LLMCaller does.
logger = logging.getLogger(__package__ + ".calls")

__all__ = ["StreamCalls"]


class StreamCalls:
    """``astream`` / ``stream`` of :class:`.calls.LLMCaller`."""

    # Provided by LLMCaller.
    meter: Any
    cache: Any
    retry: Any
    llm_name: str

    def astream(
        self, prompt: str, *, max_tokens: int | None = None, report: dict | None = None
    ) -> AsyncIterator[str]:
        """Stream a reply's answer in pieces (see the module docs).

        Args:
            report: Filled in when the stream ends: ``finish_reason`` and ``cut``
                (the answer shown was cut by the length limit after the re-asks).

        Raises:
            LLMTruncatedError: Cut before any answer (inside the reasoning), after the re-asks.
            LLMOutputError: The reply had no answer at all.
            LLMStreamError: The connection broke after part of the answer was shown.
        """
        return iterate_async(lambda: self._astream(prompt, max_tokens, report))

    def stream(
        self, prompt: str, *, max_tokens: int | None = None, report: dict | None = None
    ) -> Iterator[str]:
        """Synchronous :meth:`astream`."""
        return iterate_sync(lambda: self._astream(prompt, max_tokens, report))

    async def _astream(
        self, prompt: str, limit: int | None, report: dict | None
    ) -> AsyncIterator[str]:
        report = {} if report is None else report
        report.update(finish_reason=None, cut=False)
        key = self.cache_key(prompt) if self.cache is not None else None
        cached = self.cache.get(key) if key is not None else None
        if cached is not None and (text := strip_reasoning(cached)):
            self.meter.add(cache_hits=1)
            report["finish_reason"] = "stop"
            yield text
            return
        resets = 0
        round_ = 0
        while True:
            chunks: list[str] = []
            thought: list[str] = []
            reason: str | None = None
            shown = False
            reasoning = ReasoningFilter(hold=self.holds_streams)
            with fresh_call_depth(), capture() as cap:
                try:
                    stream = await self._retrying(
                        lambda limit=limit: self._open_stream(prompt, self._limit_kwargs(limit)),
                        f"LLM stream ({self.llm_name})",
                    )
                    async for response in stream:
                        delta = getattr(response, "delta", None) or ""
                        reason = finish_reason(response) or reason
                        thought.append(reasoning_text(response))
                        chunks.append(delta)
                        if piece := reasoning.feed(delta):
                            shown = True
                            yield piece
                    if piece := reasoning.flush():
                        shown = True
                        yield piece
                except (asyncio.CancelledError, LLMOutputError):
                    raise
                except Exception as exc:
                    if not chunks:  # it never opened: retried and counted by _retrying
                        raise
                    # The usage of a broken stream: what arrived, counted here.
                    self.meter.add(
                        prompt_tokens=count_tokens(prompt),
                        completion_tokens=count_tokens("".join(chunks + thought)),
                    )
                    if shown or not is_retryable(exc) or resets + 1 >= self.retry.max_attempts:
                        self.meter.add(failures=1)
                        raise LLMStreamError(
                            f"stream of {self.llm_name} broke after {len(chunks)} piece(s): "
                            f"{type(exc).__name__}: {self.retry.describe(exc)}"
                        ) from exc
                    resets += 1
                    self.meter.add(retries=1)
                    logger.warning(
                        "stream of %s broke before its answer; asking again", self.llm_name
                    )
                    continue
                tokens = cap.tokens(prompt)
            self.meter.add(prompt_tokens=tokens[0], completion_tokens=tokens[1])
            text = "".join(chunks)
            self._learn(text, "".join(thought))
            report["finish_reason"] = reason
            if reason == "length" and not shown:
                bigger = self._next_limit(limit, prompt) if round_ < LENGTH_RETRIES else None
                if bigger is not None:
                    self.meter.add(length_retries=1)
                    limit, round_ = bigger, round_ + 1
                    continue
                self.meter.add(truncated=1)
                raise LLMTruncatedError(
                    f"streamed reply cut by the length limit inside its reasoning ({limit} tokens)",
                    raw=text,
                )
            if reason == "length":
                self.meter.add(truncated=1)
                report["cut"] = True
                logger.warning("streamed reply of %s cut by the length limit", self.llm_name)
            elif not shown:
                raise LLMOutputError("empty streamed reply", raw=text)
            elif key is not None:
                self.cache.put(key, text)
            return

    async def _open_stream(self, prompt: str, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        """Open a stream and wait for its first piece (errors before it are retried)."""
        self.meter.add(calls=1)
        if is_blocking(self._target):
            source = _thread_stream(self._target, prompt, kwargs)
        else:
            source = await self._timed(self._target.astream_complete(prompt, **kwargs))
        iterator = source.__aiter__()
        try:
            first = await self._timed(iterator.__anext__())
        except StopAsyncIteration:
            first = None

        async def rest() -> AsyncIterator[Any]:
            if first is not None:
                yield first
                async for item in iterator:
                    yield item

        return rest()


async def _thread_stream(llm: Any, prompt: str, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
    """A blocking LLM's ``stream_complete`` consumed in a worker thread."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    done = object()
    lock = lock_of(llm)

    def produce() -> None:
        try:
            with lock:
                for item in llm.stream_complete(prompt, **kwargs):
                    loop.call_soon_threadsafe(queue.put_nowait, item)
        except BaseException as exc:  # handed to the consumer
            loop.call_soon_threadsafe(queue.put_nowait, exc)
        loop.call_soon_threadsafe(queue.put_nowait, done)

    worker = loop.run_in_executor(None, produce)
    while True:
        item = await queue.get()
        if item is done:
            break
        if isinstance(item, BaseException):
            raise item
        yield item
    await worker
