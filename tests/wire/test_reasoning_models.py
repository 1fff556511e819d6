"""Today's open reasoning models on the wire: reasoning is never content, anywhere.

The server answers like ``ModelReplies`` behind the reply shapes of
``support.reasoning``: Qwen3 served without a reasoning parser (``<think>``
blocks), DeepSeek-R1 (a stray ``</think>``), vLLM with a reasoning parser
(``reasoning_content``; content null when the limit ends inside it), and a
runaway thinker that never answers. Each reply's reasoning holds an
``Answer:`` line, a bullet and a JSON fragment a naive reader would keep.
"""

from __future__ import annotations

import logging

import pytest
from llama_index.core.schema import Document
from support.reasoning import ReasoningModel
from support.replies import ModelReplies
from support.wire import Fault, WireReply, WireServer

from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
from llama_index_graphrag_ext.core.llm import LLMOutputError, LLMStreamError, LLMTruncatedError
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.cue import MultiPartiteIndex
from llama_index_graphrag_ext.fgrag import FGRAGExtractor, FGRAGIndex
from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex

DOCS = [
    Document(
        id_="bambi", text="Felix Salten wrote the novel Bambi in 1923. It follows a roe deer."
    ),
    Document(
        id_="salten",
        text="Felix Salten was an Austrian writer. Pest is the birthplace of Felix Salten.",
    ),
    Document(id_="vienna", text="Vienna is the capital of Austria. It lies on the Danube."),
    Document(id_="pest", text="Pest is the eastern part of Budapest in Hungary."),
]
QUESTION = "What is the birthplace of the author who wrote Bambi?"
# What the reasoning of support.reasoning holds and no answer may.
LEAKS = ("<think>", "</think>", "Okay, let me", "Alright, the user", "draft", "Wait, maybe")
STYLES = ["qwen3", "r1", "vllm"]


def clean(text: str) -> bool:
    return bool(text.strip()) and not any(leak in text for leak in LEAKS)


@pytest.fixture
def server(request):
    style = getattr(request, "param", "qwen3")
    srv = WireServer(ReasoningModel(ModelReplies(), style)).start()
    try:
        yield srv
    finally:
        srv.stop()
    if srv.errors:
        raise srv.errors[0]


def client(server):
    return server.openai_like(timeout=10.0)


def build(cls, embed, **kwargs):
    return cls.from_documents(DOCS, embed_model=embed, transformations=[PassageParser()], **kwargs)


# --------------------------------------------------------------------------- the stock engine


@pytest.mark.parametrize("server", STYLES, indirect=True)
@pytest.mark.parametrize("cls", [QueryCentricGraphIndex, MultiPartiteIndex], ids=["qcg", "cue"])
def test_as_query_engine_answers_without_reasoning_streamed_or_not(server, cls, bow_embed):
    index = build(cls, bow_embed)  # LLM-free build: only the answer is the model's
    response = index.as_query_engine(llm=client(server)).query(QUESTION)
    assert clean(str(response)), str(response)
    assert response.metadata["answer_cut"] is False
    streamed = index.as_query_engine(llm=client(server), streaming=True).query(QUESTION)
    text = "".join(streamed.response_gen)
    assert clean(text) and text.strip() == str(response).strip()
    assert streamed.metadata["answer_cut"] is False


@pytest.mark.parametrize("server", ["runaway"], indirect=True)
def test_an_answer_that_never_gets_past_its_reasoning_is_an_error_not_empty(server, bow_embed):
    index = build(QueryCentricGraphIndex, bow_embed)
    # No limit asked: the reply ends, all of it reasoning.
    with pytest.raises(LLMOutputError, match="only reasoning"):
        index.as_query_engine(llm=client(server)).query(QUESTION)
    # The client's own ceiling: cut inside the reasoning, and it cannot grow past it.
    capped = client(server).model_copy(update={"max_tokens": 512})
    with pytest.raises(LLMTruncatedError, match="inside its reasoning"):
        index.as_query_engine(llm=capped).query(QUESTION)
    assert server.log[-1].finish_reason == "length"


@pytest.mark.parametrize("server", ["vllm"], indirect=True)
def test_an_answer_cut_after_the_re_asks_is_flagged(server, bow_embed):
    server.responder = lambda request: WireReply(
        text="Felix Salten was born in Pest, now part of Budapest. " * 20, reasoning="Short."
    )
    # A ceiling on the client's own max_tokens: the answer cannot grow past it.
    llm = client(server).model_copy(update={"max_tokens": 60})
    index = build(QueryCentricGraphIndex, bow_embed)
    response = index.as_query_engine(llm=llm).query(QUESTION)
    assert str(response).startswith("Felix Salten was born in Pest")
    assert response.metadata["answer_cut"] is True
    streamed = index.as_query_engine(llm=llm, streaming=True).query(QUESTION)
    assert streamed.metadata["answer_cut"] is False  # not known before the stream ends
    assert "".join(streamed.response_gen).startswith("Felix Salten")
    assert streamed.metadata["answer_cut"] is True


