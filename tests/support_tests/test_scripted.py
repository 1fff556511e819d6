"""Tests for the scripted LLM used in tests (and offered to users for theirs)."""

from __future__ import annotations

import asyncio
import re
import threading
import time

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import LLMCompletionEndEvent
from llama_index.core.llms import CustomLLM
from support import Delay, ScriptedLLM, ScriptExhaustedError


def test_is_a_custom_llm_with_metadata():
    llm = ScriptedLLM(["x"])
    assert isinstance(llm, CustomLLM)
    meta = llm.metadata
    assert (meta.model_name, meta.context_window, meta.num_output) == ("scripted", 8192, 512)
    assert ScriptedLLM(["x"], model_name="other").metadata.model_name == "other"


def test_list_script_in_order_then_exhausted():
    llm = ScriptedLLM(["first", "second"])
    assert llm.complete("a").text == "first"
    assert llm.remaining == 1
    assert llm.complete("b").text == "second"
    with pytest.raises(ScriptExhaustedError, match="used up") as info:
        llm.complete("c")
    assert isinstance(info.value, AssertionError)
    assert llm.calls == ["a", "b", "c"] and llm.call_count == 3


def test_list_script_with_default():
    llm = ScriptedLLM(["only"], default="fallback")
    assert [llm.complete(p).text for p in "abc"] == ["only", "fallback", "fallback"]


def test_constant_string_script():
    llm = ScriptedLLM("always")
    assert llm.complete("x").text == llm.complete("y").text == "always"
    assert llm.remaining is None


def test_dict_script_substring_regex_order_and_lists():
    llm = ScriptedLLM(
        {
            "capital": "Paris",
            re.compile(r"\d+ \+ \d+"): "4",
            "cap": "never reached for 'capital' prompts",
            "again": ["one", "two"],
        }
    )
    assert llm.complete("What is the capital of France?").text == "Paris"
    assert llm.complete("What is 2 + 2?").text == "4"
    assert llm.complete("a cap").text.startswith("never reached")
    assert llm.complete("again").text == "one"
    assert llm.complete("again!").text == "two"
    with pytest.raises(ScriptExhaustedError):
        llm.complete("again?")
    with pytest.raises(ScriptExhaustedError, match="no key matched"):
        llm.complete("unrelated")


def test_dict_script_default_and_bad_keys():
    llm = ScriptedLLM({"hello": "hi"}, default="?")
    assert llm.complete("say hello").text == "hi"
    assert llm.complete("nothing").text == "?"
    with pytest.raises(TypeError):
        ScriptedLLM({1: "x"})


def test_callable_script_sync_and_async():
    llm = ScriptedLLM(lambda p: p[::-1])
    assert llm.complete("abc").text == "cba"

    async def shout(prompt):
        await asyncio.sleep(0)
        return prompt.upper()

    async_llm = ScriptedLLM(shout)
    assert async_llm.complete("abc").text == "ABC"  # sync path runs the coroutine
    assert asyncio.run(async_llm.acomplete("def")).text == "DEF"


def test_items_may_be_callables_exceptions_and_none():
    llm = ScriptedLLM([lambda p: f"echo {p}", ValueError("bad"), KeyError, None])
    assert llm.complete("x").text == "echo x"
    with pytest.raises(ValueError, match="bad"):
        llm.complete("y")
    with pytest.raises(KeyError):
        llm.complete("z")
    assert llm.complete("w").text == ""
    assert llm.call_count == 4


async def test_exceptions_raised_on_the_async_path():
    llm = ScriptedLLM([TimeoutError("slow"), Delay(0.01, RuntimeError("late failure"))])
    with pytest.raises(TimeoutError):
        await llm.acomplete("a")
    with pytest.raises(RuntimeError, match="late failure"):
        await llm.acomplete("b")


def test_delay_sync_sleeps():
    llm = ScriptedLLM([Delay(0.05, "done")])
    start = time.perf_counter()
    assert llm.complete("x").text == "done"
    assert time.perf_counter() - start >= 0.05


