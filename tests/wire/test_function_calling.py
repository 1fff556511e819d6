"""A function-calling client (``OpenAILike(is_function_calling_model=True)``) on the wire.

Cut tool calls are never taken as complete, refusals that no other mode can fix
are not read as "tools not supported", and an item a re-ask recovered is not a
failure.
"""

from __future__ import annotations

import logging

import pytest
from pydantic import BaseModel
from support.wire import Fault, WireReply, WireServer

from llama_index_graphrag_ext.core.llm import LLMRequestError, LLMTruncatedError
from llama_index_graphrag_ext.core.llm.calls import LLMCaller
from llama_index_graphrag_ext.core.llm.retry import RetryPolicy

FAST = RetryPolicy(base_delay=0.0, max_delay=0.0, timeout=5.0)
CALLS_LOG = "llama_index_graphrag_ext.core.llm.calls"


class QA(BaseModel):
    question: str
    answer: str


class QAPairs(BaseModel):
    pairs: list[QA]


PAIRS = [{"question": f"Who wrote book {i}?", "answer": f"Author {i}"} for i in range(32)]


@pytest.fixture
def server():
    srv = WireServer(lambda request: WireReply(arguments={"pairs": PAIRS})).start()
    try:
        yield srv
    finally:
        srv.stop()
    if srv.errors:
        raise srv.errors[0]


def client(server: WireServer) -> LLMCaller:
    caller = LLMCaller(server.openai_like(is_function_calling_model=True), retry=FAST)
    assert caller.mode == "function_calling"
    return caller


def test_cut_tool_call_is_asked_again_though_its_partial_json_parses(server, caplog):
    caller = client(server)
    with caplog.at_level(logging.INFO, logger=CALLS_LOG):
        found = caller.structured("Pairs?", QAPairs, max_tokens=200)
    # 200 tokens hold about ten pairs: the cut call is never kept, the re-ask has room.
    assert [p.model_dump() for p in found.pairs] == PAIRS
    finishes = [r.finish_reason for r in server.log]
    assert finishes[0] == "length" and finishes[-1] == "tool_calls"
    assert [r.request.max_tokens for r in server.log][:2] == [200, 400]
    # Recovered by a re-ask: not a failure, nothing logged "for good".
    assert (caller.meter.failures, caller.meter.truncated) == (0, 0)
    assert caller.meter.length_retries == len(server.log) - 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_tool_call_still_cut_after_the_re_asks_is_an_error_not_a_short_list(server, caplog):
    server.inject(Fault(cut_at=150, times=None))
    caller = client(server)
    with caplog.at_level(logging.INFO, logger=CALLS_LOG), pytest.raises(LLMTruncatedError):
        caller.structured("Pairs?", QAPairs, max_tokens=100)
    assert len(server.log) == 3 and all(r.finish_reason == "length" for r in server.log)
    assert (caller.meter.truncated, caller.meter.length_retries, caller.meter.failures) == (1, 2, 0)
    assert not [r for r in caplog.records if "failed for good" in r.getMessage()]


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (404, "The model `qwen3:8b` does not exist.", "model not found"),
        (401, None, "not authorised"),
        (
            400,
            "This model's maximum context length is 8192 tokens. However, you requested "
            "9120 tokens (8920 in the messages, 200 in the completion).",
            "context overflow",
        ),
    ],
    ids=["404", "401", "context-overflow"],
)
def test_refusals_are_their_own_errors_and_never_switch_to_text(server, status, message, kind):
    server.inject(Fault(status=status, message=message, times=None))
    caller = client(server)
    with pytest.raises(LLMRequestError) as raised:
        caller.structured("Pairs?", QAPairs)
    assert raised.value.kind == kind
    assert len(server.log) == 1  # asked once: neither retried nor sent again as text
    assert caller.mode == "function_calling"


