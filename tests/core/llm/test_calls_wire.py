"""LLMCaller over the loopback HTTP wire: retries, time-outs, usage, cuts, structured modes."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import openai
import pytest
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike
from pydantic import BaseModel
from support.wire import Fault, WireRequest, WireServer

from llama_index_graphrag_ext.core.llm.cache import LLMCache
from llama_index_graphrag_ext.core.llm.calls import LLMCaller, LLMRequestError
from llama_index_graphrag_ext.core.llm.retry import RetryPolicy

FAST = RetryPolicy(base_delay=0.0, max_delay=0.0, timeout=5.0)
# What Ollama answers a model without tool support (vLLM and llama.cpp name tools too).
NO_TOOLS = "registry.ollama.ai/library/gemma2:2b does not support tools"
CALLS_LOG = "llama_index_graphrag_ext.core.llm.calls"


def words(text: str) -> int:
    return len(text.split())


class Verdict(BaseModel):
    answer: str
    confidence: float


# --------------------------------------------------------------------------- over the wire


@pytest.fixture
def server():
    srv = WireServer(lambda request: "The capital of France is Paris.").start()
    try:
        yield srv
    finally:
        srv.stop()
    if srv.errors:
        raise srv.errors[0]


def like(server: WireServer, **kwargs: Any) -> OpenAILike:
    return OpenAILike(
        model="wire-model",
        api_base=server.base_url,
        api_key=server.api_key,
        is_chat_model=True,
        max_retries=3,
        **kwargs,
    )


def test_wire_429_retry_after_is_honoured_by_the_one_retry_layer(server):
    llm = like(server)
    caller = LLMCaller(llm, retry=FAST)
    server.inject(Fault(status=429, retry_after=0.2))
    start = time.perf_counter()
    assert caller.complete("Capital?").text == "The capital of France is Paris."
    assert time.perf_counter() - start >= 0.2
    assert server.stats()["requests"] == 2  # not 2 x (1 + the client's own 3 retries)
    assert (caller.meter.calls, caller.meter.retries) == (2, 1)
    assert llm.max_retries == 3  # the user's object is untouched


def test_wire_401_is_tried_once(server):
    caller = LLMCaller(like(server), retry=FAST)
    server.inject(Fault(status=401))
    with pytest.raises(LLMRequestError, match="not authorised") as raised:
        caller.complete("Capital?")
    assert isinstance(raised.value.__cause__, openai.AuthenticationError)
    assert server.stats()["requests"] == 1 and caller.meter.failures == 1


def test_wire_500_then_success(server):
    caller = LLMCaller(like(server), retry=FAST)
    server.inject(Fault(status=500))
    assert caller.complete("Capital?").text.endswith("Paris.")
    assert server.stats()["by_status"] == {500: 1, 200: 1}


def test_wire_delay_past_the_timeout_is_retried(server):
    caller = LLMCaller(like(server), retry=RetryPolicy(base_delay=0.0, timeout=0.3))
    server.inject(Fault(delay=3.0))
    start = time.perf_counter()
    assert caller.complete("Capital?").text.endswith("Paris.")
    assert time.perf_counter() - start < 2.0
    assert server.stats()["requests"] == 2 and caller.meter.retries == 1


def test_wire_token_counts_equal_the_servers(server):
    caller = LLMCaller(like(server), retry=FAST)
    for prompt in ["Capital of France?", "And of Italy, in a few more words?"]:
        caller.complete(prompt)
    assert "".join(caller.stream("A streamed one")).endswith("Paris.")
    stats = server.stats()
    assert stats["answered"] == caller.meter.calls == 3
    assert caller.meter.prompt_tokens == stats["prompt_tokens"]
    assert caller.meter.completion_tokens == stats["completion_tokens"]


def test_wire_cut_reply_is_asked_again_with_more_room(server):
    caller = LLMCaller(like(server), retry=FAST)
    assert caller.complete("Capital?", max_tokens=3).text == "The capital of France is Paris."
    assert [r.request.max_tokens for r in server.log] == [3, 6, 12]
    assert server.stats()["cut"] == 2 and caller.meter.length_retries == 2
    # A stream cannot be asked again once shown: it is counted as cut and not cached.
    streamed = LLMCaller(like(server), retry=FAST, cache=LLMCache())
    assert "".join(streamed.stream("Capital?", max_tokens=3)) == "The capital of"
    assert streamed.meter.truncated == 1 and len(streamed.cache) == 0


def city(request: WireRequest) -> Any:
    if request.tools or request.response_format:
        return {"answer": "Paris", "confidence": 0.9}
    return 'Sure! Here it is:\n```json\n{"answer": "Paris", "confidence": 0.9}\n```'


def test_wire_structured_json_schema(server):
    server.responder = city
    llm = OpenAI(
        model="gpt-4o-mini", api_base=server.base_url, api_key=server.api_key, max_retries=0
    )
    caller = LLMCaller(llm, retry=FAST)
    assert caller.mode == "json_schema"
    assert caller.structured("Capital?", Verdict) == Verdict(answer="Paris", confidence=0.9)
    assert server.log[0].request.response_format["type"] == "json_schema"
    assert caller.meter.prompt_tokens == server.stats()["prompt_tokens"]


def test_wire_structured_tool_call(server):
    server.responder = city
    caller = LLMCaller(like(server, is_function_calling_model=True), retry=FAST)
    assert caller.mode == "function_calling"
    assert caller.structured("Capital?", Verdict) == Verdict(answer="Paris", confidence=0.9)
    assert server.log[0].request.tools is not None


def test_wire_server_rejecting_tools_switches_to_text_once(server, caplog):
    server.responder = city
    server.inject(
        Fault(status=400, match=lambda r: r.tools is not None, times=None, message=NO_TOOLS)
    )
    caller = LLMCaller(like(server, is_function_calling_model=True), retry=FAST)
    with caplog.at_level(logging.WARNING, logger=CALLS_LOG):
        assert caller.structured("Capital?", Verdict).answer == "Paris"
        assert caller.structured("Capital again?", Verdict).answer == "Paris"
    assert caller.mode == "text"
    assert [(r.status, r.request.tools is not None) for r in server.log] == [
        (400, True),
        (200, False),
        (200, False),
    ]
    switched = [r for r in caplog.records if "asking for JSON in text" in r.getMessage()]
    assert len(switched) == 1 and switched[0].levelno == logging.WARNING


def test_wire_switch_to_text_is_not_a_failure(server):
    server.responder = city
    server.inject(
        Fault(status=400, match=lambda r: r.tools is not None, times=None, message=NO_TOOLS)
    )
    caller = LLMCaller(like(server, is_function_calling_model=True), retry=FAST)
    assert caller.structured("Capital?", Verdict).answer == "Paris"
    assert caller.meter.failures == 0


def test_wire_calls_from_successive_event_loops(server):
    # Each asyncio.run has its own loop; the client's pooled connections must survive.
    caller = LLMCaller(like(server), retry=RetryPolicy(max_attempts=1, timeout=5.0))

    async def sync_call_inside_a_loop():
        return caller.complete("Capital?").text

    async def async_call():
        return (await caller.acomplete("Capital, async?")).text

    for run in (sync_call_inside_a_loop, sync_call_inside_a_loop, async_call, async_call):
        assert asyncio.run(run()).endswith("Paris.")
    assert server.stats()["by_status"] == {200: 4}
