"""The reference methods in the benchmark runner: ``dense``, ``dense-sentences``, ``bm25``
and ``li-hybrid``."""

from __future__ import annotations

from support import BagOfWordsEmbedding

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


def test_dense_sentences_asks_for_several_sentences_per_passage():
    from llama_index.core.schema import Document

    filler = "The printers need toner. Parking closes early on Friday. Lunch was noodles."
    documents = [
        Document(id_="log", text=f"{filler} Anna repainted the Skagen lighthouse red. {filler}"),
        Document(id_="brochure", text="Lighthouses guide ships. A lighthouse has a lamp."),
        Document(id_="other", text="The bakery sells rye bread and cinnamon buns."),
    ]
    spec, _ = REGISTRY.resolve("dense-sentences")
    ctx = BenchContext(embed_model=BagOfWordsEmbedding(), top_k=2)
    system = spec.build(documents, ctx)
    assert system.info == {"sentences": 10, "sentences_retrieved": 10}
    ranked, _ = system.retrieve("Who repainted the Skagen lighthouse?")
    assert ranked[0] == "log" and len(ranked) >= ctx.top_k  # k passages for the runner