# --------------------------------------------------------------------------- ChainRAG


@pytest.mark.parametrize("server", STYLES, indirect=True)
def test_chainrag_checks_fit_a_reasoning_model_and_nothing_leaks(server, bow_embed):
    index = build(SentenceGraphIndex, bow_embed)
    engine = index.as_query_engine(llm=client(server))
    response = engine.query(QUESTION)
    # The 32-token sufficiency checks got room to think: none fell back.
    for step in ("decompose", "rewrite", "sufficiency", "answer"):
        assert engine.llm_steps.record(step).fallbacks == 0, engine.llm_steps.summary()
    chain = response.metadata["chain"]
    assert len(chain) == 2 and all(clean(s["answer"]) and clean(s["question"]) for s in chain)
    assert clean(str(response)) and response.metadata["answer_cut"] is False
    streamed = index.as_query_engine(llm=client(server), streaming=True).query(QUESTION)
    text = "".join(streamed.response_gen)
    assert clean(text), text


@pytest.mark.parametrize("server", ["runaway"], indirect=True)
def test_chainrag_replies_cut_inside_reasoning_are_fallbacks_never_empty(server, bow_embed):
    index = build(SentenceGraphIndex, bow_embed)
    engine = index.as_query_engine(llm=client(server))
    with pytest.raises(LLMTruncatedError):
        engine.query(QUESTION)
    answers = engine.llm_steps.record("answer")
    assert answers.fallbacks >= 1 and set(answers.reasons) == {"reply cut by the length limit"}


@pytest.mark.parametrize("server", ["vllm"], indirect=True)
def test_chainrag_stream_reset_before_the_answer_is_retried(server, bow_embed):
    index = build(SentenceGraphIndex, bow_embed)
    engine = index.as_query_engine(llm=client(server), streaming=True)
    # Reset while the reasoning streams (chunk 3 of several hundred): nothing shown yet.
    server.inject(Fault(reset_after=3, match=lambda r: r.stream))
    response = engine.query(QUESTION)
    text = "".join(response.response_gen)
    assert clean(text)
    assert response.metadata["usage"]["retries"] == 1


@pytest.mark.parametrize("server", ["qwen3"], indirect=True)
def test_chainrag_stream_reset_after_part_of_the_answer_is_the_suites_error(server, bow_embed):
    index = build(SentenceGraphIndex, bow_embed)
    engine = index.as_query_engine(llm=client(server), streaming=True)
    index.as_query_engine(llm=client(server)).query(QUESTION)  # the model's style is known
    # Qwen3's think block streams first; break the stream a few pieces after it ends.
    replies = [r for r in server.log if r.task in ("answer", "answer-integration")]
    shown_from = len(replies[-1].text.split("</think>")[0].split()) + 4
    server.inject(Fault(reset_after=shown_from, match=lambda r: r.stream))
    response = engine.query(QUESTION)
    with pytest.raises(LLMStreamError, match="broke after"):
        "".join(response.response_gen)
    usage = response.metadata["usage"]
    assert usage["completion_tokens"] > 0 and usage["failures"] == 1


# --------------------------------------------------------------------------- FG-RAG


@pytest.mark.parametrize("server", STYLES, indirect=True)
def test_fgrag_builds_every_chunk_from_a_reasoning_model(server, caplog):
    extractor = FGRAGExtractor(llm=client(server))
    with caplog.at_level(logging.WARNING):
        extractor([n for n in PassageParser().get_nodes_from_documents(DOCS)])
    stats = extractor.stats
    # The gleaning checks (32 tokens) had room to think: no chunk lost its extraction.
    assert (stats["llm_chunks"], stats["fallback_chunks"]) == (len(DOCS), 0)
    assert stats.get("glean_checks_failed", 0) == 0
    assert server.responder.tasks["glean-check"] == len(DOCS)


@pytest.mark.parametrize("server", ["r1", "vllm"], indirect=True)
def test_fgrag_engine_answers_and_streams_without_reasoning(server, bow_embed):
    llm = client(server)
    index = build(FGRAGIndex, bow_embed, config="paper", llm=llm)
    response = index.as_query_engine(llm=llm).query(QUESTION)
    assert clean(str(response)) and response.metadata["answer_cut"] is False
    summaries = [m["summary"] for m in response.metadata["fgrag"]]
    assert summaries and all(clean(s) for s in summaries)
    streamed = index.as_query_engine(llm=llm, streaming=True).query(QUESTION)
    assert clean("".join(streamed.response_gen))


@pytest.mark.parametrize("server", ["r1"], indirect=True)
async def test_async_stream_of_the_stock_engine_holds_r1_reasoning(server, bow_embed):
    index = build(MultiPartiteIndex, bow_embed)
    engine = index.as_query_engine(llm=client(server), streaming=True)
    response = await engine.aquery(QUESTION)  # a model not seen yet: held to its </think>
    text = "".join([piece async for piece in response.async_response_gen()])
    assert clean(text) and response.metadata["answer_cut"] is False
