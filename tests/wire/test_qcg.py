"""QCG-RAG's Doc2Query over the real loopback wire: pairs, meters, ledger, faults, cache.

Every test builds a ``QueryCentricGraphIndex`` on four MuSiQue passages (one chunk
each) against ``model_server``, with both clients (``OpenAILike``: JSON read from
text; ``OpenAI``: native JSON schema), and checks what the index says against what
the server counted.
"""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from support.wire import Fault

from llama_index_graphrag_ext.core.llm import LLMFallbackError, RetryPolicy
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.eval.data import load_benchmark
from llama_index_graphrag_ext.qcg import Doc2QueryGenerator, QueryCentricGraphIndex

STEPS_LOG = "llama_index_graphrag_ext.core.llm.steps"
M, ALPHA = 5, 0.6  # the paper's M and alpha, small: round(0.6 * 5) = 3 pairs kept per chunk
KEPT = round(ALPHA * M)


@pytest.fixture
def docs(musique_slice):
    return load_benchmark(musique_slice).documents()[:4]


def build(docs, embed, **kwargs) -> QueryCentricGraphIndex:
    return QueryCentricGraphIndex.from_documents(
        docs, transformations=[PassageParser()], embed_model=embed, **kwargs
    )


def generator(llm, **kwargs) -> Doc2QueryGenerator:
    return Doc2QueryGenerator(llm=llm, num_pairs=M, alpha=ALPHA, **kwargs)


def metered(meter) -> tuple[int, int, int]:
    return meter.calls, meter.prompt_tokens, meter.completion_tokens


def pairs_of(index, docs) -> dict[str, list]:
    """The index's query nodes by the text of their chunk."""
    text = {c.node_id: c.get_content() for c in index.get_chunks(index.chunk_ids())}
    out: dict[str, list] = {d.text: [] for d in docs}
    for pair in index.layer.pairs:
        out[text[pair.chunk_id]].append(pair)
    return out


