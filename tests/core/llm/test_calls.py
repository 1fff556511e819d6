"""LLMCaller with a scripted LLM: cache, retries, time-outs, concurrency, streams, meters."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from llama_index.core.base.llms.types import CompletionResponse, LLMMetadata
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler
from llama_index.core.llms import CustomLLM, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.llms.openai_like import OpenAILike
from support import Delay, ScriptedLLM

from llama_index_graphrag_ext.core.llm.cache import LLMCache
from llama_index_graphrag_ext.core.llm.calls import LLMCaller, LLMRequestError, call_copy
from llama_index_graphrag_ext.core.llm.parse import strip_reasoning
from llama_index_graphrag_ext.core.llm.reasoning import ReasoningFilter
from llama_index_graphrag_ext.core.llm.retry import RetryPolicy
from llama_index_graphrag_ext.core.llm.steps import LLMFallbackError
from llama_index_graphrag_ext.core.llm.usage import UsageMeter
from llama_index_graphrag_ext.core.text.tokens import count_tokens

FAST = RetryPolicy(base_delay=0.0, max_delay=0.0, timeout=5.0)
CALLS_LOG = "llama_index_graphrag_ext.core.llm.calls"


def words(text: str) -> int:
    return len(text.split())


class Status(Exception):
    """A client error carrying an HTTP status, as most SDKs' errors do."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"HTTP error {status_code}")
        self.status_code = status_code


class InFlight:
    """An async scripted answer that records the peak number of calls in flight."""

    def __init__(self, delay: float = 0.02) -> None:
        self.delay, self.now, self.peak = delay, 0, 0

    async def __call__(self, prompt: str) -> str:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.now -= 1
        return f"answer to {prompt}"


# --------------------------------------------------------------------------- complete and cache


async def test_complete_strips_reasoning_keeps_raw_and_counts_usage():
    raw = "<think>The user wants the capital.</think>\nAnswer: Paris"
    caller = LLMCaller(ScriptedLLM([raw]), retry=FAST)
    reply = await caller.acomplete("What is the capital of France?")
    assert (reply.text, reply.raw, reply.from_cache) == ("Answer: Paris", raw, False)
    snap = caller.meter.snapshot()
    assert (snap["calls"], snap["prompt_tokens"], snap["completion_tokens"]) == (1, 6, words(raw))
    assert snap["retries"] == snap["failures"] == snap["cache_hits"] == 0


async def test_tokens_are_counted_when_the_llm_reports_none():
    caller, prompt = LLMCaller(MockLLM(), retry=FAST), "Count the tokens of this prompt."
    reply = await caller.acomplete(prompt)
    assert caller.meter.prompt_tokens == count_tokens(prompt)
    assert caller.meter.completion_tokens == count_tokens(reply.text) > 0


async def test_token_counting_handler_sees_calls_but_not_cache_hits():
    counter = TokenCountingHandler()
    llm = ScriptedLLM(["one two three"], callback_manager=CallbackManager([counter]))
    caller = LLMCaller(llm, cache=LLMCache(), retry=FAST)
    await caller.acomplete("first prompt here")
    await caller.acomplete("first prompt here")
    assert len(counter.llm_token_counts) == 1 and caller.meter.cache_hits == 1
    assert counter.prompt_llm_token_count == caller.meter.prompt_tokens == 3
    assert counter.completion_llm_token_count == caller.meter.completion_tokens == 3


async def test_cache_hit_and_miss():
    llm, cache = ScriptedLLM(lambda p: f"re: {p}"), LLMCache()
    caller = LLMCaller(llm, cache=cache, retry=FAST)
    first = await caller.acomplete("one")
    again = await caller.acomplete("one")
    other = await caller.acomplete("two")
    assert (first.from_cache, again.from_cache, other.from_cache) == (False, True, False)
    assert again.text == first.text == "re: one" and llm.call_count == 2
    assert (caller.meter.calls, caller.meter.cache_hits) == (2, 1)
    # Another caller of the same model shares the cache; another model does not.
    assert (await LLMCaller(llm, cache=cache).acomplete("one")).from_cache
    other_model = ScriptedLLM(lambda p: "b", model_name="b")
    assert (await LLMCaller(other_model, cache=cache).acomplete("one")).text == "b"