async def test_delay_async_is_truly_async_and_cancellable():
    llm = ScriptedLLM([Delay(0.2, "a"), Delay(0.2, "b"), Delay(5.0, "never")])
    start = time.perf_counter()
    out = await asyncio.gather(llm.acomplete("1"), llm.acomplete("2"))
    assert sorted(r.text for r in out) == ["a", "b"]
    assert time.perf_counter() - start < 0.4  # concurrent: one after the other takes 0.4 s
    start = time.perf_counter()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(llm.acomplete("3"), timeout=0.05)
    assert time.perf_counter() - start < 1.0


def test_usage_counts_words():
    llm = ScriptedLLM(["three word answer"])
    response = llm.complete("a prompt of five words")
    assert response.raw["usage"] == {
        "prompt_tokens": 5,
        "completion_tokens": 3,
        "total_tokens": 8,
    }


def test_token_counting_handler_sees_exact_counts():
    counter = TokenCountingHandler()
    llm = ScriptedLLM(["alpha beta", "gamma"], callback_manager=CallbackManager([counter]))
    llm.complete("one two three")
    asyncio.run(llm.acomplete("four five"))
    assert counter.prompt_llm_token_count == 5
    assert counter.completion_llm_token_count == 3
    assert len(counter.llm_token_counts) == 2


def test_streaming_word_by_word():
    counter = TokenCountingHandler()
    text = "  Hello brave\nnew  world. "
    llm = ScriptedLLM([text], callback_manager=CallbackManager([counter]))
    chunks = list(llm.stream_complete("stream this"))
    assert "".join(c.delta for c in chunks) == text
    assert chunks[-1].text == text
    assert [c.delta.strip() for c in chunks] == ["Hello", "brave", "new", "world."]
    assert all(
        chunks[i].text == chunks[i - 1].text + chunks[i].delta for i in range(1, len(chunks))
    )
    assert counter.prompt_llm_token_count == 2
    assert counter.completion_llm_token_count == 4


async def test_async_streaming_and_empty_answer():
    llm = ScriptedLLM(["a b c", ""])
    gen = await llm.astream_complete("p")
    chunks = [c async for c in gen]
    assert [c.delta for c in chunks] == ["a", " b", " c"]
    gen = await llm.astream_complete("q")
    chunks = [c async for c in gen]
    assert len(chunks) == 1 and chunks[0].text == ""


def test_chat_goes_through_complete():
    llm = ScriptedLLM(["chatty"])
    response = llm.chat([ChatMessage(role="user", content="hi there")])
    assert response.message.content == "chatty"
    assert llm.call_count == 1 and "hi there" in llm.calls[0]


def test_thread_safe_recording():
    llm = ScriptedLLM(lambda p: p)

    def work(worker):
        for i in range(50):
            assert llm.complete(f"{worker}:{i}").text == f"{worker}:{i}"

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert llm.call_count == 400
    assert len(set(llm.calls)) == 400
    llm.reset_calls()
    assert llm.call_count == 0


def test_list_script_is_thread_safe():
    llm = ScriptedLLM([str(i) for i in range(200)])
    seen: list[str] = []
    lock = threading.Lock()

    def work():
        for _ in range(50):
            text = llm.complete("p").text
            with lock:
                seen.append(text)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen, key=int) == [str(i) for i in range(200)]
    assert llm.remaining == 0


def test_instrumentation_sees_completions():
    class Collect(BaseEventHandler):
        events: list = []

        @classmethod
        def class_name(cls) -> str:
            return "Collect"

        def handle(self, event, **kwargs):
            if isinstance(event, LLMCompletionEndEvent):
                self.events.append(event)

    handler = Collect(events=[])
    dispatcher = get_dispatcher()
    dispatcher.add_event_handler(handler)
    try:
        ScriptedLLM(["seen"]).complete("instrumented prompt")
    finally:
        dispatcher.event_handlers.remove(handler)
    assert [e.response.text for e in handler.events] == ["seen"]
    assert handler.events[0].prompt == "instrumented prompt"