def test_doc2query_builds_m_pairs_per_chunk_metered_as_the_server_counted(
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
    # No generator given: the index picks Doc2Query because an LLM resolves (llm= or Settings).
    index = build(docs, bow_embed, config="paper", M=M, alpha=ALPHA, **give_llm(wire_llm))
    gen, n = index.generator, len(docs)
    assert isinstance(gen, Doc2QueryGenerator)
    stats = index.build_stats
    assert stats["pairs_generated"] == M * n  # exactly M per chunk before Doc2Query--
    assert stats["kept"] == KEPT * n and stats["fallback_chunks"] == 0
    by_chunk = pairs_of(index, docs)
    assert [len(p) for p in by_chunk.values()] == [KEPT] * n
    for text, pairs in by_chunk.items():  # the LLM's pairs, grounded in their own chunk
        assert {p.kind for p in pairs} == {"qa"}
        assert all(p.query.endswith("?") and p.answer and p.answer in text for p in pairs)

    # One request per chunk, and the generator's meter is the server's count.
    assert model_server.stats()["requests"] == n
    assert metered(gen.usage) == model_server.usage({"doc2query"})
    assert model_server.usage({"doc2query"})[1:] != (0, 0)

    record = index.llm_steps.record("doc2query")
    ran_on_the_wire(record)
    assert (record.items, record.fallbacks, dict(record.reasons)) == (n, 0, {})

    loaded, manifest = persisted_ledger(index, tmp_path / "qcg", embed_model=bow_embed)
    assert manifest["llm_steps"]["doc2query"]["source"] == how
    assert [p.query for p in loaded.layer.pairs] == [p.query for p in index.layer.pairs]
    assert model_server.stats()["requests"] == n  # loading asks nothing


def test_doc2query_junk_replies_fall_back_counted_exactly(
    docs, model_server, wire_llm, bow_embed, caplog
):
    bad = {d.text for d in docs[:2]}
    model_server.responder.junk = lambda req, task: (
        task == "doc2query" and any(t in req.prompt for t in bad)
    )
    gen = generator(wire_llm)
    with caplog.at_level(logging.WARNING, logger=STEPS_LOG):
        index = build(docs, bow_embed, generator=gen)
    n, k = len(docs), len(bad)
    record = index.llm_steps.record("doc2query")
    assert (record.tier, record.items, record.fallbacks) == ("full-llm", n, k)
    assert dict(record.reasons) == {"unusable reply": k}
    assert index.build_stats["fallback_chunks"] == k
    assert index.build_stats["pairs_generated"] == M * (n - k)
    # A junk chunk is asked again once (repair_attempts=1), then gets its sentences.
    assert model_server.responder.tasks["doc2query"] == n + k * gen.repair_attempts
    assert metered(gen.usage) == model_server.usage({"doc2query"})
    for text, pairs in pairs_of(index, docs).items():
        assert {p.kind for p in pairs} == ({"sentence"} if text in bad else {"qa"})
    [warning] = [r for r in caplog.records if "fell back" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert f"{k} chunk(s) fell back to sentence nodes (unusable reply x{k})" in warning.getMessage()


def test_doc2query_on_llm_failure_raise_refuses_a_junk_chunk(
    docs, model_server, wire_llm, bow_embed
):
    model_server.responder.junk = lambda req, task: docs[0].text in req.prompt
    with pytest.raises(LLMFallbackError, match=r"1 chunk\(s\) fell back.*unusable reply"):
        build(docs, bow_embed, generator=generator(wire_llm, on_llm_failure="raise"))


def test_doc2query_429_and_500_are_retried_and_recovered(
    docs, model_server, wire_llm, bow_embed, monkeypatch, stalls
):
    monkeypatch.setattr(RetryPolicy, "backoff", lambda self, attempt: 0.0)
    model_server.inject(
        Fault(status=429, retry_after=0.05, match=lambda r: docs[0].text in r.prompt, times=1),
        Fault(status=500, match=lambda r: docs[1].text in r.prompt, times=1),
    )
    gen = generator(wire_llm)
    index = build(docs, bow_embed, generator=gen)
    n = len(docs)
    stats = model_server.stats()
    stalled = stalls()
    assert stalls.counts(stats["by_status"], {429: 1, 500: 1, 200: n})
    record = index.llm_steps.record("doc2query")
    assert (record.items, record.fallbacks) == (n, 0)
    assert index.build_stats["pairs_generated"] == M * n
    meter = gen.usage
    assert (meter.calls, meter.retries, meter.failures) == (n + 2 + stalled, 2 + stalled, 0)
    # Tokens are only billed for answers: the meter still equals the server (unless an
    # abandoned attempt was answered, and billed, unread).
    if not stalled:
        assert (meter.prompt_tokens, meter.completion_tokens) == model_server.usage({"doc2query"})[
            1:
        ]


def test_doc2query_bad_key_is_tried_once_per_chunk_and_every_chunk_falls_back(
    docs, model_server, wire_llm, bow_embed, stalls
):
    wrong = wire_llm.model_copy(update={"api_key": "sk-not-the-key"})
    index = build(docs, bow_embed, generator=generator(wrong))
    n = len(docs)
    assert stalls.counts(model_server.stats()["by_status"], {401: n})  # never retried
    record = index.llm_steps.record("doc2query")
    assert (record.items, record.fallbacks, dict(record.reasons)) == (
        n,
        n,
        {"not authorised (HTTP 401)": n},
    )
    assert {p.kind for p in index.layer.pairs} == {"sentence"}


def test_doc2query_rerun_with_cache_makes_no_request(
    docs, model_server, wire_llm, bow_embed, tmp_path
):
    cache = str(tmp_path / "cache" / "llm.sqlite")
    first = build(docs, bow_embed, generator=generator(wire_llm, cache_path=cache))
    n = len(docs)
    assert model_server.stats()["requests"] == n
    model_server.reset()
    gen = generator(wire_llm, cache_path=cache)
    again = build(docs, bow_embed, generator=gen)
    assert model_server.stats()["requests"] == 0
    assert (gen.usage.calls, gen.usage.cache_hits) == (0, n)
    assert [(p.query, p.answer) for p in again.layer.pairs] == [
        (p.query, p.answer) for p in first.layer.pairs
    ]
    record = again.llm_steps.record("doc2query")
    assert (record.tier, record.items, record.fallbacks) == ("full-llm", n, 0)
    assert Counter(p.kind for p in again.layer.pairs) == {"qa": KEPT * n}
