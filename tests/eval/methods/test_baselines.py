"""The reference methods in the benchmark runner: ``dense``, ``bm25`` and ``li-hybrid``."""

from __future__ import annotations

from llama_index_graphrag_ext.eval.registry import REGISTRY, BenchContext


def test_reference_methods_build_and_rank(bow_embed, musique_slice):
    from llama_index_graphrag_ext.eval.data import load_benchmark

    bench = load_benchmark(musique_slice)
    for name in ("dense", "bm25", "li-hybrid"):
        spec, opts = REGISTRY.resolve(name)
        assert spec.tier == "llm-free" and opts == {}
        system = spec.build(bench.documents(), BenchContext(embed_model=bow_embed, top_k=3))
        ids, _ = system.retrieve(bench.questions[0].question)
        assert len(ids) == 3 and set(ids) <= {p.id for p in bench.passages}
