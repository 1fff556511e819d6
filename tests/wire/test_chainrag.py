"""ChainRAG over the loopback wire: decomposition, rewriting, sufficiency, usage, streams, faults.

The model is ``support.replies.ModelReplies`` (the test tools) behind a real
OpenAI-compatible HTTP server; both clients (``OpenAILike``: JSON read from text, ``OpenAI``:
native JSON schema) and both ways of handing over the LLM (``llm=``, ``Settings.llm``).
"""

from __future__ import annotations

import time

import pytest
from llama_index.core.base.response.schema import StreamingResponse
from llama_index.core.schema import Document
from support.wire import Fault

from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
from llama_index_graphrag_ext.core.llm import LLMFallbackError
from llama_index_graphrag_ext.core.nodes import PassageParser

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
# The model splits "the <noun> who <clause>" into two hops; the second names "this author".
QUESTION = "What is the birthplace of the author who wrote Bambi?"
SUBS = ["Which author wrote Bambi?", "What is the birthplace of this author?"]
USAGE = ("calls", "prompt_tokens", "completion_tokens")
DECORATIONS = ("<think>", "Answer:", "Rewritten question:")


@pytest.fixture
def index(bow_embed):
    # Built per test: the index picks its LLM (Settings.llm in the "settings" runs) once.
    return SentenceGraphIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()]
    )


def usage_of(response) -> tuple[int, int, int]:
    return tuple(response.metadata["usage"][k] for k in USAGE)


def replies(server, task: str) -> list[str]:
    """What the server sent for ``task``, in order."""
    return [r.text for r in server.log if r.task == task]


@pytest.mark.parametrize("integration", ["answer", "context"])
def test_chain_decomposes_rewrites_and_stops_when_sufficient(
    index, model_server, wire_llm, how, give_llm, integration
):
    engine = index.as_query_engine(integration=integration, **give_llm(wire_llm))
    response = engine.query(QUESTION)
    chain = response.metadata["chain"]

    # Decomposed by the LLM (one request), the later hop rewritten from the first answer.
    assert [s["original"] for s in chain] == SUBS
    assert response.metadata["notes"]["decomposition"] == "ok"
    assert chain[0]["action"] == "none" and chain[0]["question"] == SUBS[0]
    assert chain[1]["action"] == "rewritten"
    assert chain[1]["question"] == f"What is the birthplace of {chain[0]['answer']}?"
    # The server wrote labels and reasoning; none of it reaches the chain or the answer.
    assert any(t.startswith("Rewritten question:") for t in replies(model_server, "rewrite"))
    raw_answers = replies(model_server, "sub-answer")
    assert any(d in t for t in raw_answers for d in DECORATIONS)
    assert [s["answer"] for s in chain] == ["Felix", "Pest"]
    assert all(s["answered"] for s in chain)
    for text in [str(response), *(s["question"] for s in chain), *(s["answer"] for s in chain)]:
        assert not any(d in text for d in DECORATIONS), text
    final = replies(model_server, "answer-integration" if integration == "answer" else "answer")
    assert len(final) == 1 and str(response) and str(response) in final[0]
    if integration == "answer":
        assert str(response) == "Pest"  # AnsInt: the last sub-answer

    # One sufficiency check per hop said "yes" ("Based on the context, yes." included).
    assert [s["stopped"] for s in chain] == ["sufficient", "sufficient"]
    assert [s["hops"] for s in chain] == [1, 1]
    tasks = model_server.responder.tasks
    assert tasks["decompose"] == 1 and tasks["rewrite"] == 1 and tasks["sufficiency"] == 2
    assert tasks["sub-answer"] == 2

    # The query's usage is what the server counted: requests and tokens.
    assert usage_of(response) == model_server.usage() and model_server.usage()[0] == 7
    assert model_server.stats()["by_status"] == {200: 7}
    for step in ("decompose", "rewrite", "sufficiency", "answer"):
        record = engine.llm_steps.record(step)
        assert record.tier == "full-llm" and record.source == how and record.fallbacks == 0
        assert record.llm_class == type(wire_llm).__name__
    assert engine.llm_steps.record("decompose").items == 1
    assert engine.llm_steps.record("sufficiency").items == 2


