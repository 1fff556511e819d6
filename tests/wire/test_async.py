"""Async never blocks, async streams are counted, and sync / ``asyncio.run`` calls mix freely.

A heartbeat task on the caller's loop ticks every 2 ms while an async call runs with the real
MiniLM as embedder (CPU work) and a server that takes 20 ms per request; the largest gap
between ticks must stay under ``BOUND`` (for the repeatable retrievals, in the quieter of
two runs: a blocking call fails both). The same work done by the sync method called inside
the loop (what a blocking ``a*`` method amounts to) is measured too and must exceed twice
the bound, so the bound tells the two apart.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from llama_index.core.base.response.schema import AsyncStreamingResponse
from llama_index.core.schema import Document
from llama_index.llms.openai_like import OpenAILike
from support.wire import Fault

from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.fgrag import FGRAGIndex
from llama_index_graphrag_ext.qcg import QueryCentricGraphIndex

BOUND = 0.04  # s: the largest tick gap an async call may cause
LATENCY = 0.02  # s the server takes per request
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
CITIES = ("Vienna", "Graz", "Linz", "Salzburg", "Innsbruck", "Budapest", "Prague", "Berlin")
QUERIES = [f"How many bridges did {c} have in {1800 + i}?" for i, c in enumerate(CITIES * 2)]
USAGE = ("calls", "prompt_tokens", "completion_tokens")


def big_doc(i: int) -> Document:
    """30 sentences: embedding them with MiniLM is a good 100 ms of CPU."""
    text = " ".join(
        f"{CITIES[(k + i) % 8]} had {k + i} bridges in {1800 + k}, wrote historian Anna Berg."
        for k in range(30)
    )
    return Document(id_=f"big-{i}", text=text)


@pytest.fixture
def like(model_server):
    return OpenAILike(
        model="wire-model",
        api_base=model_server.base_url,
        api_key=model_server.api_key,
        is_chat_model=True,
        context_window=16000,
        max_retries=0,
        timeout=10.0,
    )


async def largest_gap(work) -> tuple[float, float]:
    """``(largest tick gap, seconds taken)`` while awaiting ``work()``."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def heartbeat() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.01)
    start = time.perf_counter()
    await work()
    taken = time.perf_counter() - start
    done.set()
    await beat
    return max(gaps), taken


async def quietest_gap(work, tries: int = 2) -> tuple[float, float]:
    """``largest_gap`` of the quietest of ``tries`` runs of a repeatable ``work``.

    On a loaded machine one stall of another thread (a long call that holds the GIL)
    can open a gap once; a call that blocks the loop opens it on every run.
    """
    runs = [await largest_gap(work) for _ in range(tries)]
    return min(runs)


async def inline(fn):
    """Run a sync call inside the loop: what a blocking ``a*`` method does."""
    return fn()


async def retrieve_all(retriever, blocking: bool = False) -> None:
    """One query after another: a blocking ``aretrieve`` never yields, so its gap adds up."""
    for q in QUERIES:
        await (inline(lambda q=q: retriever.retrieve(q)) if blocking else retriever.aretrieve(q))


def check(async_runs: dict, blocking_runs: dict) -> None:
    seen = {k: (round(g * 1000, 1), round(t * 1000, 1)) for k, (g, t) in async_runs.items()}
    seen.update(
        {k: (round(g * 1000, 1), round(t * 1000, 1)) for k, (g, t) in blocking_runs.items()}
    )
    for name, (gap, taken) in async_runs.items():
        assert taken > 2 * BOUND, f"{name} too quick to tell blocking apart (gap, ms): {seen}"
        assert gap < BOUND, f"{name} blocked the loop (gap ms, took ms): {seen}"
    for name, (gap, _) in blocking_runs.items():
        assert gap > 2 * BOUND, f"the blocking baseline {name} did not block: {seen}"


def test_chainrag_and_qcg_async_calls_never_block_the_loop(model_server, like, minilm):
    chain = SentenceGraphIndex.from_documents(
        DOCS, embed_model=minilm, transformations=[PassageParser()]
    )
    qcg = QueryCentricGraphIndex.from_documents(
        DOCS, llm=like, embed_model=minilm, transformations=[PassageParser()], config="paper", M=4
    )
    engine = chain.as_query_engine(llm=like, integration="answer")
    model_server.inject(Fault(delay=LATENCY, times=None))

    async def main():
        await engine.aquery(QUESTION)  # warm: worker threads, spaCy, the suite's loop
        runs, blocking = {}, {}
        runs["chain ainsert"] = await largest_gap(lambda: chain.ainsert(big_doc(1)))
        blocking["chain insert"] = await largest_gap(
            lambda: inline(lambda: chain.insert(big_doc(2)))
        )
        runs["chain aretrieve"] = await quietest_gap(lambda: retrieve_all(chain.as_retriever()))
        blocking["chain retrieve"] = await largest_gap(
            lambda: retrieve_all(chain.as_retriever(), blocking=True)
        )
        runs["chain aquery"] = await largest_gap(lambda: engine.aquery(QUESTION))
        blocking["chain query"] = await largest_gap(lambda: inline(lambda: engine.query(QUESTION)))
        runs["qcg ainsert"] = await largest_gap(lambda: qcg.ainsert(big_doc(3)))
        blocking["qcg insert"] = await largest_gap(lambda: inline(lambda: qcg.insert(big_doc(4))))
        runs["qcg aretrieve"] = await quietest_gap(lambda: retrieve_all(qcg.as_retriever()))
        blocking["qcg retrieve"] = await largest_gap(
            lambda: retrieve_all(qcg.as_retriever(), blocking=True)
        )
        return runs, blocking

    check(*asyncio.run(main()))
    assert len(chain.ref_doc_info) == len(DOCS) + 2 and len(qcg.ref_doc_info) == len(DOCS) + 2
    assert model_server.stats()["by_status"] == {200: model_server.stats()["requests"]}


