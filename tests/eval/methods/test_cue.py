"""CUE-RAG in the benchmark runner: names with ablations, and a build on a real slice."""

from __future__ import annotations

import pytest

from llama_index_graphrag_ext.eval.registry import REGISTRY, BenchContext


def test_bench_names_resolve_with_ablations():
    spec, opts = REGISTRY.resolve("cue-0.0")
    assert spec.tier == "llm-free" and opts.get("ablations", "") == ""
    spec, opts = REGISTRY.resolve("cue-0.0-no-sa-no-qu")
    assert spec.tier == "llm-free" and opts["ablations"] == "-no-sa-no-qu"
    spec, opts = REGISTRY.resolve("cue-0.5")
    assert spec.tier == "llm" and opts["alpha"] == "0.5"
    with pytest.raises(KeyError):
        REGISTRY.resolve("cue-0.0-no-xx")


def test_bench_build_on_a_real_slice(bow_embed, musique_slice):
    from llama_index_graphrag_ext.eval.data import load_benchmark

    bench = load_benchmark(musique_slice)
    spec, opts = REGISTRY.resolve("cue-0.0-no-qu")
    ctx = BenchContext(embed_model=bow_embed, top_k=5, options=opts)
    system = spec.build(bench.documents(), ctx)
    assert system.info["ablations"] == ["qu"] and system.info["llm_index_tokens"] == 0
    assert system.retriever.use_qu is False and system.retriever.top_n == 5
    hits = 0
    for q in bench.questions:
        ids, results = system.retrieve(q.question)
        assert 0 < len(ids) <= 5
        hits += len(set(ids) & set(q.gold_ids))
    assert hits > 0
