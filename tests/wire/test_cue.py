"""CUE-RAG over the real loopback wire: LLM knowledge units (alpha 1 and 0.5), Q-Iter's
LLM query entities, meters against the server's counts, the ledger, faults and the cache.

Corpora are a few MuSiQue passages (one chunk each); both clients run every test.
"""

from __future__ import annotations

import logging
import re

import pytest
from support.replies import JUNK_REPLY, entities_in
from support.wire import Fault

from llama_index_graphrag_ext.core.llm import LLMFallbackError, RetryPolicy
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.core.text import count_tokens
from llama_index_graphrag_ext.cue import KnowledgeUnitExtractor, MultiPartiteIndex
from llama_index_graphrag_ext.eval.data import load_benchmark

STEPS_LOG = "llama_index_graphrag_ext.core.llm.steps"
PRONOUN = re.compile(r"^(He|She|It|They|His|Her|Its|Their)\b")


@pytest.fixture
def bench(musique_slice):
    return load_benchmark(musique_slice)


@pytest.fixture
def docs(bench):
    return bench.documents()[:4]


def build(docs, embed, **kwargs) -> MultiPartiteIndex:
    return MultiPartiteIndex.from_documents(
        docs, transformations=[PassageParser()], embed_model=embed, **kwargs
    )


def llm_units(server) -> dict[str, list[str]]:
    """What the "model" wrote per passage it answered usably (the responder is deterministic)."""
    out = {}
    for rec in server.log:
        if rec.task == "units" and rec.status == 200 and rec.text != JUNK_REPLY:
            passage = rec.request.prompt.rsplit("Passage:\n", 1)[1].split("\nAnswer:")[0]
            out[passage.strip()] = server.responder._units(rec.request.prompt)["units"]
    return out


def extraction_usage(stats) -> tuple[int, int, int]:
    return stats["llm_calls"], stats["llm_prompt_tokens"], stats["llm_completion_tokens"]