def test_fgrag_aquery_never_blocks_the_loop(model_server, like, minilm):
    index = FGRAGIndex.from_documents(
        DOCS, config="paper", llm=like, embed_model=minilm, transformations=[PassageParser()]
    )
    engine = index.as_query_engine(max_query_entities=2, max_questions=2)
    model_server.inject(Fault(delay=LATENCY, times=None))

    async def main():
        await engine.aquery(QUESTION)  # warm
        runs = {"fgrag aquery": await largest_gap(lambda: engine.aquery(QUESTION))}
        blocking = {
            "fgrag query": await largest_gap(lambda: inline(lambda: engine.query(QUESTION)))
        }
        return runs, blocking

    check(*asyncio.run(main()))


def test_fgrag_ainsert_never_blocks_the_loop(model_server, like, minilm):
    index = FGRAGIndex.from_documents(
        DOCS, config="paper", llm=like, embed_model=minilm, transformations=[PassageParser()]
    )
    model_server.inject(Fault(delay=LATENCY, times=None))

    async def main():
        await index.ainsert(big_doc(0))  # warm
        return await largest_gap(lambda: index.ainsert(big_doc(1)))

    gap, taken = asyncio.run(main())
    if taken <= 2 * BOUND:  # not an AssertionError: a real failure, not the expected one
        pytest.fail(f"the insert took only {taken * 1000:.1f} ms")
    assert index.llm_steps.record("extraction").fallbacks == 0
    assert gap < BOUND, f"gap {gap * 1000:.1f} ms over {taken * 1000:.1f} ms"


def test_async_streaming_is_counted(model_server, wire_llm, bow_embed):
    chain = SentenceGraphIndex.from_documents(
        DOCS, embed_model=bow_embed, transformations=[PassageParser()]
    )
    fgrag = FGRAGIndex.from_documents(
        DOCS, config="paper", llm=wire_llm, embed_model=bow_embed, transformations=[PassageParser()]
    )
    engines = {
        "answer-integration": chain.as_query_engine(
            llm=wire_llm, integration="answer", streaming=True
        ),
        "fg-answer": fgrag.as_query_engine(max_query_entities=2, max_questions=2, streaming=True),
    }
    for task, engine in engines.items():
        model_server.reset()

        async def main(engine=engine):
            response = await engine.aquery(QUESTION)
            assert isinstance(response, AsyncStreamingResponse)
            pieces = [piece async for piece in response.async_response_gen()]
            return response, pieces

        response, pieces = asyncio.run(main())
        last = model_server.log[-1]
        assert last.task == task and last.request.stream
        assert pieces and last.request.stream and "".join(pieces) == last.text
        usage = response.metadata["usage"]
        assert tuple(usage[k] for k in USAGE) == model_server.usage()
        assert usage["calls"] == model_server.stats()["requests"] > 1


def test_sync_and_asyncio_run_calls_mix_on_one_client(model_server, like, bow_embed):
    """One client with no retries of its own, used from sync code and from several
    ``asyncio.run`` loops: no call may fail on a connection of a closed loop."""
    options = {"transformations": [PassageParser()], "embed_model": bow_embed, "llm": like}
    fgrag = FGRAGIndex.from_documents(DOCS[:1], config="paper", **options)
    qcg = QueryCentricGraphIndex.from_documents(DOCS[:1], config="paper", M=3, **options)
    chain = SentenceGraphIndex.from_documents(DOCS, **options)
    for index in (fgrag, qcg):
        index.insert(DOCS[1])
        asyncio.run(index.ainsert(DOCS[2]))
        asyncio.run(index.ainsert(DOCS[3]))
    fg_engine = fgrag.as_query_engine(max_query_entities=2, max_questions=2)
    chain_engine = chain.as_query_engine(integration="answer")
    responses = []
    for engine in (fg_engine, chain_engine):
        responses.append(engine.query(QUESTION))
        responses += [asyncio.run(engine.aquery(QUESTION)) for _ in range(2)]

    assert model_server.stats()["by_status"] == {200: model_server.stats()["requests"]}
    assert all(str(r) and r.metadata["usage"]["calls"] > 0 for r in responses)
    assert all(r.metadata["usage"]["retries"] == r.metadata["usage"]["failures"] == 0
               for r in responses)  # fmt: skip
    assert fgrag.llm_steps.record("extraction").items == 4
    assert qcg.llm_steps.record("doc2query").items == 4
    ledgers = [fgrag.llm_steps, qcg.llm_steps, fg_engine.llm_steps, chain_engine.llm_steps]
    assert all(r.fallbacks == 0 for steps in ledgers for r in steps.records())
    assert fgrag.stats()["chunks"] == 4