def test_a_second_run_over_a_reopened_cache_file_makes_no_calls(tmp_path):
    llm, prompts = ScriptedLLM(lambda p: p.upper()), [f"question {i}" for i in range(4)]
    with LLMCache(tmp_path / "llm.sqlite") as cache:
        caller = LLMCaller(llm, cache=cache, retry=FAST)
        first = [caller.complete(p).text for p in prompts]
    with LLMCache(tmp_path / "llm.sqlite") as cache:
        again = LLMCaller(llm, cache=cache, retry=FAST)
        assert [again.complete(p).text for p in prompts] == first
    assert llm.call_count == 4 and again.meter.calls == 0 and again.meter.cache_hits == 4


async def test_rejected_replies_are_returned_but_never_cached():
    llm, cache = ScriptedLLM(["I am not sure.", "Paris", "never"]), LLMCache()
    caller = LLMCaller(llm, cache=cache, retry=FAST)
    accept = lambda text: text == "Paris"  # noqa: E731
    assert (await caller.acomplete("q", accept=accept)).text == "I am not sure."
    assert len(cache) == 0
    assert (await caller.acomplete("q", accept=accept)).text == "Paris"
    hit = await caller.acomplete("q", accept=accept)
    assert hit.from_cache and llm.call_count == 2
    # A cached reply the check now rejects is asked again.
    cache.put(caller.cache_key("stale"), "garbage from an older run")
    llm2 = ScriptedLLM(["fresh"])
    fresh = await LLMCaller(llm2, cache=cache).acomplete("stale", accept=lambda t: t == "fresh")
    assert fresh.text == "fresh" and llm2.call_count == 1
    assert cache.get(caller.cache_key("stale")) == "fresh"


# --------------------------------------------------------------------------- retries and time-outs


@pytest.mark.parametrize(
    "error", [TimeoutError(), ConnectionError("reset"), Status(503), Status(429), Status(500)]
)
async def test_retryable_errors_are_retried(error, caplog):
    llm = ScriptedLLM([error, "ok"])
    caller = LLMCaller(llm, retry=FAST)
    with caplog.at_level(logging.WARNING, logger=CALLS_LOG):
        assert (await caller.acomplete("p")).text == "ok"
    assert llm.call_count == 2
    assert (caller.meter.calls, caller.meter.retries, caller.meter.failures) == (2, 1, 0)
    assert any("attempt 1/3" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "error", [Status(401), Status(400), Status(403), ValueError("bad"), KeyError("k")]
)
async def test_non_retryable_errors_fail_at_once(error):
    llm = ScriptedLLM([error, "never"])
    caller = LLMCaller(llm, retry=FAST)
    refused = isinstance(error, Status) and error.status_code in (401, 403)
    with pytest.raises(LLMRequestError if refused else type(error)) as raised:
        await caller.acomplete("p")
    # A refusal no retry can fix is the suite's own error, the client's one its cause.
    assert not refused or (raised.value.kind, raised.value.__cause__) == ("not authorised", error)
    assert llm.call_count == 1 and caller.meter.calls == 1 and caller.meter.retries == 0


async def test_failure_for_good_is_counted_and_logged(caplog):
    caller = LLMCaller(ScriptedLLM([Status(401)]), retry=FAST, cache=LLMCache())
    with caplog.at_level(logging.ERROR, logger=CALLS_LOG), pytest.raises(LLMRequestError):
        await caller.acomplete("p")
    assert caller.meter.failures == 1
    assert any(
        "failed for good" in r.getMessage() and "401" in r.getMessage() for r in caplog.records
    )


async def test_retries_exhausted():
    llm, cache = (
        ScriptedLLM([ConnectionError("a"), ConnectionError("b"), ConnectionError("c")]),
        LLMCache(),
    )
    caller = LLMCaller(llm, cache=cache, retry=FAST)
    with pytest.raises(ConnectionError, match="c"):
        await caller.acomplete("p")
    assert (caller.meter.calls, caller.meter.retries, caller.meter.failures) == (3, 2, 1)
    assert len(cache) == 0


async def test_value_error_from_the_llm_counts_as_a_failure():
    caller = LLMCaller(ScriptedLLM([ValueError("Requested tokens (9000) exceed context window")]))
    with pytest.raises(ValueError):
        await caller.acomplete("p")
    assert caller.meter.failures == 1


async def test_backoff_waits_between_attempts():
    llm = ScriptedLLM([ConnectionError("1"), ConnectionError("2"), "ok"])
    caller = LLMCaller(llm, retry=RetryPolicy(base_delay=0.04, max_delay=1.0))
    start = time.perf_counter()
    assert (await caller.acomplete("p")).text == "ok"
    assert time.perf_counter() - start >= 0.06  # at least half of 0.04 and of 0.08


