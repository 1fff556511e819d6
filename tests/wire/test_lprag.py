"""LP-RAG over the real loopback wire: LLM atomic chunks and synthetic queries, usage against
the server's counts, the ledger, faults and the cache.

Corpora are four MuSiQue passages; the link predictor trains for a few epochs only.
Each step's meter (``chunker.usage``, ``index.usage``) and the suite's process-wide
``count_llm_calls`` are checked against the server's counts.
"""

from __future__ import annotations

import logging
import re

import pytest
from support.replies import JUNK_REPLY
from support.wire import Fault, WireReply

from llama_index_graphrag_ext.core.llm import LLMFallbackError, RetryPolicy, count_llm_calls
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.eval.data import load_benchmark
from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex, LLMAtomicChunker

STEPS_LOG = "llama_index_graphrag_ext.core.llm.steps"
FAST = {"epochs": 5, "hidden": 16, "threads": 1, "k": 2, "M": 2}
PRONOUN = re.compile(r"^(He|She|It|They|His|Her|Its|Their)\b")
ATOMIC, QUERIES = "atomic-chunks", "synthetic-queries"


@pytest.fixture
def docs(musique_slice):
    return load_benchmark(musique_slice).documents()[:4]


def build(docs, embed, transformation=None, **kwargs) -> ChunkQueryLinkIndex:
    return ChunkQueryLinkIndex.from_documents(
        docs,
        transformations=[transformation or PassageParser()],
        embed_model=embed,
        config="paper",
        **FAST,
        **kwargs,
    )


def metered(meter) -> tuple[int, int, int]:
    return meter.calls, meter.prompt_tokens, meter.completion_tokens


def chunks_of(index) -> list:
    return index.get_chunks(index.chunk_ids())


def written_atoms(server) -> dict[str, list[str]]:
    """The statements the "model" wrote per paragraph it answered usably (deterministic)."""
    out = {}
    for rec in server.log:
        if rec.task == ATOMIC and rec.status == 200 and rec.text != JUNK_REPLY:
            paragraph = rec.request.prompt.rsplit("Paragraph:\n", 1)[1].split("\nAnswer:")[0]
            out[paragraph] = server.responder._atomic(rec.request.prompt)
    return out


def passage_line(doc) -> str:
    """How a one-chunk passage opens its line in a synthetic-query prompt."""
    return "[Passage 1] " + " ".join(doc.text.split())[:60]


def test_lprag_llm_atomic_chunks_and_auto_llm_queries(
    docs,
    model_server,
    wire_llm,
    how,
    give_llm,
    bow_embed,
    tmp_path,
    ran_on_the_wire,
    persisted_ledger,
):
    # query_source="auto": with how="settings" only Settings.llm is set, and it must be used.
    chunker = LLMAtomicChunker(**give_llm(wire_llm))
    with count_llm_calls() as meter:
        index = build(docs, bow_embed, chunker, query_source="auto", **give_llm(wire_llm))
    n, chunks = len(docs), chunks_of(index)
    assert len(chunks) > n and {c.metadata["lp_origin"] for c in chunks} == {"llm"}
    assert chunker.stats["llm_paragraphs"] == n and chunker.stats["fallback_paragraphs"] == 0
    atoms = written_atoms(model_server)
    assert set(atoms) == {d.text for d in docs}  # one paragraph per passage
    assert [c.text for c in chunks] == [a for d in docs for a in atoms[d.text]]
    # The passages say "Its ..." / "It is ...": the responder named the subject instead.
    assert any(PRONOUN.match(s) for d in docs for s in re.split(r"(?<=\.)\s+", d.text))
    assert not any(PRONOUN.match(c.text) for c in chunks)

    stats, queries = index.build_stats, index.queries()
    batches = len(chunks)  # one batch per chunk
    assert stats["batches"] == stats["llm_batches"] == batches
    assert stats["llm_queries"] == 2 * batches == len(queries) and stats["pseudo_queries"] == 0
    assert {q["origin"] for q in queries} == {"llm"}

    server = model_server.stats()
    assert {t: row["requests"] for t, row in server["by_task"].items()} == {
        ATOMIC: n,
        QUERIES: batches,
    }
    assert metered(meter) == model_server.usage() == model_server.usage({ATOMIC, QUERIES})
    assert metered(chunker.usage) == model_server.usage({ATOMIC})
    assert metered(index.usage) == model_server.usage({QUERIES})

    steps = index.llm_steps
    for step, items in ((ATOMIC, n), (QUERIES, batches)):
        record = steps.record(step)
        ran_on_the_wire(record)
        assert (record.items, record.fallbacks, dict(record.reasons)) == (items, 0, {})

    loaded, _ = persisted_ledger(index, tmp_path / "lprag", embed_model=bow_embed)
    assert [q["origin"] for q in loaded.queries()] == ["llm"] * len(queries)


