"""The usage meter, what responses report, and who sees which LLM calls."""

from __future__ import annotations

import asyncio
import enum
import threading
from types import SimpleNamespace

import pytest
from llama_index.core import get_response_synthesizer
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse
from llama_index.core.schema import NodeWithScore, TextNode
from openai.types.chat import ChatCompletion
from support import Delay, ScriptedLLM

from llama_index_graphrag_ext.core.llm.usage import (
    UsageMeter,
    capture,
    count_llm_calls,
    finish_reason,
    reported_usage,
)
from llama_index_graphrag_ext.core.text.tokens import count_tokens


def words(text: str) -> int:
    return len(text.split())


# --------------------------------------------------------------------------- the meter


def test_meter_add_snapshot_and_total():
    meter = UsageMeter()
    meter.add(calls=2, prompt_tokens=10, completion_tokens=5)
    meter.add(retries=1, cache_hits=3)
    assert (meter.calls, meter.retries, meter.cache_hits, meter.total_tokens) == (2, 1, 3, 15)
    snap = meter.snapshot()
    assert set(snap) == {*UsageMeter.FIELDS, "total_tokens"}
    assert snap["total_tokens"] == 15 and snap["failures"] == 0
    assert "calls=2" in repr(meter) and "failures" not in repr(meter)


def test_meter_take_returns_calls_and_tokens_then_resets():
    meter = UsageMeter()
    meter.add(calls=3, prompt_tokens=7, completion_tokens=2, failures=1)
    assert meter.take() == (3, 9)
    assert all(v == 0 for v in meter.snapshot().values())
    assert meter.take() == (0, 0)


def test_meter_unknown_counter_raises_and_changes_nothing():
    meter = UsageMeter()
    with pytest.raises(KeyError, match="bogus"):
        meter.add(calls=1, bogus=1)
    assert meter.calls == 0
    meter.add(calls=1)
    meter.reset()
    assert meter.calls == 0


def test_meter_is_thread_safe():
    meter = UsageMeter()

    def work():
        for _ in range(2000):
            meter.add(calls=1, prompt_tokens=2)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert meter.calls == 16000 and meter.prompt_tokens == 32000


# --------------------------------------------------------------------------- responses


def openai_completion(finish: str = "stop") -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "Paris"},
                    "finish_reason": finish,
                }
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13},
        }
    )


LLAMA_CPP_RAW = {  # what llama-cpp-python's create_completion returns
    "id": "cmpl-1",
    "object": "text_completion",
    "created": 0,
    "model": "smollm2.gguf",
    "choices": [{"text": "Par", "index": 0, "logprobs": None, "finish_reason": "length"}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
}
ANTHROPIC_RAW = {
    "id": "msg_1",
    "type": "message",
    "stop_reason": "max_tokens",
    "usage": {"input_tokens": 5, "output_tokens": 6},
}


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (
            CompletionResponse(
                text="x", raw={"usage": {"prompt_tokens": 3, "completion_tokens": 4}}
            ),
            (3, 4),
        ),
        (CompletionResponse(text="x", raw=LLAMA_CPP_RAW), (9, 1)),
        (CompletionResponse(text="x", raw=ANTHROPIC_RAW), (5, 6)),
        (
            CompletionResponse(
                text="x",
                raw={"usage_metadata": {"prompt_token_count": 7, "candidates_token_count": 8}},
            ),
            (7, 8),
        ),
        (ChatResponse(message=ChatMessage(content="Paris"), raw=openai_completion()), (11, 2)),
        # LlamaIndex's OpenAI puts a stream's usage in additional_kwargs.
        (
            CompletionResponse(
                text="x", additional_kwargs={"prompt_tokens": 12, "completion_tokens": 1}
            ),
            (12, 1),
        ),
        (CompletionResponse(text="x", raw={"usage": {"prompt_tokens": 3}}), (3, None)),
        (CompletionResponse(text="x", raw={"usage": {"prompt_tokens": True}}), (None, None)),
        (CompletionResponse(text="x", raw={"usage": None}), (None, None)),
        (CompletionResponse(text="x"), (None, None)),
        (
            SimpleNamespace(
                raw=SimpleNamespace(usage=SimpleNamespace(prompt_tokens=2, completion_tokens=3))
            ),
            (2, 3),
        ),
    ],
)
def test_reported_usage(response, expected):
    assert reported_usage(response) == expected


class Finish(enum.Enum):
    LENGTH = "length"


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (CompletionResponse(text="x", raw={"choices": [{"finish_reason": "stop"}]}), "stop"),
        (CompletionResponse(text="x", raw={"choices": [{"finish_reason": "length"}]}), "length"),
        (ChatResponse(message=ChatMessage(content="P"), raw=openai_completion("length")), "length"),
        (
            ChatResponse(message=ChatMessage(content="P"), raw=openai_completion("tool_calls")),
            "tool_calls",
        ),
        (CompletionResponse(text="x", raw=LLAMA_CPP_RAW), "length"),
        (CompletionResponse(text="x", raw=ANTHROPIC_RAW), "length"),
        (CompletionResponse(text="x", raw={"stop_reason": "end_turn"}), "end_turn"),
        (CompletionResponse(text="x", raw={"finish_reason": "MAX_TOKENS"}), "length"),
        (CompletionResponse(text="x", raw={"finish_reason": "max_output_tokens"}), "length"),
        (
            CompletionResponse(text="x", raw={"choices": [{"finish_reason": Finish.LENGTH}]}),
            "length",
        ),
        (CompletionResponse(text="x", additional_kwargs={"finish_reason": "length"}), "length"),
        (CompletionResponse(text="x", raw={"choices": []}), None),
        (CompletionResponse(text="x"), None),
    ],
)
def test_finish_reason(response, expected):
    assert finish_reason(response) == expected