def test_only_a_400_that_names_tools_switches_to_text(server, caplog):
    no_tools = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser'
    server.inject(Fault(status=400, message=no_tools, match=lambda r: r.tools is not None))
    server.responder = lambda request: WireReply(
        text='{"pairs": [{"question": "Who?", "answer": "Ada"}]}',
        arguments={"pairs": PAIRS[:1]},
    )
    caller = client(server)
    with caplog.at_level(logging.WARNING, logger=CALLS_LOG):
        found = caller.structured("Pairs?", QAPairs)
    assert found.pairs == [QA(question="Who?", answer="Ada")]
    assert caller.mode == "text"
    assert [(r.status, r.request.tools is not None) for r in server.log] == [
        (400, True),
        (200, False),
    ]


# --------------------------------------------------------------------------- the components


@pytest.fixture
def split_server():
    """``ModelReplies`` whose structured lists come split over two tool calls."""
    from support.reasoning import SplitToolCalls
    from support.replies import ModelReplies

    srv = WireServer(SplitToolCalls(ModelReplies(), parts=2)).start()
    try:
        yield srv
    finally:
        srv.stop()
    if srv.errors:
        raise srv.errors[0]


@pytest.fixture
def docs(musique_slice):
    from llama_index_graphrag_ext.eval.data import load_benchmark

    return load_benchmark(musique_slice).documents()[:4]


def function_calling(server: WireServer):
    return server.openai_like(is_function_calling_model=True)


def split_calls(server: WireServer, task: str) -> list[int]:
    """How many tool calls each answered ``task`` request got."""
    return [r.text.count("\n") + 1 for r in server.log if r.task == task and r.status == 200]


def test_qcg_keeps_the_pairs_of_every_tool_call(split_server, docs, bow_embed):
    from llama_index_graphrag_ext.core.nodes import PassageParser
    from llama_index_graphrag_ext.qcg import Doc2QueryGenerator, QueryCentricGraphIndex

    llm = function_calling(split_server)
    index = QueryCentricGraphIndex.from_documents(
        docs,
        transformations=[PassageParser()],
        embed_model=bow_embed,
        llm=llm,
        generator=Doc2QueryGenerator(llm=llm, num_pairs=6, alpha=1.0),
    )
    assert split_calls(split_server, "doc2query") == [2] * len(docs)
    stats = index.build_stats
    assert stats["pairs_generated"] == 6 * len(docs) and stats["fallback_chunks"] == 0
    assert index.llm_steps.record("doc2query").fallbacks == 0


def test_cue_keeps_the_units_of_every_tool_call(split_server, docs, bow_embed):
    from llama_index_graphrag_ext.core.nodes import PassageParser
    from llama_index_graphrag_ext.cue import MultiPartiteIndex

    index = MultiPartiteIndex.from_documents(
        docs,
        transformations=[PassageParser()],
        embed_model=bow_embed,
        llm=function_calling(split_server),
        alpha=1.0,
    )
    assert all(n == 2 for n in split_calls(split_server, "units"))
    written = {
        u
        for r in split_server.log
        if r.task == "units"
        for u in split_server.responder._units(r.request.prompt)["units"]
    }
    assert set(index.view().unit_texts) == written
    assert index.stats()["extraction"]["chunks_fallback"] == 0


def test_chainrag_keeps_every_sub_question_of_a_split_decomposition(split_server, bow_embed):
    from llama_index.core.schema import Document

    from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
    from llama_index_graphrag_ext.core.nodes import PassageParser

    docs = [
        Document(text="Felix Salten wrote the novel Bambi in 1923."),
        Document(text="Pest is the birthplace of Felix Salten."),
    ]
    index = SentenceGraphIndex.from_documents(
        docs, embed_model=bow_embed, transformations=[PassageParser()]
    )
    engine = index.as_query_engine(llm=function_calling(split_server))
    response = engine.query("What is the birthplace of the author who wrote Bambi?")
    assert split_calls(split_server, "decompose") == [2]
    assert [s["original"] for s in response.metadata["chain"]] == [
        "Which author wrote Bambi?",
        "What is the birthplace of this author?",
    ]
