"""The loopback OpenAI-compatible server, driven through real clients over a real socket.

Every test talks HTTP to a uvicorn server on 127.0.0.1 with the official ``openai``
client or LlamaIndex's ``OpenAI`` / ``OpenAILike`` LLMs, and checks what the client
got against what the server counted.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import openai
import pytest
from llama_index.core import PromptTemplate
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike
from pydantic import BaseModel
from support.reasoning import ReasoningModel, SplitToolCalls
from support.wire import Fault, WireReply, WireRequest, WireServer, count_tokens

TEXT = "Marie Curie was born in Warsaw, the capital of Poland, in 1867."
CITY = {"name": "Warsaw", "country": "Poland"}


class City(BaseModel):
    name: str
    country: str


def sync_client(server: WireServer, **kwargs) -> openai.OpenAI:
    kwargs.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=server.base_url, api_key=server.api_key, **kwargs)


def async_client(server: WireServer, **kwargs) -> openai.AsyncOpenAI:
    kwargs.setdefault("max_retries", 0)
    return openai.AsyncOpenAI(base_url=server.base_url, api_key=server.api_key, **kwargs)


def chat(client: openai.OpenAI, content: str = "Where was Marie Curie born?", **kwargs):
    messages = [{"role": "user", "content": content}]
    return client.chat.completions.create(model="wire-model", messages=messages, **kwargs)


def like(server: WireServer, **kwargs) -> OpenAILike:
    kwargs.setdefault("is_chat_model", True)
    return OpenAILike(
        model="local-model",
        api_base=server.base_url,
        api_key=server.api_key,
        max_retries=0,
        **kwargs,
    )


# ---- plain answers and usage ----------------------------------------------------------


def test_chat_completion_reports_the_usage_the_server_counted(wire_server):
    wire_server.responder = lambda req: TEXT
    with sync_client(wire_server) as client:
        out = client.chat.completions.create(
            model="some-model",
            messages=[
                {"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": [{"type": "text", "text": "Where was Curie born?"}]},
            ],
        )
    assert out.object == "chat.completion" and out.id.startswith("chatcmpl-")
    assert out.model == "some-model"
    assert out.choices[0].message.content == TEXT
    assert out.choices[0].message.role == "assistant"
    assert out.choices[0].finish_reason == "stop"

    request = wire_server.log[0].request
    assert request.prompt == "Answer briefly.\nWhere was Curie born?"
    assert request.number == 1 and request.stream is False and request.tools is None
    assert out.usage.prompt_tokens == count_tokens(request.prompt)
    assert out.usage.completion_tokens == count_tokens(TEXT) > 10
    assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens

    stats = wire_server.stats()
    assert stats["requests"] == stats["answered"] == 1
    assert stats["by_status"] == {200: 1}
    assert stats["prompt_tokens"] == out.usage.prompt_tokens
    assert stats["completion_tokens"] == out.usage.completion_tokens
    assert stats["cut"] == 0
    assert wire_server.log[0].text == TEXT and wire_server.log[0].status == 200


def test_completion_endpoint_through_openai_like(wire_server):
    seen = []
    wire_server.responder = lambda req: seen.append(req) or f"echo: {req.prompt}"
    llm = like(wire_server, is_chat_model=False)
    out = llm.complete("Say hello")
    assert out.text == "echo: Say hello"
    # A non-chat OpenAILike flattens chat messages into one completions prompt.
    reply = llm.chat([ChatMessage(role="user", content="hi")])
    assert reply.message.content.startswith("echo: user: hi")

    assert [r.path for r in seen] == ["/v1/completions"] * 2
    assert seen[0].messages == [] and seen[0].body["model"] == "local-model"
    usage = wire_server.log[0].usage
    assert usage["prompt_tokens"] == count_tokens("Say hello")
    assert usage["completion_tokens"] == count_tokens("echo: Say hello")
    stats = wire_server.stats()
    assert stats["answered"] == 2
    assert stats["prompt_tokens"] == sum(r.usage["prompt_tokens"] for r in wire_server.log)


def test_raw_completion_object(wire_server):
    wire_server.responder = lambda req: TEXT
    with sync_client(wire_server) as client:
        out = client.completions.create(model="m", prompt="Curie?")
    assert out.object == "text_completion" and out.id.startswith("cmpl-")
    assert out.choices[0].text == TEXT and out.choices[0].finish_reason == "stop"
    assert out.usage.completion_tokens == wire_server.stats()["completion_tokens"]


@pytest.mark.parametrize("wire_server", [lambda req: "from the parameter"], indirect=True)
def test_indirect_responder_and_models(wire_server):
    with sync_client(wire_server) as client:
        assert chat(client).choices[0].message.content == "from the parameter"
        assert [m.id for m in client.models.list()] == ["wire-model"]
    assert wire_server.stats()["requests"] == 1  # /v1/models is not a completion


# ---- streaming --------------------------------------------------------------------------


async def test_stream_without_usage(wire_server):
    wire_server.responder = lambda req: TEXT
    async with async_client(wire_server) as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Curie?"}], stream=True
        )
        chunks = [c async for c in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == TEXT
    assert len(chunks) > 5  # word-sized pieces, not one blob
    assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"
    assert all(c.usage is None for c in chunks)
    assert wire_server.stats()["completion_tokens"] == count_tokens(TEXT)


async def test_stream_with_usage(wire_server):
    wire_server.responder = lambda req: TEXT
    async with async_client(wire_server) as client:
        stream = await client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "Curie?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert "".join(c.choices[0].delta.content or "" for c in chunks[:-1]) == TEXT
    assert chunks[-2].choices[0].finish_reason == "stop"
    stats = wire_server.stats()
    assert last.usage.prompt_tokens == stats["prompt_tokens"] == count_tokens("Curie?")
    assert last.usage.completion_tokens == stats["completion_tokens"]


async def test_streams_through_llama_index(wire_server):
    wire_server.responder = lambda req: TEXT
    wire_server.stream_delay = 0.001
    llm = like(wire_server)
    gen = await llm.astream_chat([ChatMessage(role="user", content="Curie?")])
    deltas = [r.delta async for r in gen]
    assert "".join(deltas) == TEXT and len(deltas) > 5

    text_llm = like(wire_server, is_chat_model=False)
    gen = await text_llm.astream_complete("Curie?")
    responses = [r async for r in gen]
    assert responses[-1].text == TEXT
    assert [r.request.path for r in wire_server.log] == ["/v1/chat/completions", "/v1/completions"]
    assert all(r.request.stream for r in wire_server.log)


# ---- max_tokens and cuts ----------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_max_tokens_cuts_the_reply(wire_server, stream):
    wire_server.responder = lambda req: TEXT
    with sync_client(wire_server) as client:
        if stream:
            chunks = list(
                chat(client, max_tokens=4, stream=True, stream_options={"include_usage": True})
            )
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            finish = [c.choices[0].finish_reason for c in chunks if c.choices][-1]
            usage = chunks[-1].usage
        else:
            out = chat(client, max_tokens=4)
            text, finish, usage = (
                out.choices[0].message.content,
                out.choices[0].finish_reason,
                out.usage,
            )
    assert finish == "length"
    assert TEXT.startswith(text) and len(text) < len(TEXT)
    assert usage.completion_tokens == 4 == count_tokens(text)
    assert wire_server.stats()["cut"] == 1
    assert wire_server.log[0].request.max_tokens == 4


def test_max_tokens_larger_than_the_reply_does_not_cut(wire_server):
    wire_server.responder = lambda req: "Warsaw."
    with sync_client(wire_server) as client:
        out = chat(client, max_completion_tokens=50)
    assert out.choices[0].finish_reason == "stop" and out.choices[0].message.content == "Warsaw."
    assert wire_server.log[0].request.max_tokens == 50 and wire_server.stats()["cut"] == 0


async def test_fault_cut_at_truncates_one_reply(wire_server):
    wire_server.responder = lambda req: TEXT
    wire_server.inject(Fault(cut_at=3))
    llm = like(wire_server)
    first = await llm.achat([ChatMessage(role="user", content="Curie?")])
    second = await llm.achat([ChatMessage(role="user", content="Curie?")])
    assert TEXT.startswith(first.message.content) and count_tokens(first.message.content) == 3
    assert second.message.content == TEXT  # the fault was used up
    assert [r.finish_reason for r in wire_server.log] == ["length", "stop"]
    assert wire_server.stats()["cut"] == 1
    assert wire_server.stats()["completion_tokens"] == 3 + count_tokens(TEXT)


# ---- errors -----------------------------------------------------------------------------


def test_429_with_retry_after(wire_server):
    wire_server.inject(Fault(status=429, retry_after=2))
    with sync_client(wire_server) as client, pytest.raises(openai.RateLimitError) as err:
        chat(client)
    assert err.value.status_code == 429
    assert err.value.response.headers["retry-after"] == "2"
    assert err.value.code == "rate_limit_exceeded"
    stats = wire_server.stats()
    assert stats["by_status"] == {429: 1}
    assert stats["answered"] == stats["prompt_tokens"] == stats["completion_tokens"] == 0


def test_client_retries_after_429_and_succeeds(wire_server):
    wire_server.responder = lambda req: "ok"
    wire_server.inject(Fault(status=429, retry_after=0.05))
    with sync_client(wire_server, max_retries=1) as client:
        out = chat(client)
    assert out.choices[0].message.content == "ok"
    assert wire_server.stats()["by_status"] == {429: 1, 200: 1}
    assert [r.request.headers.get("x-stainless-retry-count") for r in wire_server.log] == ["0", "1"]


def test_500_only_for_matching_requests(wire_server):
    wire_server.responder = lambda req: "fine"
    wire_server.inject(Fault(status=500, match=lambda req: "boom" in req.prompt, times=2))
    with sync_client(wire_server) as client:
        assert chat(client, "quiet").choices[0].message.content == "fine"
        for _ in range(2):
            with pytest.raises(openai.InternalServerError) as err:
                chat(client, "boom")
            assert err.value.status_code == 500
            assert err.value.body["type"] == "server_error"
        assert chat(client, "boom").choices[0].message.content == "fine"  # used up
    assert [r.status for r in wire_server.log] == [200, 500, 500, 200]


def test_wrong_key_is_401(wire_server):
    called = []
    wire_server.responder = lambda req: called.append(req) or "never"
    client = openai.OpenAI(base_url=wire_server.base_url, api_key="sk-wrong", max_retries=0)
    with client, pytest.raises(openai.AuthenticationError) as err:
        chat(client)
    assert err.value.status_code == 401
    assert err.value.body == {
        "message": "Incorrect API key provided",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
    assert called == []
    stats = wire_server.stats()
    assert stats["requests"] == 1 and stats["by_status"] == {401: 1}
    assert stats["prompt_tokens"] == 0


def test_a_malformed_request_is_a_400(wire_server):
    with sync_client(wire_server) as client, pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="m", messages=[])
    assert err.value.status_code == 400 and err.value.body["type"] == "invalid_request_error"
    assert wire_server.stats()["by_status"] == {400: 1}


async def test_delay_past_the_client_timeout(wire_server):
    wire_server.responder = lambda req: "late"
    wire_server.inject(Fault(delay=0.4))
    started = time.monotonic()
    async with async_client(wire_server, timeout=0.1) as client:
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "slow?"}]
            )
        assert time.monotonic() - started < 0.35
        # The server notices, once the delay is over, that the client hung up.
        while wire_server.log[0].status is None and time.monotonic() - started < 3:
            await asyncio.sleep(0.02)
        assert wire_server.log[0].status == 499
        out = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "again"}]
        )
    assert out.choices[0].message.content == "late"
    assert wire_server.stats()["by_status"] == {499: 1, 200: 1}


def test_stop_does_not_wait_for_a_pending_delay():
    with WireServer(lambda req: "x") as server:
        server.inject(Fault(delay=30))
        with sync_client(server, timeout=0.1) as client, pytest.raises(openai.APITimeoutError):
            chat(client)
        started = time.monotonic()
    assert time.monotonic() - started < 2


def test_a_responder_error_is_a_500_and_is_kept(wire_server):
    def broken(req):
        raise KeyError("no script for this prompt")

    wire_server.responder = broken
    with sync_client(wire_server) as client, pytest.raises(openai.InternalServerError) as err:
        chat(client)
    assert "no script for this prompt" in err.value.message
    assert isinstance(wire_server.errors[0], KeyError)
    wire_server.errors.clear()  # expected here; the fixture would fail the test otherwise


# ---- structured output ------------------------------------------------------------------


async def test_structured_predict_with_json_schema(wire_server):
    wire_server.responder = lambda req: WireReply(text="not JSON", arguments=CITY)
    llm = OpenAI(
        model="gpt-4o-mini",
        api_base=wire_server.base_url,
        api_key=wire_server.api_key,
        max_retries=0,
    )
    city = await llm.astructured_predict(City, PromptTemplate("Where was {who} born?"), who="Curie")
    assert city == City(**CITY)

    record = wire_server.log[0]
    request = record.request
    assert request.tools is None
    assert request.response_format["type"] == "json_schema"
    assert request.response_format["json_schema"]["name"] == "City"
    assert request.prompt == "Where was Curie born?"
    assert json.loads(record.text) == CITY and record.finish_reason == "stop"
    # The schema is counted in the prompt, as real servers do.
    assert record.usage["prompt_tokens"] == count_tokens(request.prompt) + count_tokens(
        json.dumps(request.response_format)
    )


async def test_structured_predict_with_a_tool_call(wire_server):
    wire_server.responder = lambda req: WireReply(text="not JSON", arguments=CITY)
    llm = like(wire_server, is_function_calling_model=True)
    city = await llm.astructured_predict(City, PromptTemplate("Where was {who} born?"), who="Curie")
    assert city == City(**CITY)

    record = wire_server.log[0]
    assert record.request.tools[0]["function"]["name"] == "City"
    assert record.request.tool_choice == "required"
    assert record.finish_reason == "tool_calls" and json.loads(record.text) == CITY
    assert record.usage["completion_tokens"] == count_tokens(json.dumps(CITY))


@pytest.mark.parametrize("stream", [False, True])
def test_tool_choice_forces_the_named_tool(wire_server, stream):
    wire_server.responder = lambda req: {"x": 1}
    tools = [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
        for name in ("first", "second")
    ]
    forced = {"type": "function", "function": {"name": "second"}}
    with sync_client(wire_server) as client:
        out = chat(client, tools=tools, tool_choice=forced, stream=stream)
        if stream:
            chunks = list(out)
            calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
            name = calls[0].function.name
            arguments = "".join(tc.function.arguments or "" for tc in calls)
            finish = chunks[-1].choices[0].finish_reason
        else:
            message = out.choices[0].message
            assert message.content is None
            name = message.tool_calls[0].function.name
            arguments = message.tool_calls[0].function.arguments
            assert message.tool_calls[0].id.startswith("call_")
            finish = out.choices[0].finish_reason
    assert name == "second" and json.loads(arguments) == {"x": 1}
    assert finish == "tool_calls"


def test_json_object_and_text_fallbacks(wire_server):
    wire_server.responder = lambda req: WireReply(text="plain", arguments={"ok": True})
    with sync_client(wire_server) as client:
        as_json = chat(client, response_format={"type": "json_object"})
        as_text = chat(client)  # no tools, no response_format: the text
    assert json.loads(as_json.choices[0].message.content) == {"ok": True}
    assert as_text.choices[0].message.content == "plain"
    wire_server.responder = lambda req: "no arguments"
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with sync_client(wire_server) as client:
        out = chat(client, tools=tools)
    assert (
        out.choices[0].message.content == "no arguments" and not out.choices[0].message.tool_calls
    )


# ---- concurrency, reset, per-task counts ------------------------------------------------


async def test_concurrent_requests_are_served_at_once(wire_server):
    # Each responder call waits for all five: a server answering one at a time
    # would break the barrier (a 500) instead of answering.
    barrier = threading.Barrier(5, timeout=5)

    def responder(req):
        barrier.wait()
        return f"answer {req.prompt}"

    wire_server.responder = responder
    async with async_client(wire_server) as client:
        outs = await asyncio.gather(
            *(
                client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": f"q{i}"}]
                )
                for i in range(5)
            )
        )
    assert [o.choices[0].message.content for o in outs] == [f"answer q{i}" for i in range(5)]
    stats = wire_server.stats()
    assert stats["answered"] == 5 and stats["by_status"] == {200: 5}
    assert sorted(r.request.number for r in wire_server.log) == [1, 2, 3, 4, 5]
    assert stats["connections"] == 5  # five requests in flight need five connections


def test_reset_clears_counts_log_and_faults(wire_server):
    wire_server.responder = lambda req: "ok"
    with sync_client(wire_server) as client:
        chat(client)
        wire_server.inject(Fault(status=503))
        wire_server.reset()
        stats = wire_server.stats()
        assert stats["requests"] == stats["answered"] == stats["prompt_tokens"] == 0
        assert stats["by_status"] == {} and wire_server.log == []
        assert chat(client).choices[0].message.content == "ok"  # the 503 is gone
    assert wire_server.log[0].request.number == 1
    assert wire_server.stats()["by_status"] == {200: 1}


def test_per_task_counts(wire_server):
    def responder(req):
        task = "extract" if req.prompt.startswith("Extract") else "answer"
        return WireReply(text=f"{task} result", task=task)

    wire_server.responder = responder
    with sync_client(wire_server) as client:
        for prompt in ("Extract A", "Extract B", "Answer C"):
            chat(client, prompt)
    stats = wire_server.stats()
    assert stats["by_task"] == {
        "extract": {
            "requests": 2,
            "prompt_tokens": count_tokens("Extract A") + count_tokens("Extract B"),
            "completion_tokens": 2 * count_tokens("extract result"),
        },
        "answer": {
            "requests": 1,
            "prompt_tokens": count_tokens("Answer C"),
            "completion_tokens": count_tokens("answer result"),
        },
    }
    assert sum(t["prompt_tokens"] for t in stats["by_task"].values()) == stats["prompt_tokens"]
    assert [r.task for r in wire_server.log] == ["extract", "extract", "answer"]


# ---- reasoning sent apart (vLLM's reasoning parsers) ------------------------------------

THOUGHT = "Okay, the user asks about Curie. Let me check: she was born in Warsaw in 1867."
TOOLS = [{"type": "function", "function": {"name": "City", "parameters": {"type": "object"}}}]


def streamed(client: openai.OpenAI, field: str = "reasoning_content", **kwargs):
    """``(reasoning, content, calls by index, finish, usage, delta kinds in order)`` of a stream."""
    options = {"include_usage": True}
    chunks = list(chat(client, stream=True, stream_options=options, **kwargs))
    reasoning, content, calls, kinds = "", "", {}, []
    for c in chunks[:-1]:
        delta = c.choices[0].delta
        piece = (delta.model_extra or {}).get(field)
        if piece:
            reasoning, kinds = reasoning + piece, [*kinds, "reasoning"]
        if delta.content:
            content, kinds = content + delta.content, [*kinds, "content"]
        for tc in delta.tool_calls or []:
            call = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
            call["id"], call["name"] = tc.id or call["id"], tc.function.name or call["name"]
            call["arguments"] += tc.function.arguments or ""
            kinds = [*kinds, "call"]
    finish = chunks[-2].choices[0].finish_reason
    return reasoning, content, calls, finish, chunks[-1].usage, kinds


@pytest.mark.parametrize("wire_server", [{"reasoning_field": "reasoning"}, {}], indirect=True)
def test_reasoning_is_sent_apart_and_billed(wire_server):
    field = wire_server.reasoning_field
    wire_server.responder = lambda req: WireReply(text="Warsaw.", reasoning=THOUGHT)
    billed = count_tokens(THOUGHT) + count_tokens("Warsaw.")
    with sync_client(wire_server) as client:
        out = chat(client)
        reasoning, content, _, finish, usage, kinds = streamed(client, field)
    message = out.choices[0].message
    assert message.content == "Warsaw." and message.model_extra[field] == THOUGHT
    assert out.choices[0].finish_reason == "stop" and out.usage.completion_tokens == billed
    assert (reasoning, content, finish, usage.completion_tokens) == (
        THOUGHT,
        "Warsaw.",
        "stop",
        billed,
    )
    assert kinds.index("content") > 1 and set(kinds[kinds.index("content") :]) == {"content"}
    assert [(r.text, r.reasoning) for r in wire_server.log] == [("Warsaw.", THOUGHT)] * 2


@pytest.mark.parametrize("stream", [False, True])
def test_a_limit_inside_the_reasoning_leaves_no_content(wire_server, stream):
    wire_server.responder = lambda req: WireReply(text="Warsaw.", reasoning=THOUGHT)
    with sync_client(wire_server) as client:
        if stream:
            reasoning, content, _, finish, usage, kinds = streamed(client, max_tokens=5)
            assert "content" not in kinds
        else:
            out = chat(client, max_tokens=5)
            message, finish, usage = out.choices[0].message, out.choices[0].finish_reason, out.usage
            reasoning, content = message.reasoning_content, message.content
            assert content is None
    assert THOUGHT.startswith(reasoning) and count_tokens(reasoning) == 5
    assert finish == "length" and usage.completion_tokens == 5
    record = wire_server.log[0]
    assert (record.text, record.reasoning, record.finish_reason) == ("", reasoning, "length")


def test_a_limit_after_the_reasoning_cuts_the_content(wire_server):
    wire_server.responder = lambda req: WireReply(text=TEXT, reasoning=THOUGHT)
    limit = count_tokens(THOUGHT) + 4
    with sync_client(wire_server) as client:
        out = chat(client, max_tokens=limit)
    message = out.choices[0].message
    assert message.reasoning_content == THOUGHT and count_tokens(message.content) == 4
    assert TEXT.startswith(message.content) and out.choices[0].finish_reason == "length"
    assert out.usage.completion_tokens == limit


# ---- several tool calls, prefaces -------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_several_tool_calls_in_one_reply(wire_server, stream):
    parts = [{"name": "Warsaw"}, {"name": "Paris"}, [1, 2]]
    wire_server.responder = lambda req: WireReply(tool_calls=parts)
    with sync_client(wire_server) as client:
        if stream:
            _, content, by_index, finish, _, _ = streamed(client, tools=TOOLS)
            assert sorted(by_index) == [0, 1, 2] and content == ""
            calls = [by_index[i] for i in range(3)]
        else:
            out = chat(client, tools=TOOLS)
            finish, message = out.choices[0].finish_reason, out.choices[0].message
            assert message.content is None
            calls = [
                {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                for c in message.tool_calls
            ]
    assert [json.loads(c["arguments"]) for c in calls] == parts and finish == "tool_calls"
    assert {c["name"] for c in calls} == {"City"} and len({c["id"] for c in calls}) == 3
    record = wire_server.log[0]
    assert record.text.splitlines() == [json.dumps(p) for p in parts]
    assert record.usage["completion_tokens"] == sum(count_tokens(json.dumps(p)) for p in parts)


@pytest.mark.parametrize("stream", [False, True])
def test_a_limit_ends_inside_one_call_and_drops_the_rest(wire_server, stream):
    parts = [{"name": "Warsaw", "country": "Poland"}, {"name": "Paris"}, {"name": "Rome"}]
    first = count_tokens(json.dumps(parts[0]))
    wire_server.responder = lambda req: WireReply(tool_calls=parts)
    with sync_client(wire_server) as client:
        if stream:
            _, _, by_index, finish, usage, _ = streamed(client, tools=TOOLS, max_tokens=first + 3)
            arguments = [by_index[i]["arguments"] for i in sorted(by_index)]
        else:
            out = chat(client, tools=TOOLS, max_tokens=first + 3)
            finish, usage = out.choices[0].finish_reason, out.usage
            arguments = [c.function.arguments for c in out.choices[0].message.tool_calls]
    assert finish == "length" and usage.completion_tokens == first + 3
    assert len(arguments) == 2 and json.loads(arguments[0]) == parts[0]
    assert json.dumps(parts[1]).startswith(arguments[1]) and count_tokens(arguments[1]) == 3
    with pytest.raises(ValueError):
        json.loads(arguments[1])


def test_one_tool_call_cut_mid_json(wire_server):
    wire_server.responder = lambda req: WireReply(arguments=CITY)
    with sync_client(wire_server) as client:
        out = chat(client, tools=TOOLS, max_tokens=4)
    (call,) = out.choices[0].message.tool_calls
    assert out.choices[0].finish_reason == "length" and out.usage.completion_tokens == 4
    cut = call.function.arguments
    assert json.dumps(CITY).startswith(cut) and cut != json.dumps(CITY)
    assert wire_server.log[0].text == call.function.arguments


def test_a_preface_comes_before_text_json_and_beside_calls(wire_server):
    head = "<think>\nHmm.\n</think>\n\n"
    wire_server.responder = lambda req: WireReply(text="Warsaw.", arguments=CITY, preface=head)
    with sync_client(wire_server) as client:
        text = chat(client).choices[0].message.content
        as_json = chat(client, response_format={"type": "json_object"}).choices[0].message
        beside = chat(client, tools=TOOLS).choices[0].message
        _, streamed_content, calls, _, _, kinds = streamed(client, tools=TOOLS)
    assert text == head + "Warsaw." and as_json.content == head + json.dumps(CITY)
    assert beside.content == streamed_content == head
    assert json.loads(beside.tool_calls[0].function.arguments) == CITY
    assert json.loads(calls[0]["arguments"]) == CITY and kinds[0] == "content"


# ---- broken connections -----------------------------------------------------------------


async def test_reset_after_breaks_a_stream_midway(wire_server):
    wire_server.responder = lambda req: TEXT
    wire_server.inject(Fault(reset_after=3))
    got = []
    async with async_client(wire_server) as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Curie?"}], stream=True
        )
        # openai hands over httpx's error as it is: the stream was not wrapped.
        with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
            async for chunk in stream:
                got.append(chunk)
        again = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Curie?"}]
        )
    assert len(got) == 3 and again.choices[0].message.content == TEXT
    assert [r.status for r in wire_server.log] == [200, 200]  # the break is not the record's


@pytest.mark.parametrize("stream", [False, True])
def test_reset_after_zero_drops_the_connection_unanswered(wire_server, stream):
    asked = []
    wire_server.responder = lambda req: asked.append(req) or "ok"
    wire_server.inject(Fault(reset_after=0))
    with sync_client(wire_server) as client:
        with pytest.raises(openai.APIConnectionError) as raised:
            list(chat(client, stream=True)) if stream else chat(client)
        assert isinstance(raised.value.__cause__, httpx.RemoteProtocolError)
        assert "without sending a response" in str(raised.value.__cause__)
        assert chat(client).choices[0].message.content == "ok"
    assert [r.status for r in wire_server.log] == [0, 200] and len(asked) == 1
    assert wire_server.stats()["by_status"] == {0: 1, 200: 1}


# ---- support.reasoning: today's reasoning models and function-calling clients ---------


def inner(req: WireRequest) -> WireReply:
    """A model's reply before reasoning: JSON when structured output is asked, else text."""
    fmt = (req.response_format or {}).get("type")
    if req.tools or fmt == "json_object":
        return WireReply(arguments=CITY, task="city")
    return WireReply(text="Warsaw.", task="city")