def test_cue_alpha_one_builds_every_chunks_units_from_the_llm(
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
    index = build(docs, bow_embed, alpha=1.0, **give_llm(wire_llm))
    n = len(docs)
    ex = index.stats()["extraction"]
    assert ex["chunks_selected"] == ex["chunks_llm"] == n and ex["chunks_fallback"] == 0
    assert ex["units_llm"] == ex["units"] == index.stats()["units"] > n
    written = llm_units(model_server)
    assert set(written) == {d.text for d in docs}  # every chunk went to the LLM
    units = set(index.view().unit_texts)
    assert units == {u for us in written.values() for u in us}
    # The responder names the subject where the passage says "Its ...": no unit does.
    assert any(PRONOUN.match(s) for d in docs for s in re.split(r"(?<=\.)\s+", d.text))
    assert not any(PRONOUN.match(u) for u in units)

    assert model_server.stats()["requests"] == n
    assert extraction_usage(ex) == model_server.usage({"units"})
    meter = index.extractor.usage
    assert (meter.calls, meter.prompt_tokens, meter.completion_tokens) == extraction_usage(ex)

    record = index.llm_steps.record("knowledge-units")
    ran_on_the_wire(record)
    assert (record.items, record.fallbacks, dict(record.reasons)) == (n, 0, {})

    loaded, _ = persisted_ledger(index, tmp_path / "cue", embed_model=bow_embed)
    assert loaded.stats()["extraction"]["units_llm"] == ex["units_llm"]


def test_cue_alpha_half_sends_only_the_knapsacks_chunks(bench, model_server, wire_llm):
    nodes = PassageParser().get_nodes_from_documents(bench.documents()[:8])
    extractor = KnowledgeUnitExtractor(alpha=0.5, llm=wire_llm)
    unit_nodes = extractor(nodes)
    texts = [n.get_content() for n in nodes]
    chosen, info = extractor.select(texts, [count_tokens(t) for t in texts])
    assert 0 < len(chosen) < len(nodes)
    assert sum(count_tokens(texts[i]) for i in chosen) <= info["token_budget"]
    written = llm_units(model_server)
    assert set(written) == {texts[i] for i in chosen}  # the LLM saw the knapsack's chunks only
    for i, node in enumerate(nodes):
        mine = [u for u in unit_nodes if u.metadata["chunk_id"] == node.node_id]
        sources = {u.metadata["unit_source"] for u in mine}
        if i in chosen:
            assert sources == {"llm"} and [u.text for u in mine] == written[texts[i]]
        else:  # sentence units, verbatim from the chunk
            assert sources == {"sentence"} and all(
                u.text in " ".join(texts[i].split()) for u in mine
            )
    record = extractor.llm_steps.record("knowledge-units")
    assert (record.tier, record.source, record.items, record.fallbacks) == (
        "full-llm",
        "argument",
        len(chosen),
        0,
    )
    meter = extractor.usage
    usage = model_server.usage({"units"})
    assert (meter.calls, meter.prompt_tokens, meter.completion_tokens) == usage
    assert usage[0] == model_server.stats()["requests"] == len(chosen)


def test_cue_junk_chunks_fall_back_to_sentence_units_counted_exactly(
    docs, model_server, wire_llm, bow_embed, caplog
):
    bad = {d.text for d in docs[1:3]}
    model_server.responder.junk = lambda req, task: any(t in req.prompt for t in bad)
    with caplog.at_level(logging.WARNING, logger=STEPS_LOG):
        index = build(docs, bow_embed, alpha=1.0, llm=wire_llm)
    n, k = len(docs), len(bad)
    ex = index.stats()["extraction"]
    assert (ex["chunks_llm"], ex["chunks_fallback"], ex["llm_parse_failures"]) == (n - k, k, k)
    record = index.llm_steps.record("knowledge-units")
    assert (record.items, record.fallbacks, dict(record.reasons)) == (n, k, {"unusable reply": k})
    assert model_server.stats()["requests"] == n + k  # one re-ask per junk chunk
    assert extraction_usage(ex) == model_server.usage({"units"})
    assert set(llm_units(model_server)) == {d.text for d in docs} - bad
    [warning] = [r for r in caplog.records if "fell back" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert f"{k} chunk(s) fell back to sentence units (unusable reply x{k})" in warning.getMessage()
    with pytest.raises(LLMFallbackError, match=r"2 chunk\(s\) fell back"):
        build(docs, bow_embed, alpha=1.0, llm=wire_llm, on_llm_failure="raise")


def test_cue_transient_errors_are_retried_and_a_bad_key_is_not(
    docs, model_server, wire_llm, bow_embed, monkeypatch, stalls
):
    monkeypatch.setattr(RetryPolicy, "backoff", lambda self, attempt: 0.0)
    model_server.inject(
        Fault(status=429, retry_after=0.05, match=lambda r: docs[0].text in r.prompt, times=1),
        Fault(status=500, match=lambda r: docs[3].text in r.prompt, times=1),
    )
    n = len(docs)
    index = build(docs, bow_embed, alpha=1.0, llm=wire_llm)
    stalled = stalls()
    assert stalls.counts(model_server.stats()["by_status"], {429: 1, 500: 1, 200: n})
    ex = index.stats()["extraction"]
    assert (ex["chunks_llm"], ex["chunks_fallback"], ex["llm_calls"]) == (n, 0, n + 2 + stalled)
    assert index.llm_steps.record("knowledge-units").fallbacks == 0
    if not stalled:  # an abandoned attempt may have been answered, and billed, unread
        assert extraction_usage(ex)[1:] == model_server.usage({"units"})[1:]

    model_server.reset()
    wrong = wire_llm.model_copy(update={"api_key": "sk-not-the-key"})
    index = build(docs, bow_embed, alpha=1.0, llm=wrong)
    assert stalls.counts(model_server.stats()["by_status"], {401: n}, since=stalled)  # no retry
    record = index.llm_steps.record("knowledge-units")
    assert (record.items, record.fallbacks, dict(record.reasons)) == (
        n,
        n,
        {"not authorised (HTTP 401)": n},
    )
    assert index.stats()["extraction"]["units_llm"] == 0


def test_qiter_uses_the_llms_query_entities(
    bench, docs, model_server, wire_llm, how, give_llm, bow_embed, ran_on_the_wire
):
    index = build(docs, bow_embed)  # alpha 0: the build asks nothing
    assert model_server.stats()["requests"] == 0
    retriever = index.as_retriever(query_entities="llm", **give_llm(wire_llm))
    spacy = index.as_retriever()
    questions = [q.question for q in bench.questions[:3]]
    differs = 0
    for question in questions:
        [top, *_] = retriever.retrieve(question)
        found = top.node.metadata["evidence"]["query_entities"]
        assert found == entities_in(question)  # exactly what the model replied
        differs += found != spacy.retrieve(question)[0].node.metadata["evidence"]["query_entities"]
    assert differs  # and not what spaCy would have found
    record = retriever.llm_steps.record("query-entities")
    ran_on_the_wire(record)
    assert (record.items, record.fallbacks) == (len(questions), 0)
    assert retriever.fallbacks == {"query_entities_llm": 0}
    meter = retriever.usage
    usage = model_server.usage({"query-entities"})
    assert (meter.calls, meter.prompt_tokens, meter.completion_tokens) == usage
    assert usage[0] == model_server.stats()["requests"] == len(questions)


def test_qiter_junk_query_falls_back_to_spacy_entities(
    bench, docs, model_server, wire_llm, bow_embed, caplog
):
    index = build(docs, bow_embed)
    questions = [q.question for q in bench.questions[:3]]
    model_server.responder.junk = lambda req, task: questions[1] in req.prompt
    retriever = index.as_retriever(query_entities="llm", llm=wire_llm)
    spacy = index.as_retriever()
    with caplog.at_level(logging.WARNING, logger=STEPS_LOG):
        found = [retriever.retrieve(q)[0].node.metadata["evidence"] for q in questions]
    assert (
        found[1]["query_entities"]
        == spacy.retrieve(questions[1])[0].node.metadata["evidence"]["query_entities"]
    )
    assert [found[0]["query_entities"], found[2]["query_entities"]] == [
        entities_in(questions[0]),
        entities_in(questions[2]),
    ]
    record = retriever.llm_steps.record("query-entities")
    assert (record.items, record.fallbacks, dict(record.reasons)) == (3, 1, {"unusable reply": 1})
    assert model_server.stats()["requests"] == 3 + 1  # the junk query was asked again once
    [warning] = [r for r in caplog.records if "fell back" in r.getMessage()]
    assert "1 query(s) fell back to spaCy entities (unusable reply x1)" in warning.getMessage()
    strict = index.as_retriever(query_entities="llm", llm=wire_llm, on_llm_failure="raise")
    with pytest.raises(LLMFallbackError):
        strict.retrieve(questions[1])


def test_cue_rerun_with_cache_makes_no_request(
    bench, docs, model_server, wire_llm, bow_embed, tmp_path
):
    cache = str(tmp_path / "llm.sqlite")
    question = bench.questions[0].question
    first = build(docs, bow_embed, alpha=1.0, llm=wire_llm, cache_path=cache)
    first.as_retriever(query_entities="llm", cache_path=cache).retrieve(question)
    assert model_server.stats()["requests"] == len(docs) + 1
    model_server.reset()
    again = build(docs, bow_embed, alpha=1.0, llm=wire_llm, cache_path=cache)
    retriever = again.as_retriever(query_entities="llm", cache_path=cache)
    [top, *_] = retriever.retrieve(question)
    assert model_server.stats()["requests"] == 0
    ex = again.stats()["extraction"]
    assert (ex["llm_calls"], ex["llm_cache_hits"], ex["chunks_llm"]) == (0, len(docs), len(docs))
    assert set(again.view().unit_texts) == set(first.view().unit_texts)
    assert top.node.metadata["evidence"]["query_entities"] == entities_in(question)
    assert retriever.llm_steps.record("query-entities").fallbacks == 0
