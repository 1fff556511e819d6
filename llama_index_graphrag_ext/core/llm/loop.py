"""One event loop, in a daemon thread, for every LLM call the suite makes.

An async client's pooled connections belong to the loop that opened them, so a
fresh ``asyncio.run`` per call leaves the client holding connections of a closed
loop. Sync code blocks on :func:`run_sync`, async code awaits
:func:`on_suite_loop`; CPU work never runs on this loop.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["iterate_async", "iterate_sync", "on_suite_loop", "run_sync", "suite_loop"]

T = TypeVar("T")


class _LoopThread:
    """The suite's loop, started on first use in a daemon thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None

    def get(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self.loop is None or self.thread is None or not self.thread.is_alive():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                thread = threading.Thread(target=run, name="graphrag-ext-llm-loop", daemon=True)
                thread.start()
                ready.wait()
                self.loop, self.thread = loop, thread
            return self.loop

    def reset(self) -> None:
        # A forked child has no copy of the thread; it starts its own loop on first use.
        self.loop = self.thread = None
        self._lock = threading.Lock()


_LOOP = _LoopThread()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_LOOP.reset)


def suite_loop() -> asyncio.AbstractEventLoop:
    """The loop every LLM call of the suite runs on."""
    return _LOOP.get()


def _on_loop_thread() -> bool:
    return _LOOP.thread is not None and threading.current_thread() is _LOOP.thread


def run_sync(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine on the suite's loop and wait for its result.

    Works from any thread, even one with a running loop (a notebook).

    Raises:
        RuntimeError: Called from the suite's loop thread itself (a deadlock).
    """
    if _on_loop_thread():
        raise RuntimeError(
            "a synchronous LLM call from the suite's event-loop thread would deadlock; "
            "await the async API instead"
        )
    future = asyncio.run_coroutine_threadsafe(factory(), suite_loop())
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise


async def on_suite_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on the suite's loop from any loop, without blocking the caller's."""
    loop = suite_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:  # no running loop: the caller awaited us outside one
        running = None
    if running is loop:  # (a RuntimeError from ``coro`` itself must not land above)
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


_DONE = object()


def iterate_sync(factory: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """Consume an async iterator that runs on the suite's loop from synchronous code.

    Closing the returned generator early cancels the producer.
    """
    if _on_loop_thread():
        raise RuntimeError("iterate_sync from the suite's event-loop thread would deadlock")
    items: queue.Queue[Any] = queue.Queue()

    async def pump() -> None:
        try:
            async for item in factory():
                items.put((item, None))
        except BaseException as exc:  # handed to the consumer
            items.put((_DONE, exc))
            return
        items.put((_DONE, None))

    future = asyncio.run_coroutine_threadsafe(pump(), suite_loop())
    try:
        while True:
            item, error = items.get()
            if item is _DONE:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        future.cancel()


async def iterate_async(factory: Callable[[], AsyncIterator[T]]) -> AsyncIterator[T]:
    """Consume an async iterator that runs on the suite's loop from any other loop."""
    loop = suite_loop()
    if asyncio.get_running_loop() is loop:
        async for item in factory():
            yield item
        return
    here = asyncio.get_running_loop()
    items: asyncio.Queue[Any] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for item in factory():
                here.call_soon_threadsafe(items.put_nowait, (item, None))
        except BaseException as exc:  # handed to the consumer
            here.call_soon_threadsafe(items.put_nowait, (_DONE, exc))
            return
        here.call_soon_threadsafe(items.put_nowait, (_DONE, None))

    future = asyncio.run_coroutine_threadsafe(pump(), loop)
    try:
        while True:
            item, error = await items.get()
            if item is _DONE:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        future.cancel()