def test_streaming_counts_the_stream_and_replays_it_from_the_cache(
    index, model_server, wire_llm, how, give_llm, tmp_path
):
    engine = index.as_query_engine(
        integration="answer", streaming=True, cache_path=str(tmp_path / "llm.sqlite"),
        **give_llm(wire_llm),
    )  # fmt: skip
    response = engine.query(QUESTION)
    assert isinstance(response, StreamingResponse)
    pieces = list(response.response_gen)
    assert pieces and all(pieces)  # no empty pieces (the SSE role chunk is not one)
    streamed = "".join(pieces)
    last = model_server.log[-1]
    assert last.request.stream and streamed == last.text
    # The streamed call is counted once the stream is consumed.
    assert usage_of(response) == model_server.usage() and model_server.usage()[0] == 7

    # The same question again: every call, the stream included, comes from the cache.
    model_server.reset()
    again = engine.query(QUESTION)
    assert "".join(again.response_gen) == streamed
    assert model_server.stats()["requests"] == 0
    assert usage_of(again) == (0, 0, 0) and again.metadata["usage"]["cache_hits"] == 7
    assert again.metadata["chain"] == response.metadata["chain"]


def test_a_cached_stream_replays_what_the_fresh_stream_gave(
    index, model_server, wire_llm, tmp_path
):
    replies_of = model_server.responder

    def reasoning_model(request):  # a reasoning model: the final answer after a <think> block
        reply = replies_of(request)
        if reply.task == "answer-integration":
            reply.text = "<think>\nThe second answer is the place.\n</think>\nPest"
        return reply

    model_server.responder = reasoning_model
    engine = index.as_query_engine(
        llm=wire_llm, integration="answer", streaming=True, cache_path=str(tmp_path / "c.sqlite")
    )
    fresh = "".join(engine.query(QUESTION).response_gen)
    cached = "".join(engine.query(QUESTION).response_gen)
    assert model_server.stats()["requests"] == 7  # the second query was all cache
    assert cached == fresh == "Pest"  # the reasoning is dropped as the stream arrives


def junk_decomposition(server) -> None:
    server.responder.junk = lambda request, task: task == "decompose"


def test_junk_decomposition_keeps_the_question_whole(index, model_server, wire_llm):
    junk_decomposition(model_server)
    engine = index.as_query_engine(llm=wire_llm, integration="answer")
    response = engine.query(QUESTION)

    chain = response.metadata["chain"]
    assert [s["original"] for s in chain] == [QUESTION] and chain[0]["action"] == "none"
    assert response.metadata["notes"]["decomposition"] == "fallback"
    # Asked twice (one re-ask of the unusable reply), counted once, with its reason.
    assert model_server.responder.tasks["decompose"] == 2
    record = engine.llm_steps.record("decompose")
    assert (record.items, record.fallbacks) == (1, 1)
    assert dict(record.reasons) == {"unusable reply": 1}
    assert response.metadata["notes"]["fallbacks"] == ["decompose: unusable reply"]
    assert response.metadata["usage"]["parse_failures"] == 1
    assert usage_of(response) == model_server.usage()

    strict = index.as_query_engine(llm=wire_llm, on_llm_failure="raise")
    with pytest.raises(LLMFallbackError, match="decompose"):
        strict.query(QUESTION)


@pytest.mark.parametrize("refused", ["decompose", "sufficiency"])
def test_rate_limit_with_retry_after_is_waited_out_and_retried(
    index, model_server, wire_llm, refused
):
    engine = index.as_query_engine(llm=wire_llm, integration="answer")
    clean = engine.query(QUESTION)
    clean_requests = model_server.stats()["requests"]

    model_server.reset()
    # The decomposition (structured output) or the first sufficiency check is refused once.
    number = {"decompose": 1, "sufficiency": 2}[refused]
    model_server.inject(Fault(status=429, retry_after=0.2, match=lambda r: r.number == number))
    start = time.perf_counter()
    response = engine.query(QUESTION)
    elapsed = time.perf_counter() - start

    stats = model_server.stats()
    assert stats["requests"] == clean_requests + 1
    assert stats["by_status"] == {429: 1, 200: clean_requests}
    assert elapsed >= 0.2  # the server's Retry-After was honoured
    assert str(response) == str(clean)
    assert response.metadata["chain"] == clean.metadata["chain"]
    usage = response.metadata["usage"]
    assert (usage["retries"], usage["failures"]) == (1, 0)
    assert usage_of(response) == model_server.usage()  # the refused attempt counted as a call
    assert all(r.fallbacks == 0 for r in engine.llm_steps.records())
    assert "fallbacks" not in response.metadata["notes"]
    assert model_server.log[number - 1].status == 429 and model_server.log[number].task == refused