async def test_per_attempt_timeout_is_retried():
    llm = ScriptedLLM([Delay(2.0, "late"), "fast"])
    caller = LLMCaller(llm, retry=RetryPolicy(base_delay=0.0, timeout=0.05))
    start = time.perf_counter()
    assert (await caller.acomplete("p")).text == "fast"
    assert time.perf_counter() - start < 1.0
    assert (caller.meter.calls, caller.meter.retries, caller.meter.failures) == (2, 1, 0)
    stuck = LLMCaller(
        ScriptedLLM([Delay(2.0)] * 2), retry=RetryPolicy(2, timeout=0.05, base_delay=0)
    )
    with pytest.raises(TimeoutError):
        await stuck.acomplete("p")
    assert (stuck.meter.calls, stuck.meter.failures) == (2, 1)


async def test_cancellation_is_not_retried():
    llm = ScriptedLLM([Delay(5.0, "late"), "never"])
    caller = LLMCaller(llm, retry=RetryPolicy(base_delay=0.0, timeout=None))
    task = asyncio.ensure_future(caller.acomplete("p"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0.05)
    assert llm.call_count == 1 and caller.meter.retries == 0


def test_constructor_validation_and_repr():
    with pytest.raises(ValueError):
        LLMCaller(None)
    with pytest.raises(ValueError):
        LLMCaller(ScriptedLLM([]), max_concurrency=0)
    caller = LLMCaller(ScriptedLLM([], model_name="m"))
    assert "ScriptedLLM(m)" in repr(caller) and caller.mode == "text"
    assert caller.llm_name == "ScriptedLLM(m)"


# --------------------------------------------------------------------------- concurrency


async def test_amap_bounds_concurrency_and_keeps_order():
    tracker = InFlight()
    caller = LLMCaller(ScriptedLLM(tracker), max_concurrency=3, retry=FAST)
    prompts = [f"p{i}" for i in range(12)]
    out = await caller.amap(prompts, lambda p: caller.acomplete(p), show_progress=True)
    assert [r.text for r in out] == [f"answer to p{i}" for i in range(12)]
    assert tracker.peak == 3
    # Plain gathers share the same bound.
    await asyncio.gather(*(caller.acomplete(f"g{i}") for i in range(8)))
    assert tracker.peak == 3
    assert await caller.amap([], caller.acomplete) == []


async def test_nested_calls_inside_amap_do_not_deadlock_at_concurrency_one():
    tracker = InFlight(delay=0.005)
    caller = LLMCaller(ScriptedLLM(tracker), max_concurrency=1, retry=FAST)

    async def two_steps(prompt):
        first = (await caller.acomplete(prompt)).text
        both = await asyncio.gather(caller.acomplete(first + "!"), caller.acomplete(first + "?"))
        return [r.text for r in both]

    out = await asyncio.wait_for(caller.amap(["a", "b"], two_steps), timeout=5)
    assert out[0] == ["answer to answer to a!", "answer to answer to a?"]
    assert tracker.peak == 1


async def test_amap_puts_exceptions_in_their_slots():
    llm = ScriptedLLM({"bad": Status(401), "": "fine"})
    caller = LLMCaller(llm, retry=FAST)
    out = await caller.amap(["one", "bad one", "three"], lambda p: caller.acomplete(p))
    assert out[0].text == out[2].text == "fine"
    assert isinstance(out[1], LLMRequestError) and isinstance(out[1].__cause__, Status)


async def test_amap_lets_fallback_errors_through():
    caller = LLMCaller(ScriptedLLM(default="x"), retry=FAST)

    async def fn(item):
        if item == 2:
            raise LLMFallbackError("on_llm_failure='raise'")
        return item

    with pytest.raises(LLMFallbackError):
        await caller.amap([1, 2, 3], fn)
    assert caller.map([1, 3], lambda i: asyncio.sleep(0, i)) == [1, 3]


class Blocking(CustomLLM):
    """A blocking LLM (like llama.cpp) that records how many calls overlap."""

    now: int = 0
    peak: int = 0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="blocking")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.now += 1
        self.peak = max(self.peak, self.now)
        time.sleep(0.02)
        self.now -= 1
        return CompletionResponse(text=f"re {prompt}")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError


async def test_blocking_llm_runs_off_the_loop_one_call_at_a_time():
    llm = Blocking()
    caller = LLMCaller(llm, max_concurrency=4, retry=FAST)
    out = await caller.amap(["a", "b", "c", "d"], lambda p: caller.acomplete(p))
    assert [r.text for r in out] == ["re a", "re b", "re c", "re d"]
    assert llm.peak == 1  # one lock per model object: it is not thread-safe


