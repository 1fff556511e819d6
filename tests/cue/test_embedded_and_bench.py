"""The real embedded stack end to end, and the benchmark registrations."""

from __future__ import annotations

import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.cue import MultiPartiteIndex
from llama_index_graphrag_ext.eval.registry import REGISTRY, BenchContext

DOCS = [
    Document(
        id_="g", text="Green\nGreen is an album by Steve Hillage.", metadata={"title": "Green"}
    ),
    Document(
        id_="h",
        text="Steve Hillage\nSteve Hillage is an English guitarist. He was born in Chingford.",
        metadata={"title": "Steve Hillage"},
    ),
    Document(id_="p", text="Paris\nParis is the capital of France.", metadata={"title": "Paris"}),
]


@pytest.mark.embedded
def test_embedded_minilm_and_smollm2_end_to_end(minilm):
    from llama_index_graphrag_ext.core.defaults import embedded_llm

    llm = embedded_llm(max_new_tokens=16)
    # alpha = 1 with the embedded LLM: extraction falls back to sentences, counted
    index = MultiPartiteIndex.from_documents(
        DOCS, transformations=[PassageParser()], embed_model=minilm, llm=llm, alpha=1.0
    )
    assert index.stats()["extraction"]["chunks_fallback"] == 3
    engine = index.as_query_engine(llm=llm, top_n=2)
    response = engine.query("Where was Steve Hillage born?")
    assert str(response).strip()
    assert response.source_nodes[0].node.ref_doc_id == "h"


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
