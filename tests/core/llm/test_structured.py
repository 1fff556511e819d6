"""LLMCaller structured calls in text mode, and replies cut at the length limit."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from llama_index.core.base.llms.types import CompletionResponse, LLMMetadata
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from pydantic import BaseModel, Field
from support import ScriptedLLM

from llama_index_graphrag_ext.core.llm.cache import LLMCache
from llama_index_graphrag_ext.core.llm.calls import LLMCaller, LLMTruncatedError
from llama_index_graphrag_ext.core.llm.parse import LLMOutputError
from llama_index_graphrag_ext.core.llm.retry import RetryPolicy

FAST = RetryPolicy(base_delay=0.0, max_delay=0.0, timeout=5.0)
CALLS_LOG = "llama_index_graphrag_ext.core.llm.calls"


class QA(BaseModel):
    question: str
    answer: str


class QAPairs(BaseModel):
    pairs: list[QA]


class Verdict(BaseModel):
    answer: str
    confidence: float


PAIRS = '[{"question": "Who?", "answer": "Ada"}, {"question": "When?", "answer": "1843"}]'
EXPECTED = QAPairs(pairs=[QA(question="Who?", answer="Ada"), QA(question="When?", answer="1843")])


class LengthLimited(CustomLLM):
    """Cuts its reply (finish_reason "length") unless max_tokens reaches ``needs``."""

    accepts_max_tokens: ClassVar[bool] = True
    needs: int = 300
    reply: str = '{"answer": "Paris", "confidence": 0.9}'
    window: int = 4096
    seen: list[Any] = Field(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(context_window=self.window, model_name="limited")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        limit = kwargs.get("max_tokens")
        self.seen.append(limit)
        if limit is None or limit < self.needs:
            return CompletionResponse(
                text=self.reply[:9], raw={"choices": [{"finish_reason": "length"}]}
            )
        return CompletionResponse(text=self.reply, raw={"choices": [{"finish_reason": "stop"}]})

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError


async def test_value_error_from_the_llm_is_not_taken_for_an_unusable_reply():
    llm = ScriptedLLM([ValueError("Requested tokens (9000) exceed context window"), PAIRS])
    with pytest.raises(ValueError, match="context window"):
        await LLMCaller(llm, retry=FAST).astructured("p", QAPairs)
    assert llm.call_count == 1


# --------------------------------------------------------------------------- structured (text mode)


@pytest.mark.parametrize(
    "reply",
    [
        PAIRS,
        f'Sure! Here are the pairs:\n```json\n{{"qa_pairs": {PAIRS}}}\n```\nAnything else?',
        f'{{"result": {{"items": {PAIRS}}}}}',
        '{"1": {"question": "Who?", "answer": "Ada"}, "2": {"question": "When?", "answer": "1843"}}',
        f"<think>Two pairs.</think>\n{PAIRS[:-1]},]",
    ],
)
async def test_structured_reads_real_reply_shapes(reply):
    llm = ScriptedLLM([reply])
    caller = LLMCaller(llm, retry=FAST)
    assert await caller.astructured("Write QA pairs as JSON.", QAPairs) == EXPECTED
    assert llm.call_count == 1 and caller.meter.parse_failures == 0


async def test_structured_repairs_an_unusable_reply_once():
    llm, cache = ScriptedLLM(["I cannot find any pairs, sorry.", PAIRS]), LLMCache()
    caller = LLMCaller(llm, cache=cache, retry=FAST)
    prompt = "Write QA pairs as JSON."
    assert await caller.astructured(prompt, QAPairs) == EXPECTED
    assert llm.call_count == 2 and caller.meter.parse_failures == 0
    repair = llm.calls[1]
    assert repair.startswith(prompt) and "JSON" in repair[len(prompt) :]
    # The usable result is cached under the original prompt.
    assert await caller.astructured(prompt, QAPairs) == EXPECTED
    assert llm.call_count == 2 and caller.meter.cache_hits == 1


async def test_structured_gives_up_and_counts_a_parse_failure():
    llm, cache = ScriptedLLM(["nope", "still nope", "never"]), LLMCache()
    caller = LLMCaller(llm, cache=cache, retry=FAST)
    with pytest.raises(LLMOutputError, match="no usable Verdict after 2") as info:
        await caller.astructured("q", Verdict)
    assert info.value.raw == "still nope"
    assert llm.call_count == 2 and caller.meter.parse_failures == 1 and caller.meter.failures == 0
    assert len(cache) == 0


async def test_structured_without_repairs_and_llm_errors_propagate():
    llm = ScriptedLLM(["bad"])
    with pytest.raises(LLMOutputError):
        await LLMCaller(llm, retry=FAST).astructured("q", Verdict, repair_attempts=0)
    assert llm.call_count == 1
    down = LLMCaller(ScriptedLLM([RuntimeError("down")]), retry=FAST)
    with pytest.raises(RuntimeError):
        await down.astructured("q", Verdict)
    assert down.meter.failures == 1 and down.meter.parse_failures == 0


async def test_structured_replaces_a_stale_cache_entry():
    cache = LLMCache()
    caller = LLMCaller(ScriptedLLM(['{"answer": "Paris", "confidence": 1}']), cache=cache)
    key = caller.cache_key("q", "structured:Verdict")
    cache.put(key, "garbage from an older run")
    assert (await caller.astructured("q", Verdict)).answer == "Paris"
    assert Verdict.model_validate_json(cache.get(key)).answer == "Paris"


async def test_structured_check_rejects_and_re_asks():
    llm = ScriptedLLM(
        ['{"answer": "", "confidence": 0.2}', '{"answer": "Paris", "confidence": 0.9}']
    )
    caller = LLMCaller(llm, retry=FAST)

    def check(value: Verdict) -> Verdict:
        if not value.answer:
            raise ValueError("empty answer")
        return value

    assert (await caller.astructured("q", Verdict, check=check)).answer == "Paris"
    assert "empty answer" in llm.calls[1]


# --------------------------------------------------------------------------- length limits


async def test_cut_reply_is_asked_again_with_twice_the_limit():
    llm = LengthLimited(needs=300)
    caller = LLMCaller(llm, retry=FAST, cache=LLMCache())
    reply = await caller.acomplete("Capital of France as JSON?", max_tokens=100)
    assert reply.text == llm.reply and reply.finish_reason == "stop"
    assert llm.seen == [100, 200, 400]
    assert caller.meter.length_retries == 2 and caller.meter.truncated == 0
    assert await caller.astructured("another", Verdict, max_tokens=150) == Verdict(
        answer="Paris", confidence=0.9
    )
    assert llm.seen[3:] == [150, 300]


async def test_without_a_limit_a_cut_reply_gets_the_room_left_in_the_window():
    llm = LengthLimited(needs=300, window=1000)
    reply = await LLMCaller(llm, retry=FAST).acomplete("short prompt")
    assert reply.text == llm.reply
    assert llm.seen[0] is None and 300 <= llm.seen[1] < 1000


async def test_reply_that_never_completes_raises_truncated_and_is_not_cached():
    llm, cache = LengthLimited(needs=10**6), LLMCache()
    caller = LLMCaller(llm, retry=FAST, cache=cache)
    with pytest.raises(LLMTruncatedError) as info:
        await caller.acomplete("p", max_tokens=100)
    assert info.value.raw == llm.reply[:9]
    assert llm.seen == [100, 200, 400]
    assert caller.meter.truncated == 1 and len(cache) == 0
    with pytest.raises(LLMTruncatedError):
        await caller.astructured("p2", Verdict, max_tokens=100)
    assert caller.meter.parse_failures == 1 and len(llm.seen) == 6  # no repair re-ask


async def test_length_retries_count_the_re_asks_made():
    llm = LengthLimited(needs=10**6)
    caller = LLMCaller(llm, retry=FAST)
    with pytest.raises(LLMTruncatedError, match="400"):
        await caller.acomplete("p", max_tokens=100)
    assert llm.seen == [100, 200, 400]
    assert caller.meter.length_retries == 2
