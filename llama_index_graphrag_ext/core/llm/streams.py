"""Streamed replies (a mixin of ``LLMCaller``).

Served from the cache when possible, retried until the first piece, cached once
complete (not when cut). One filter drops reasoning blocks from live and cached
streams alike, so a stream reads the same every time.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

from .loop import iterate_async, iterate_sync
from .parse import REASONING_TAGS
from .target import is_blocking, lock_of
from .usage import capture, finish_reason, fresh_call_depth

# The caller's log: one logger for everything an LLMCaller does.
logger = logging.getLogger(__package__ + ".calls")

__all__ = ["ReasoningFilter", "StreamCalls"]


class StreamCalls:
    """``astream`` / ``stream`` of :class:`.calls.LLMCaller`."""

    # Provided by LLMCaller.
    meter: Any
    cache: Any
    llm_name: str

    def astream(self, prompt: str, *, max_tokens: int | None = None) -> AsyncIterator[str]:
        """Stream a reply's text pieces (see the module docs); the whole reply is cached."""
        return iterate_async(lambda: self._astream(prompt, max_tokens))

    def stream(self, prompt: str, *, max_tokens: int | None = None) -> Iterator[str]:
        """Synchronous :meth:`astream`."""
        return iterate_sync(lambda: self._astream(prompt, max_tokens))

    async def _astream(self, prompt: str, limit: int | None) -> AsyncIterator[str]:
        key = self.cache_key(prompt) if self.cache is not None else None
        if key is not None and (cached := self.cache.get(key)) is not None:
            self.meter.add(cache_hits=1)
            replay = ReasoningFilter()
            if text := replay.feed(cached) + replay.flush():
                yield text
            return
        kwargs = self._limit_kwargs(limit)
        chunks: list[str] = []
        reason: str | None = None
        reasoning = ReasoningFilter()
        with fresh_call_depth(), capture() as cap:
            stream = await self._retrying(
                lambda: self._open_stream(prompt, kwargs), f"LLM stream ({self.llm_name})"
            )
            async for response in stream:
                delta = getattr(response, "delta", None) or ""
                reason = finish_reason(response) or reason
                chunks.append(delta)
                if shown := reasoning.feed(delta):
                    yield shown
            if shown := reasoning.flush():
                yield shown
            tokens = cap.tokens(prompt)
        self.meter.add(prompt_tokens=tokens[0], completion_tokens=tokens[1])
        text = "".join(chunks)
        if reason == "length":
            self.meter.add(truncated=1)
            logger.warning("streamed reply of %s cut by the length limit", self.llm_name)
        elif key is not None:
            self.cache.put(key, text)

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


_OPENING = re.compile(r"<(" + "|".join(REASONING_TAGS) + r")>", re.IGNORECASE)
_OPENINGS = tuple(f"<{tag}>" for tag in REASONING_TAGS)


class ReasoningFilter:
    """Drops reasoning blocks from text that arrives in pieces.

    A possible opening tag is held back until the next piece settles it; an
    unclosed block is dropped to the end; whitespace is dropped as
    :func:`.parse.strip_reasoning` drops it.
    """

    def __init__(self) -> None:
        self._held = ""
        self._inside: str | None = None  # the tag of the block being dropped
        self._skip_space = True

    def feed(self, piece: str) -> str:
        """The part of ``piece`` (with what was held) that is sure to be shown."""
        held, shown = self._held + piece, []
        while held:
            if self._inside is not None:
                close = f"</{self._inside}>"
                end = held.lower().find(close)
                if end < 0:  # keep what may be the start of the closing tag
                    held = held[-(len(close) - 1) :]
                    break
                held, self._inside, self._skip_space = held[end + len(close) :], None, True
                continue
            if self._skip_space:
                held = held.lstrip()
                if not held:
                    break
                self._skip_space = False
            start = held.find("<")
            if start < 0:
                shown.append(held)
                held = ""
                break
            shown.append(held[:start])
            held = held[start:]
            if opening := _OPENING.match(held):
                self._inside, held = opening.group(1).lower(), held[opening.end() :]
            elif any(tag.startswith(held.lower()) for tag in _OPENINGS):
                break  # too short to tell: wait for the next piece
            else:
                shown.append("<")
                held = held[1:]
        self._held = held
        return "".join(shown)

    def flush(self) -> str:
        """What is still held once the text has ended (nothing inside an open block)."""
        held, self._held = self._held, ""
        return "" if self._inside is not None else held


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