def reply_of(server, style, **kwargs):
    server.responder = ReasoningModel(inner, style)
    with sync_client(server) as client:
        out = chat(client, **kwargs)
    return out.choices[0].message, out.choices[0].finish_reason


@pytest.mark.parametrize("style", ["qwen3", "r1"])
def test_reasoning_models_that_think_in_the_content(wire_server, style):
    message, finish = reply_of(wire_server, style)
    thinking, closing, answer = message.content.partition("\n</think>\n\n")
    assert closing and answer == "Warsaw." and finish == "stop"
    assert thinking.startswith("<think>\n") == (style == "qwen3") and "<think>" not in thinking[1:]
    for trap in ("\nAnswer: maybe", "\n- draft item", '{"draft": true}', "\nWait, maybe"):
        assert trap in thinking
    assert 250 <= count_tokens(thinking) <= 400
    # The same prompt thinks the same; the inner reply's task label is kept.
    assert reply_of(wire_server, style)[0].content == message.content
    assert reply_of(wire_server, style, content="Who was Bohr?")[0].content != message.content
    assert wire_server.stats()["by_task"]["city"]["requests"] == 3
    # Structured: the think text beside the tool call, or in front of the JSON text.
    beside, finish = reply_of(wire_server, style, tools=TOOLS)
    assert beside.content == thinking + closing and finish == "tool_calls"
    assert json.loads(beside.tool_calls[0].function.arguments) == CITY
    as_json, _ = reply_of(wire_server, style, response_format={"type": "json_object"})
    assert as_json.content == thinking + closing + json.dumps(CITY)


