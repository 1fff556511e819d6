"""QCG-RAG in the benchmark runner: both names, and the LLM-free build with options."""

from __future__ import annotations

import pytest

from llama_index_graphrag_ext.eval.registry import REGISTRY, BenchContext


def test_names_and_tiers():
    spec, opts = REGISTRY.resolve("qcg-sentences")
    assert spec.tier == "llm-free" and opts == {}
    assert REGISTRY.resolve("qcg")[0].tier == "embedded-llm"


def test_qcg_needs_an_llm(bow_embed, musique_slice):
    from llama_index_graphrag_ext.eval.data import load_benchmark

    spec, _ = REGISTRY.resolve("qcg")
    ctx = BenchContext(embed_model=bow_embed, llm_factory=lambda: None)
    with pytest.raises(ValueError, match="qcg-sentences"):
        spec.build(load_benchmark(musique_slice).documents()[:5], ctx)


def test_sentence_build_takes_the_runner_top_k_and_options(bow_embed, musique_slice):
    from llama_index_graphrag_ext.eval.data import load_benchmark

    bench = load_benchmark(musique_slice)
    spec, opts = REGISTRY.resolve("qcg-sentences")
    ctx = BenchContext(embed_model=bow_embed, top_k=4, options={**opts, "hops": "2"})
    system = spec.build(bench.documents(), ctx)
    assert system.info["chunks"] == len(bench.passages) and system.info["query_nodes"] > 0
    assert system.info["params"]["hops"] == 2
    ids, _ = system.retrieve(bench.questions[0].question)
    assert 0 < len(ids) <= 4
