"""The suite's one event loop: reachable from sync code, other loops and threads."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from llama_index_graphrag_ext.core.llm.loop import (
    iterate_async,
    iterate_sync,
    on_suite_loop,
    run_sync,
    suite_loop,
)

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


async def where() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    await asyncio.sleep(0)
    return asyncio.get_running_loop(), threading.current_thread()


def test_suite_loop_is_one_long_lived_loop_in_a_daemon_thread():
    loop = suite_loop()
    assert loop is suite_loop() and loop.is_running()
    ran_on, thread = run_sync(where)
    assert ran_on is loop
    assert thread is not threading.current_thread() and thread.daemon


def test_run_sync_from_plain_code_returns_and_raises():
    async def add(a, b):
        await asyncio.sleep(0.001)
        return a + b

    async def boom():
        raise KeyError("missing")

    assert run_sync(lambda: add(2, 3)) == 5
    with pytest.raises(KeyError, match="missing"):
        run_sync(boom)


def test_run_sync_inside_a_running_loop():
    # A notebook or an async web handler: the caller's loop is running, the call blocks.
    async def handler():
        mine = asyncio.get_running_loop()
        ran_on, _ = run_sync(where)
        return mine, ran_on

    mine, ran_on = asyncio.run(handler())
    assert ran_on is suite_loop() and ran_on is not mine


async def test_run_sync_inside_the_test_loop():
    ran_on, _ = run_sync(where)
    assert ran_on is suite_loop() and ran_on is not asyncio.get_running_loop()


def test_run_sync_from_many_threads_at_once():
    async def slow(i):
        await asyncio.sleep(0.05)
        return i * i

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda i: run_sync(lambda: slow(i)), range(16)))
    assert results == [i * i for i in range(16)]
    # They overlap on the suite's loop: 16 sleeps of 0.05 s take far less than 0.8 s.
    assert time.perf_counter() - start < 0.6


async def test_on_suite_loop_from_another_loop_does_not_block_it():
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    async def slow():
        await asyncio.sleep(0.1)
        return asyncio.get_running_loop()

    task = asyncio.ensure_future(ticker())
    try:
        ran_on = await on_suite_loop(slow())
    finally:
        task.cancel()
    assert ran_on is suite_loop()
    assert ticks >= 5  # the test's own loop kept running meanwhile


def test_on_suite_loop_from_the_suite_loop_runs_in_place():
    async def outer():
        return await on_suite_loop(where())

    ran_on, thread = run_sync(outer)
    assert ran_on is suite_loop() and thread.name == "graphrag-ext-llm-loop"


async def test_on_suite_loop_propagates_errors():
    async def boom():
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await on_suite_loop(boom())


def test_context_variables_travel_with_the_coroutine():
    async def read_and_change():
        seen = REQUEST_ID.get()
        REQUEST_ID.set("changed inside")
        return seen

    token = REQUEST_ID.set("main")
    try:
        assert run_sync(read_and_change) == "main"
        assert REQUEST_ID.get() == "main"  # the change stays on the other side

        def in_thread(name):
            REQUEST_ID.set(name)
            return run_sync(read_and_change)

        with ThreadPoolExecutor(max_workers=4) as pool:
            assert list(pool.map(in_thread, ["a", "b", "c", "d"])) == ["a", "b", "c", "d"]
    finally:
        REQUEST_ID.reset(token)


async def test_context_variables_travel_through_on_suite_loop():
    async def read():
        return REQUEST_ID.get()

    token = REQUEST_ID.set("async caller")
    try:
        assert await on_suite_loop(read()) == "async caller"
    finally:
        REQUEST_ID.reset(token)


def test_run_sync_on_the_suite_loop_thread_raises_instead_of_deadlocking():
    async def inner():
        return 1

    async def nested_sync_call():
        try:
            run_sync(inner)
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    async def nested_iteration():
        try:
            list(iterate_sync(lambda: numbers(3)))
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    assert "deadlock" in run_sync(nested_sync_call)
    assert "deadlock" in run_sync(nested_iteration)


# --------------------------------------------------------------------------- streams


async def numbers(n, fail_after=None, delay=0.0):
    for i in range(n):
        if fail_after is not None and i == fail_after:
            raise ConnectionError(f"dropped after {i}")
        await asyncio.sleep(delay)
        yield i


def test_iterate_sync_delivers_in_order_on_the_suite_loop():
    loops = []

    async def recording():
        async for i in numbers(50):
            loops.append(asyncio.get_running_loop())
            yield i

    assert list(iterate_sync(recording)) == list(range(50))
    assert set(loops) == {suite_loop()}


def test_iterate_sync_propagates_errors_after_the_items_before_them():
    got = []
    with pytest.raises(ConnectionError, match="dropped after 3"):
        for item in iterate_sync(lambda: numbers(10, fail_after=3)):
            got.append(item)
    assert got == [0, 1, 2]


def _cancellable(started: threading.Event, cancelled: threading.Event):
    async def producer():
        started.set()
        try:
            i = 0
            while True:
                await asyncio.sleep(0.01)
                yield i
                i += 1
        except asyncio.CancelledError:
            cancelled.set()
            raise

    return producer


def test_closing_iterate_sync_early_cancels_the_producer():
    started, cancelled = threading.Event(), threading.Event()
    stream = iterate_sync(_cancellable(started, cancelled))
    assert [next(stream) for _ in range(3)] == [0, 1, 2]
    stream.close()
    assert cancelled.wait(2.0)


async def test_iterate_async_delivers_in_order_and_propagates_errors():
    assert [i async for i in iterate_async(lambda: numbers(20, delay=0.001))] == list(range(20))
    got = []
    with pytest.raises(ConnectionError):
        async for item in iterate_async(lambda: numbers(10, fail_after=2)):
            got.append(item)
    assert got == [0, 1]


async def test_iterate_async_does_not_block_the_callers_loop():
    beats = 0

    async def heartbeat():
        nonlocal beats
        while True:
            beats += 1
            await asyncio.sleep(0.005)

    task = asyncio.ensure_future(heartbeat())
    try:
        items = [i async for i in iterate_async(lambda: numbers(5, delay=0.02))]
    finally:
        task.cancel()
    assert items == list(range(5)) and beats >= 5


async def test_closing_iterate_async_early_cancels_the_producer():
    started, cancelled = threading.Event(), threading.Event()
    stream = iterate_async(_cancellable(started, cancelled))
    got = []
    async for item in stream:
        got.append(item)
        if len(got) == 2:
            break
    await stream.aclose()
    assert got == [0, 1]
    assert await asyncio.to_thread(cancelled.wait, 2.0)


def test_iterate_async_on_the_suite_loop_passes_through():
    async def consume():
        return [i async for i in iterate_async(lambda: numbers(4))]

    assert run_sync(consume) == [0, 1, 2, 3]


async def test_cancelling_the_caller_cancels_the_coroutine_on_the_suite_loop():
    cancelled = threading.Event()

    async def long_call():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(on_suite_loop(long_call()), 0.05)
    assert await asyncio.to_thread(cancelled.wait, 2.0)