#: Unusable replies: an empty one, and the responder's refusal (no items: a declined task).
UNUSABLE = ["", JUNK_REPLY]
WHY = {"": "empty reply", JUNK_REPLY: "unusable reply"}


def answer_junk(server, text: str, chosen) -> None:
    """``text`` instead of the model's reply for the ``chosen`` requests (every attempt)."""
    replies = server.responder

    def respond(request):
        reply = replies(request)
        return WireReply(text=text, task=reply.task) if chosen(request) else reply

    server.responder = respond


@pytest.mark.parametrize("reply", UNUSABLE, ids=["empty", "refusal"])
def test_atomic_chunker_unusable_paragraph_falls_back_to_sentences(
    docs, model_server, wire_llm, caplog, reply
):
    bad = docs[1].text
    answer_junk(model_server, reply, lambda req: bad in req.prompt)
    chunker = LLMAtomicChunker(llm=wire_llm)
    with caplog.at_level(logging.WARNING, logger=STEPS_LOG):
        chunks = chunker.get_nodes_from_documents(docs)
    n = len(docs)
    assert model_server.stats()["requests"] == n  # text replies: no re-ask, nothing cached
    for chunk in chunks:
        junk = chunk.ref_doc_id == docs[1].doc_id
        assert chunk.metadata["lp_origin"] == ("sentence" if junk else "llm")
        assert not junk or chunk.text in bad
    assert (chunker.stats["llm_paragraphs"], chunker.stats["fallback_paragraphs"]) == (n - 1, 1)
    record = chunker.llm_steps.record(ATOMIC)
    assert (record.items, record.fallbacks, dict(record.reasons)) == (n, 1, {WHY[reply]: 1})
    [warning] = [r for r in caplog.records if "fell back" in r.getMessage()]
    assert f"1 paragraph(s) fell back to sentence chunks ({WHY[reply]} x1)" in warning.getMessage()
    with pytest.raises(LLMFallbackError, match=WHY[reply]):
        LLMAtomicChunker(llm=wire_llm, on_llm_failure="raise").get_nodes_from_documents(docs)


@pytest.mark.parametrize("reply", UNUSABLE, ids=["empty", "refusal"])
def test_synthetic_query_unusable_batches_get_pseudo_queries(
    docs, model_server, wire_llm, bow_embed, caplog, reply
):
    bad = [passage_line(d) for d in docs[:2]]
    answer_junk(model_server, reply, lambda req: any(b in req.prompt for b in bad))
    with caplog.at_level(logging.WARNING, logger=STEPS_LOG):
        index = build(docs, bow_embed, llm=wire_llm)
    n, k = len(docs), len(bad)
    assert model_server.stats()["requests"] == n
    stats = index.build_stats
    assert (stats["batches"], stats["llm_unusable_answers"]) == (n, k)
    assert stats["llm_queries"] == 2 * (n - k) and k <= stats["pseudo_queries"] <= 2 * k
    origins = [q["origin"] for q in index.queries()]
    assert (origins.count("llm"), origins.count("pseudo")) == (
        stats["llm_queries"],
        stats["pseudo_queries"],
    )
    record = index.llm_steps.record(QUERIES)
    assert (record.items, record.fallbacks, dict(record.reasons)) == (n, k, {WHY[reply]: k})
    [warning] = [r for r in caplog.records if "fell back" in r.getMessage()]
    assert f"{k} batch(s) fell back to pseudo-queries" in warning.getMessage()
    with pytest.raises(LLMFallbackError, match=rf"{k} batch\(s\) fell back"):
        build(docs, bow_embed, llm=wire_llm, on_llm_failure="raise")