# --------------------------------------------------------------------------- captures


async def test_concurrent_tasks_each_capture_only_their_own_calls():
    llm = ScriptedLLM(lambda prompt: Delay(0.01, f"re {prompt}"))

    async def worker(name):
        with capture() as cap:
            for i in range(3):
                await llm.acomplete(f"{name} {i}")
                await asyncio.sleep(0)
        return cap

    cap_a, cap_b = await asyncio.gather(worker("a"), worker("b"))
    assert [p for p, _ in cap_a.ended] == ["a 0", "a 1", "a 2"]
    assert [p for p, _ in cap_b.ended] == ["b 0", "b 1", "b 2"]
    assert cap_a.last[1].text == "re a 2"


async def test_capture_follows_to_thread_and_nesting_but_not_outside_calls():
    llm = ScriptedLLM(default="ok")
    llm.complete("before")
    with capture() as outer:
        await asyncio.to_thread(llm.complete, "in a worker thread")
        with capture() as inner:
            llm.complete("inner")
    llm.complete("after")
    assert [p for p, _ in outer.ended] == ["in a worker thread", "inner"]
    assert [p for p, _ in inner.ended] == ["inner"]


def test_capture_tokens_reported_or_counted():
    llm = ScriptedLLM(default="three word answer")
    with capture() as cap:
        assert cap.last is None
        assert cap.tokens("a five word prompt here") == (count_tokens("a five word prompt here"), 0)
        llm.complete("a five word prompt here")
    assert cap.tokens("ignored") == (5, 3)  # ScriptedLLM reports word counts


def test_capture_of_chat_ends_with_the_outermost_call():
    llm = ScriptedLLM(default="Paris")
    with capture() as cap:
        llm.chat([ChatMessage(role="user", content="capital of France?")])
    # CustomLLM's chat runs complete inside it: both end, the chat last.
    assert len(cap.ended) == 2
    assert isinstance(cap.last[1], ChatResponse)


# --------------------------------------------------------------------------- process-wide counts


def test_count_llm_calls_counts_outermost_calls_and_reported_tokens():
    llm = ScriptedLLM(default="two words")
    with count_llm_calls() as counter:
        llm.complete("one two three")
        llm.chat([ChatMessage(role="user", content="hello there")])  # complete runs inside
        asyncio.run(llm.acomplete("async call"))
        list(llm.stream_complete("a streamed call"))
    assert counter.calls == 4
    assert counter.completion_tokens == 8
    assert counter.prompt_tokens >= 3 + 2 + 2 + 3
    total = counter.total_tokens
    assert counter.take() == (4, total)


def test_count_llm_calls_sees_threads_and_a_synthesizer():
    llm = ScriptedLLM(default="Paris")
    synth = get_response_synthesizer(llm=llm, response_mode="compact")
    nodes = [NodeWithScore(node=TextNode(text="Paris is the capital of France."), score=1.0)]
    with count_llm_calls() as counter:
        assert str(synth.synthesize("capital of France?", nodes=nodes)) == "Paris"
        worker = threading.Thread(target=llm.complete, args=("from a thread",))
        worker.start()
        worker.join()
    assert counter.calls == 2


def test_nothing_counted_outside_the_block_and_failed_calls_not_counted():
    llm = ScriptedLLM([ConnectionError("down"), "ok"], default="x")
    with count_llm_calls() as counter, pytest.raises(ConnectionError):
        llm.complete("fails")
    llm.complete("after")
    assert counter.calls == 0


def test_calls_after_a_failed_call_are_still_counted():
    # A failed call emits no end event; it must not hide the calls that follow it.
    llm = ScriptedLLM([ConnectionError("down"), "ok", "fine"])
    with count_llm_calls() as counter:
        with pytest.raises(ConnectionError):
            llm.complete("fails")
        llm.complete("one two")
        llm.chat([ChatMessage(role="user", content="three")])
    assert counter.calls == 2
    assert counter.completion_tokens == 2


async def test_calls_after_a_failed_async_call_are_still_counted():
    llm = ScriptedLLM([TimeoutError(), "ok", "ok"])
    with count_llm_calls() as counter:
        with pytest.raises(TimeoutError):
            await llm.acomplete("fails")
        await llm.acomplete("a")
        await llm.acomplete("b")
    assert counter.calls == 2


def test_two_meters_open_at_once_both_count():
    llm = ScriptedLLM(default="x")
    with count_llm_calls() as first:
        llm.complete("a")
        with count_llm_calls() as second:
            llm.complete("b")
    assert (first.calls, second.calls) == (2, 1)
