"""Tests for structured LLM calls: JSON repair, retries, cache, concurrency, usage."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from llama_index.core.callbacks import CallbackManager, TokenCountingHandler
from llama_index.core.llms import MockLLM
from llama_index.core.utils import get_tokenizer

from llama_index_graphrag_ext.core.cache import LLMCache
from llama_index_graphrag_ext.core.llm import (
    LLMOutputError,
    RetryPolicy,
    StructuredLLM,
    UsageMeter,
    parse_json_lenient,
    parse_numbered_lines,
    reported_usage,
    run_sync,
)
from llama_index_graphrag_ext.testing import Delay, ScriptedLLM

FAST = RetryPolicy(base_delay=0.0, timeout=5.0)


def words(text: str) -> int:
    return len(text.split())


# --------------------------------------------------------------------------- JSON parsing


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ("[1, 2, 3]", [1, 2, 3]),
        ('"plain"', "plain"),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n[{"q": "x"}]\n```', [{"q": "x"}]),
        ('Here you go:\n```json\n{"a": [1, 2]}\n```\nAnything else?', {"a": [1, 2]}),
        ('```json\n{"a": 1', {"a": 1}),  # unclosed fence, cut-off object
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        ("{'a': 'x', 'b': ['y', 'z']}", {"a": "x", "b": ["y", "z"]}),
        ("{'name': 'O'Brien'}", {"name": "O'Brien"}),
        ('Sure! {"a": 1} Hope this helps.', {"a": 1}),
        ("The JSON is [1, 2] as asked", [1, 2]),
        (
            '{"t": "braces } and { and ] inside", "n": 2}',
            {"t": "braces } and { and ] inside", "n": 2},
        ),
        ('noise {"outer": {"inner": "}"}} trailing }', {"outer": {"inner": "}"}}),
        ("{'ok': True, 'bad': False, 'none': None}", {"ok": True, "bad": False, "none": None}),
        ('{"ok": True, "x": None}', {"ok": True, "x": None}),
        ('{name: "x", age: 3}', {"name": "x", "age": 3}),
        ("{\u201ckey\u201d: \u201cvalue\u201d}", {"key": "value"}),
        ('{"a": 1 "b": 2}', {"a": 1, "b": 2}),
        ('{"q": "He said "hi" to me"}', {"q": 'He said "hi" to me'}),
        ('{"a": "line one\nline two"}', {"a": "line one\nline two"}),
        ('{"a": 1} // a comment', {"a": 1}),
        ('{"n": +1, "m": .5}', {"n": 1, "m": 0.5}),
        ('[{"s": "a"}, {"s": "b"', [{"s": "a"}, {"s": "b"}]),
        ('[Note] result: {"a": 2}', {"a": 2}),
        ('{"answer": yes}', {"answer": "yes"}),
        ('```python\n{"a": (1, 2)}\n```', {"a": [1, 2]}),
        (
            '{"unicode": "caf\u00e9 \u2013 \u65e5\u672c"}',
            {"unicode": "caf\u00e9 \u2013 \u65e5\u672c"},
        ),
    ],
)
def test_parse_json_lenient(text, expected):
    assert parse_json_lenient(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "no json here at all", "{{{", "[some words", "}{"])
def test_parse_json_lenient_garbage(text):
    with pytest.raises(LLMOutputError) as info:
        parse_json_lenient(text)
    assert info.value.raw == text or (not text.strip() and info.value.raw == text)
    assert isinstance(info.value, ValueError)


def test_parse_json_lenient_rejects_non_strings():
    with pytest.raises(LLMOutputError):
        parse_json_lenient(None)  # type: ignore[arg-type]


def test_parse_json_lenient_is_fast_on_long_garbage():
    text = "{ [ " * 2000 + "word " * 5000
    start = time.perf_counter()
    with pytest.raises(LLMOutputError):
        parse_json_lenient(text)
    assert time.perf_counter() - start < 5.0


def test_parse_numbered_lines():
    text = (
        "Here are the questions:\n"
        "1. What is X?\n"
        "2) Why Y?\n"
        "\n"
        "(3) How Z?\n"
        "- dash item\n"
        "* star item\n"
        "[bracketed]\n"
        "[7] numbered in brackets\n"
        '\u2022 "quoted"\n'
        "4.   \n"
    )
    assert parse_numbered_lines(text) == [
        "What is X?",
        "Why Y?",
        "How Z?",
        "dash item",
        "star item",
        "bracketed",
        "numbered in brackets",
        "quoted",
    ]


def test_parse_numbered_lines_plain_lines_and_numbers_in_text():
    assert parse_numbered_lines("alpha\n\n  beta  \n") == ["alpha", "beta"]
    assert parse_numbered_lines("1.5 million people\n2024 was a year") == [
        "1.5 million people",
        "2024 was a year",
    ]
    assert parse_numbered_lines("") == []


# --------------------------------------------------------------------------- policy and meter


def test_retry_policy_validation_and_backoff():
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(timeout=0)
    policy = RetryPolicy(base_delay=0.5, max_delay=2.0)
    for attempt, full in [(1, 0.5), (2, 1.0), (3, 2.0), (6, 2.0)]:
        for _ in range(20):
            assert full / 2 <= policy.backoff(attempt) <= full
    assert RetryPolicy(base_delay=0).backoff(3) == 0.0
    assert not policy.should_retry(asyncio.CancelledError())
    assert not RetryPolicy(retry_on=(BaseException,)).should_retry(KeyboardInterrupt())
    assert policy.should_retry(RuntimeError())
    assert not RetryPolicy(retry_on=(TimeoutError,)).should_retry(RuntimeError())


def test_usage_meter():
    meter = UsageMeter()
    meter.add(calls=2, prompt_tokens=10, completion_tokens=5)
    assert meter.calls == 2 and meter.total_tokens == 15
    snap = meter.snapshot()
    assert snap["total_tokens"] == 15 and snap["cache_hits"] == 0
    other = UsageMeter()
    other.add(calls=1, failures=1)
    total = meter + other
    assert total.calls == 3 and total.failures == 1 and meter.calls == 2
    meter.merge(other)
    assert meter.calls == 3
    with pytest.raises(KeyError):
        meter.add(bogus=1)
    meter.reset()
    assert all(v == 0 for v in meter.snapshot().values())
    assert "calls=0" in repr(meter)


def test_usage_meter_is_thread_safe():
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


def test_reported_usage_variants():
    from llama_index.core.base.llms.types import CompletionResponse

    openai_style = CompletionResponse(
        text="x", raw={"usage": {"prompt_tokens": 3, "completion_tokens": 4}}
    )
    anthropic_style = CompletionResponse(
        text="x", raw={"usage": {"input_tokens": 5, "output_tokens": 6}}
    )
    assert reported_usage(openai_style) == (3, 4)
    assert reported_usage(anthropic_style) == (5, 6)
    assert reported_usage(CompletionResponse(text="x")) == (None, None)


async def test_tokens_estimated_when_llm_reports_none():
    llm = MockLLM(max_tokens=5)
    s = StructuredLLM(llm, retry=FAST)
    prompt = "Count the tokens of this prompt, please."
    text = await s.acomplete(prompt)
    tokenizer = get_tokenizer()
    assert s.meter.prompt_tokens == len(tokenizer(prompt))
    assert s.meter.completion_tokens == len(tokenizer(text))


# --------------------------------------------------------------------------- completion, retries, timeouts


async def test_acomplete_records_usage_from_raw():
    llm = ScriptedLLM(["three word answer"])
    s = StructuredLLM(llm)
    assert await s.acomplete("a four word prompt") == "three word answer"
    assert s.meter.snapshot() == {
        "calls": 1,
        "cache_hits": 0,
        "prompt_tokens": 4,
        "completion_tokens": 3,
        "retries": 0,
        "failures": 0,
        "parse_failures": 0,
        "total_tokens": 7,
    }


async def test_retries_then_succeeds(caplog):
    llm = ScriptedLLM([RuntimeError("boom"), ConnectionError, "ok"])
    s = StructuredLLM(llm, retry=FAST)
    with caplog.at_level(logging.WARNING, logger="llama_index_graphrag_ext.core.llm"):
        assert await s.acomplete("p") == "ok"
    assert llm.call_count == 3
    assert (s.meter.calls, s.meter.retries, s.meter.failures) == (3, 2, 0)
    retry_logs = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(retry_logs) == 2
    assert (
        "attempt 1/3" in retry_logs[0].getMessage() and "RuntimeError" in retry_logs[0].getMessage()
    )
    assert (
        "attempt 2/3" in retry_logs[1].getMessage()
        and "ConnectionError" in retry_logs[1].getMessage()
    )


async def test_backoff_waits_between_attempts():
    llm = ScriptedLLM([RuntimeError("1"), RuntimeError("2"), "ok"])
    s = StructuredLLM(llm, retry=RetryPolicy(base_delay=0.04, max_delay=1.0))
    start = time.perf_counter()
    assert await s.acomplete("p") == "ok"
    # Waits are at least half of 0.04 and 0.08.
    assert time.perf_counter() - start >= 0.06


async def test_retries_exhausted_counts_failure(caplog):
    llm = ScriptedLLM([RuntimeError("a"), RuntimeError("b"), RuntimeError("c"), "never"])
    cache = LLMCache()
    s = StructuredLLM(llm, cache=cache, retry=FAST)
    with caplog.at_level(logging.WARNING), pytest.raises(RuntimeError, match="c"):
        await s.acomplete("p")
    assert (s.meter.calls, s.meter.retries, s.meter.failures) == (3, 2, 1)
    assert len(cache) == 0
    assert any(r.levelno == logging.ERROR for r in caplog.records)


async def test_non_retryable_error_fails_at_once():
    llm = ScriptedLLM([KeyError("k"), "never"])
    s = StructuredLLM(llm, retry=RetryPolicy(base_delay=0, retry_on=(TimeoutError,)))
    with pytest.raises(KeyError):
        await s.acomplete("p")
    assert llm.call_count == 1 and s.meter.failures == 1 and s.meter.retries == 0


async def test_timeout_is_retried():
    llm = ScriptedLLM([Delay(2.0, "late"), "fast"])
    s = StructuredLLM(llm, retry=RetryPolicy(base_delay=0, timeout=0.05))
    start = time.perf_counter()
    assert await s.acomplete("p") == "fast"
    assert time.perf_counter() - start < 1.0
    assert (s.meter.calls, s.meter.retries, s.meter.failures) == (2, 1, 0)


async def test_timeouts_exhausted():
    llm = ScriptedLLM([Delay(2.0, "late")] * 2)
    s = StructuredLLM(llm, retry=RetryPolicy(max_attempts=2, base_delay=0, timeout=0.05))
    with pytest.raises(asyncio.TimeoutError):
        await s.acomplete("p")
    assert (s.meter.calls, s.meter.retries, s.meter.failures) == (2, 1, 1)


async def test_cancellation_is_not_retried():
    llm = ScriptedLLM([Delay(5.0, "late"), "never"])
    s = StructuredLLM(llm, retry=RetryPolicy(base_delay=0, timeout=None))
    task = asyncio.ensure_future(s.acomplete("p"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert llm.call_count == 1 and s.meter.retries == 0


def test_constructor_validation():
    with pytest.raises(ValueError):
        StructuredLLM(ScriptedLLM([]), max_concurrency=0)
    with pytest.raises(ValueError):
        StructuredLLM(None)


# --------------------------------------------------------------------------- JSON calls


async def test_ajson_repairs_malformed_output():
    llm = ScriptedLLM(["I think the answer is... not sure", '{"entities": ["A", "B"]}'])
    cache = LLMCache()
    s = StructuredLLM(llm, cache=cache, retry=FAST)
    prompt = "List the entities as JSON."
    assert await s.ajson(prompt) == {"entities": ["A", "B"]}
    assert llm.call_count == 2
    repair_prompt = llm.calls[1]
    assert repair_prompt.startswith(prompt) and len(repair_prompt) > len(prompt)
    assert "JSON" in repair_prompt[len(prompt) :]
    assert s.meter.parse_failures == 0
    # The good answer is cached under the original prompt; the bad one is not.
    assert len(cache) == 1
    again = StructuredLLM(llm, cache=cache)
    assert await again.ajson(prompt) == {"entities": ["A", "B"]}
    assert llm.call_count == 2 and again.meter.cache_hits == 1 and again.meter.calls == 0


async def test_ajson_validate_rejects_shape_and_transforms():
    llm = ScriptedLLM(['["not", "a", "dict"]', '{"answer": "42"}'])
    s = StructuredLLM(llm, retry=FAST)

    def validate(value):
        if not isinstance(value, dict) or "answer" not in value:
            raise ValueError("expected an object with 'answer'")
        return int(value["answer"])

    assert await s.ajson("q", validate=validate) == 42
    assert llm.call_count == 2
    assert "answer" in llm.calls[1]


async def test_ajson_gives_up_and_counts_parse_failure():
    llm = ScriptedLLM(["nope", "still nope", "never json"])
    cache = LLMCache()
    s = StructuredLLM(llm, cache=cache, retry=FAST)
    with pytest.raises(LLMOutputError) as info:
        await s.ajson("q", repair_attempts=2)
    assert info.value.raw == "never json"
    assert llm.call_count == 3
    assert s.meter.parse_failures == 1 and s.meter.failures == 0
    assert len(cache) == 0


async def test_ajson_without_repairs():
    llm = ScriptedLLM(["bad"])
    s = StructuredLLM(llm)
    with pytest.raises(LLMOutputError):
        await s.ajson("q", repair_attempts=0)
    assert llm.call_count == 1
    with pytest.raises(ValueError):
        await s.ajson("q", repair_attempts=-1)


async def test_ajson_replaces_a_stale_bad_cache_entry():
    cache = LLMCache()
    llm = ScriptedLLM(['{"ok": 1}'])
    s = StructuredLLM(llm, cache=cache)
    cache.put(s.cache_key("q"), "garbage from an older run")
    assert await s.ajson("q") == {"ok": 1}
    assert cache.get(s.cache_key("q")) == '{"ok": 1}'


async def test_ajson_errors_from_the_llm_propagate():
    llm = ScriptedLLM([RuntimeError("down")])
    s = StructuredLLM(llm, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(RuntimeError):
        await s.ajson("q")
    assert s.meter.failures == 1 and s.meter.parse_failures == 0


# --------------------------------------------------------------------------- cache


async def test_second_run_makes_zero_llm_calls(tmp_path):
    prompts = [f"question {i}" for i in range(6)]
    llm = ScriptedLLM(lambda p: p.upper())
    path = tmp_path / "cache.sqlite"
    with LLMCache(path) as cache:
        first = StructuredLLM(llm, cache=cache)
        out1 = await first.amap(prompts)
        assert llm.call_count == 6 and first.meter.calls == 6

        second = StructuredLLM(llm, cache=cache)
        out2 = await second.amap(prompts)
        assert out2 == out1
        assert llm.call_count == 6
        assert second.meter.calls == 0 and second.meter.cache_hits == 6

    # A fresh process: reopen the file.
    with LLMCache(path) as reopened:
        third = StructuredLLM(llm, cache=reopened)
        assert await third.amap(prompts) == out1
        assert llm.call_count == 6 and third.meter.cache_hits == 6


async def test_different_models_and_params_do_not_collide():
    cache = LLMCache()
    llm_a = ScriptedLLM(lambda p: "from a", model_name="a")
    llm_b = ScriptedLLM(lambda p: "from b", model_name="b")
    assert await StructuredLLM(llm_a, cache=cache).acomplete("same") == "from a"
    assert await StructuredLLM(llm_b, cache=cache).acomplete("same") == "from b"
    assert await StructuredLLM(llm_a, cache=cache).acomplete("same") == "from a"
    assert llm_a.call_count == 1 and llm_b.call_count == 1

    hot = StructuredLLM(llm_a, cache=cache, params={"temperature": 0.9})
    await hot.acomplete("same")
    await hot.acomplete("same", max_tokens=7)
    assert llm_a.call_count == 3
    assert len(cache) == 4


async def test_params_are_sent_to_the_llm():
    seen = []

    class Recording(ScriptedLLM):
        async def acomplete(self, prompt, formatted=False, **kwargs):
            seen.append(kwargs)
            return await super().acomplete(prompt, formatted=formatted, **kwargs)

    s = StructuredLLM(Recording(["x"]), params={"temperature": 0.0})
    await s.acomplete("p", max_tokens=3)
    assert seen == [{"temperature": 0.0, "max_tokens": 3}]


# --------------------------------------------------------------------------- concurrency


class InFlight:
    """An async scripted answer that records the peak number of calls in flight."""

    def __init__(self, delay: float = 0.02) -> None:
        self.delay = delay
        self.now = 0
        self.peak = 0

    async def __call__(self, prompt: str) -> str:
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.now -= 1
        return f"answer to {prompt}"


async def test_amap_bounds_concurrency_and_keeps_order():
    tracker = InFlight()
    s = StructuredLLM(ScriptedLLM(tracker), max_concurrency=3)
    prompts = [f"p{i}" for i in range(12)]
    out = await s.amap(prompts)
    assert out == [f"answer to p{i}" for i in range(12)]
    assert tracker.peak == 3


async def test_gather_of_acomplete_is_bounded_too():
    tracker = InFlight()
    s = StructuredLLM(ScriptedLLM(tracker), max_concurrency=2)
    await asyncio.gather(*(s.acomplete(f"p{i}") for i in range(8)))
    assert tracker.peak == 2


async def test_amap_with_nested_calls_does_not_deadlock():
    tracker = InFlight(delay=0.005)
    s = StructuredLLM(ScriptedLLM(tracker), max_concurrency=1)

    async def two_step(prompt):
        first = await s.acomplete(prompt)
        parts = await asyncio.gather(s.acomplete(first + "!"), s.acomplete(first + "?"))
        return parts

    out = await asyncio.wait_for(s.amap(["a", "b"], two_step), timeout=5)
    assert out[0] == ["answer to answer to a!", "answer to answer to a?"]
    assert tracker.peak == 1


async def test_amap_returns_exceptions_in_place(caplog):
    llm = ScriptedLLM({"bad": ValueError("no"), "": "fine"})
    s = StructuredLLM(llm, retry=RetryPolicy(max_attempts=1))
    with caplog.at_level(logging.WARNING):
        out = await s.amap(["one", "bad one", "three"], desc="test")
    assert out[0] == "fine" and out[2] == "fine"
    assert isinstance(out[1], ValueError)
    assert any("1 of 3 items failed" in r.getMessage() for r in caplog.records)


async def test_amap_can_raise_first_error():
    llm = ScriptedLLM({"bad": ValueError("no"), "": Delay(0.01, "fine")})
    s = StructuredLLM(llm, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ValueError):
        await s.amap(["a", "bad", "c", "d", "e"], return_exceptions=False)


async def test_amap_with_json_and_progress():
    llm = ScriptedLLM(['{"i": 1}', "[2]", "{'i': 3}"])
    s = StructuredLLM(llm, max_concurrency=1)
    out = await s.amap(["x", "y", "z"], lambda p: s.ajson(p), show_progress=True, desc="json")
    assert out == [{"i": 1}, [2], {"i": 3}]
    assert await s.amap([]) == []


def test_successive_event_loops_reuse_the_wrapper():
    tracker = InFlight(delay=0.001)
    s = StructuredLLM(ScriptedLLM(tracker), max_concurrency=2)
    for round_ in range(3):
        assert (
            asyncio.run(s.amap([f"{round_}-{i}" for i in range(5)]))[0] == f"answer to {round_}-0"
        )
    assert s.map(["x"]) == ["answer to x"]
    assert tracker.peak <= 2


# --------------------------------------------------------------------------- sync shims


def test_sync_shims_without_a_loop():
    llm = ScriptedLLM(["plain", '{"a": 1}', "m1", "m2"])
    s = StructuredLLM(llm, max_concurrency=1)
    assert s.complete("p") == "plain"
    assert s.json("j") == {"a": 1}
    assert s.map(["x", "y"]) == ["m1", "m2"]


async def test_sync_shims_inside_a_running_loop():
    llm = ScriptedLLM(["plain", '{"a": 1}', "m1", "m2"])
    s = StructuredLLM(llm, max_concurrency=1)
    assert s.complete("p") == "plain"
    assert s.json("j") == {"a": 1}
    assert s.map(["x", "y"]) == ["m1", "m2"]
    # The loop is still usable afterwards.
    assert await s.amap([]) == []


async def test_run_sync_propagates_errors():
    async def boom():
        raise KeyError("x")

    with pytest.raises(KeyError):
        run_sync(boom)


# --------------------------------------------------------------------------- callbacks


async def test_token_counting_handler_sees_calls_but_not_cache_hits():
    counter = TokenCountingHandler()
    llm = ScriptedLLM(["one two three", '{"a": 1}'], callback_manager=CallbackManager([counter]))
    cache = LLMCache()
    s = StructuredLLM(llm, cache=cache)
    p1, p2 = "first prompt here", "second prompt is longer here"
    await s.acomplete(p1)
    await s.ajson(p2)
    assert len(counter.llm_token_counts) == 2
    assert counter.prompt_llm_token_count == words(p1) + words(p2)
    assert counter.completion_llm_token_count == 3 + 2
    assert counter.prompt_llm_token_count == s.meter.prompt_tokens
    assert counter.completion_llm_token_count == s.meter.completion_tokens

    await s.acomplete(p1)  # cache hit: no LLM event
    assert len(counter.llm_token_counts) == 2 and s.meter.cache_hits == 1


def test_repr_and_fingerprint():
    s = StructuredLLM(ScriptedLLM([], model_name="m"), cache=LLMCache())
    assert "ScriptedLLM" in repr(s)
    assert s.fingerprint.startswith("ScriptedLLM:m:")
    assert s.cache_key("p") != s.cache_key("p", temperature=1)