def test_llm_batches_counts_only_batches_that_got_llm_questions(
    docs, model_server, wire_llm, bow_embed
):
    answer_junk(model_server, "", lambda req: passage_line(docs[0]) in req.prompt)
    index = build(docs, bow_embed, llm=wire_llm)
    assert index.llm_steps.record(QUERIES).fallbacks == 1
    assert index.build_stats["llm_batches"] == len(docs) - 1
    assert index.build_stats["llm_batches_asked"] == len(docs)


def test_lprag_transient_errors_are_retried_and_a_bad_key_is_not(
    docs, model_server, wire_llm, bow_embed, monkeypatch, stalls
):
    monkeypatch.setattr(RetryPolicy, "backoff", lambda self, attempt: 0.0)
    model_server.inject(
        Fault(status=429, retry_after=0.05, match=lambda r: "atomic statements" in r.prompt),
        Fault(status=500, match=lambda r: "curious person" in r.prompt),
    )
    chunker = LLMAtomicChunker(llm=wire_llm)
    with count_llm_calls() as meter:
        index = build(docs, bow_embed, chunker, llm=wire_llm)
    n, batches = len(docs), len(index.chunk_ids())
    stalled = stalls()
    assert stalls.counts(model_server.stats()["by_status"], {429: 1, 500: 1, 200: n + batches})
    if not stalled:  # an abandoned attempt may have been answered, and billed, unread
        assert metered(meter) == model_server.usage({ATOMIC, QUERIES})  # answered calls
    ledger = index.llm_steps.to_dict()
    assert [(ledger[s]["items"], ledger[s]["fallbacks"]) for s in (ATOMIC, QUERIES)] == [
        (n, 0),
        (batches, 0),
    ]
    assert index.build_stats["pseudo_queries"] == 0

    model_server.reset()
    wrong = wire_llm.model_copy(update={"api_key": "sk-not-the-key"})
    index = build(docs, bow_embed, LLMAtomicChunker(llm=wrong), llm=wrong)
    batches = len(index.chunk_ids())
    by_status = model_server.stats()["by_status"]
    assert stalls.counts(by_status, {401: n + batches}, since=stalled)  # one request per item
    ledger = index.llm_steps.to_dict()
    for step, items in ((ATOMIC, n), (QUERIES, batches)):
        assert (ledger[step]["fallbacks"], ledger[step]["reasons"]) == (
            items,
            {"not authorised (HTTP 401)": items},
        )
    assert {c.metadata["lp_origin"] for c in chunks_of(index)} == {"sentence"}
    assert {q["origin"] for q in index.queries()} == {"pseudo"}


def test_lprag_rerun_with_cache_makes_no_request(docs, model_server, wire_llm, bow_embed, tmp_path):
    cache = str(tmp_path / "llm.sqlite")

    def run():
        chunker = LLMAtomicChunker(llm=wire_llm, cache_path=cache)
        return build(docs, bow_embed, chunker, llm=wire_llm, cache_path=cache)

    first = run()
    # One answer per document and per chunk batch. Counted as answers, not arrivals:
    # on a starved machine a call can time out and be retried (the caller's job).
    assert model_server.stats()["answered"] == len(docs) + len(first.chunk_ids())
    model_server.reset()
    again = run()
    assert model_server.stats()["requests"] == 0
    assert [c.text for c in chunks_of(again)] == [c.text for c in chunks_of(first)]
    assert [q["text"] for q in again.queries()] == [q["text"] for q in first.queries()]
    assert {q["origin"] for q in again.queries()} == {"llm"}
    assert again.llm_steps.to_dict() == first.llm_steps.to_dict()