# --------------------------------------------------------------------------- streams


class SlowStream(ScriptedLLM):
    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        async def gen():
            text = ""
            for piece in ["alpha ", "beta ", "gamma"]:
                await asyncio.sleep(0.03)
                text += piece
                yield CompletionResponse(text=text, delta=piece)

        return gen()


def test_stream_pieces_make_the_reply_and_the_second_time_come_from_cache():
    llm, cache = ScriptedLLM(["The capital of France is Paris."]), LLMCache()
    caller = LLMCaller(llm, cache=cache, retry=FAST, reasoning_budget=0)
    pieces = list(caller.stream("Capital?"))
    assert len(pieces) > 1 and "".join(pieces) == "The capital of France is Paris."
    assert caller.meter.calls == 1 and caller.meter.completion_tokens == 6
    assert list(caller.stream("Capital?")) == ["The capital of France is Paris."]
    assert llm.call_count == 1 and caller.meter.cache_hits == 1
    assert caller.complete("Capital?").from_cache  # the same entry serves complete()


async def test_astream_retried_until_the_first_piece():
    llm = ScriptedLLM([ConnectionError("reset"), "one two three"])
    caller = LLMCaller(llm, retry=FAST)
    assert "".join([p async for p in caller.astream("p")]) == "one two three"
    assert (caller.meter.calls, caller.meter.retries) == (2, 1)


def test_abandoned_stream_is_not_cached():
    cache = LLMCache()
    # Declared not to reason: its stream is shown as it arrives from the first reply on.
    caller = LLMCaller(SlowStream(default="unused"), cache=cache, retry=FAST, reasoning_budget=0)
    stream = caller.stream("p")
    assert next(stream) == "alpha "
    stream.close()
    time.sleep(0.15)
    assert len(cache) == 0
    assert "".join(caller.stream("p")) == "alpha beta gamma"
    assert len(cache) == 1


# --------------------------------------------------------------------------- meters and copies


async def test_with_meter_counts_into_another_meter_and_shares_the_cache():
    llm, cache = ScriptedLLM(["a b", "c"]), LLMCache()
    caller = LLMCaller(llm, cache=cache, retry=FAST)
    query_meter = UsageMeter()
    view = caller.with_meter(query_meter)
    await view.acomplete("first")
    assert query_meter.calls == 1 and caller.meter.calls == 0
    assert (await caller.acomplete("first")).from_cache
    assert caller.meter.cache_hits == 1 and query_meter.cache_hits == 0
    assert view.cache is caller.cache and view.llm is caller.llm


def test_call_copy_turns_off_client_retries_without_touching_the_original():
    llm = OpenAILike(
        model="m", api_base="http://127.0.0.1:9/v1", api_key="k", max_retries=5, max_tokens=64
    )
    copy = call_copy(llm, RetryPolicy(timeout=7.0))
    assert (copy.max_retries, copy.timeout, copy.max_tokens) == (0, 7.0, None)
    assert copy.additional_kwargs["stream_options"] == {"include_usage": True}
    assert (llm.max_retries, llm.max_tokens) == (5, 64) and copy is not llm
    scripted = ScriptedLLM(["x"])
    assert call_copy(scripted, FAST) is scripted


@pytest.mark.parametrize(
    "text",
    [
        "<think>Felix was born in Pest.</think>\n\nPest",
        "  <Thinking>a < b, so</Thinking> The answer is <b>Pest</b>.",
        "Pest <think>second thoughts</think> and Buda",
        "<reasoning>cut before the answer",
        "x < 3 and <thin ice> is not a tag",
        "no reasoning at all",
    ],
)
def test_reasoning_filter_shows_what_strip_reasoning_keeps_however_the_text_is_cut(text):
    for size in (1, 2, 3, 5, 8, len(text)):
        reasoning = ReasoningFilter()
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        shown = "".join(reasoning.feed(p) for p in pieces) + reasoning.flush()
        assert shown.rstrip() == strip_reasoning(text)


def test_a_thinking_stream_and_its_cached_replay_read_the_same():
    llm = ScriptedLLM(["<think>Felix, born in Pest.</think>\nPest"])
    caller = LLMCaller(llm, cache=LLMCache())
    fresh = list(caller.stream("Where was Felix born?"))
    assert "".join(fresh) == "Pest"
    assert list(caller.stream("Where was Felix born?")) == ["Pest"]
    assert llm.call_count == 1
