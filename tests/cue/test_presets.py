"""The bench names of CUE-RAG's presets, and the library defaults they set."""

from __future__ import annotations

from llama_index_graphrag_ext.cue.retriever import DEFAULT_LEXICAL_WEIGHT
from llama_index_graphrag_ext.eval.methods.cue import PRESETS
from llama_index_graphrag_ext.eval.registry import REGISTRY, BenchContext


def test_preset_names_resolve_before_the_ablations():
    assert "preset" not in REGISTRY.resolve("cue-0.0")[1]
    _, opts = REGISTRY.resolve("cue-0.0-tuned-musique-no-ka")
    assert opts["preset"] == "tuned-musique" and opts["ablations"] == "-no-ka"
    _, opts = REGISTRY.resolve("cue-0.0-paper")
    assert opts["preset"] == "paper"


def test_the_library_default_is_the_default_preset(bow_embed):
    from llama_index.core.schema import Document

    from llama_index_graphrag_ext.cue import MultiPartiteIndex

    docs = [Document(text="Steve Hillage was born in Chingford.", metadata={"title": "S"})]
    retriever = MultiPartiteIndex.from_documents(docs, embed_model=bow_embed).as_retriever()
    default = PRESETS["default"]
    assert retriever.beam == default["M"]
    assert retriever.path_weight == default["path_weight"]
    assert retriever.scorer.lexical_weight == default["lexical_weight"] == DEFAULT_LEXICAL_WEIGHT


def test_a_preset_sets_the_retriever_and_an_option_overrides_it(bow_embed, musique_slice):
    from llama_index_graphrag_ext.eval.data import load_benchmark

    docs = load_benchmark(musique_slice).documents()[:20]
    spec, opts = REGISTRY.resolve("cue-0.0-paper-no-qu")
    system = spec.build(docs, BenchContext(embed_model=bow_embed, top_k=5, options=opts))
    r = system.retriever
    assert (r.beam, r.path_weight, r.scorer.lexical_weight) == (5, 0.0, 0.0)
    assert r.use_qu is False and system.info["preset"] == "paper"
    opts = dict(REGISTRY.resolve("cue-0.0-tuned-musique")[1], path_weight="0.75")
    system = spec.build(docs, BenchContext(embed_model=bow_embed, top_k=5, options=opts))
    tuned = PRESETS["tuned-musique"]
    assert system.retriever.beam == tuned["M"] and system.retriever.path_weight == 0.75