def test_a_reasoning_model_behind_a_reasoning_parser(wire_server):
    message, _ = reply_of(wire_server, "vllm")
    assert message.content == "Warsaw." and "\nAnswer: maybe" in message.reasoning_content
    called, finish = reply_of(wire_server, "vllm", tools=TOOLS)
    assert called.content is None and called.reasoning_content == message.reasoning_content
    assert json.loads(called.tool_calls[0].function.arguments) == CITY and finish == "tool_calls"
    as_json, _ = reply_of(wire_server, "vllm", response_format={"type": "json_object"})
    assert json.loads(as_json.content) == CITY and as_json.reasoning_content


def test_a_runaway_thinker_never_closes_its_think_block(wire_server):
    message, finish = reply_of(wire_server, "runaway", max_tokens=8192, tools=TOOLS)
    assert message.content.startswith("<think>\n") and "</think>" not in message.content
    assert finish == "length" and not message.tool_calls
    assert wire_server.log[0].usage["completion_tokens"] == 8192


def test_reasoning_model_shows_the_inner_responders_attributes():
    from support.replies import ModelReplies

    model = ReasoningModel(ModelReplies(junk=lambda req, task: False), "qwen3")
    assert model.junk is model.inner.junk and model.tasks is model.inner.tasks
    with pytest.raises(ValueError):
        ReasoningModel(inner, "o1")


@pytest.mark.parametrize(
    ("payload", "parts", "calls"),
    [
        ({"pairs": [1, 2, 3, 4, 5]}, 2, [{"pairs": [1, 2]}, {"pairs": [3, 4, 5]}]),
        ([1, 2, 3, 4], 3, [[1], [2], [3, 4]]),
        ({"a": [1, 2], "b": [3, 4]}, 2, [{"a": [1, 2], "b": [3, 4]}]),  # two lists: kept
        ({"pairs": [1]}, 2, [{"pairs": [1]}]),  # nothing to split
    ],
)
def test_split_tool_calls(wire_server, payload, parts, calls):
    wire_server.responder = SplitToolCalls(lambda req: payload, parts=parts)
    with sync_client(wire_server) as client:
        message = chat(client, tools=TOOLS).choices[0].message
        plain = chat(client, response_format={"type": "json_object"}).choices[0].message
    assert [json.loads(c.function.arguments) for c in message.tool_calls] == calls
    assert json.loads(plain.content) == payload  # no tools: one answer, whole
