"""End to end with the real embedded SmolLM2 (Doc2Query) and MiniLM."""

from __future__ import annotations

import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.qcg import Doc2QueryGenerator, QueryCentricGraphIndex


@pytest.mark.embedded
def test_embedded_llm_builds_query_answer_nodes(minilm, tmp_path):
    from llama_index_graphrag_ext.core.defaults import embedded_llm

    docs = [
        Document(
            id_="bridge",
            text="The Brooklyn Bridge in New York was designed by John Roebling and opened in 1883.",
        ),
        Document(
            id_="tower", text="The Eiffel Tower in Paris was completed in 1889 by Gustave Eiffel."
        ),
    ]
    llm = embedded_llm(max_new_tokens=96)
    generator = Doc2QueryGenerator(
        llm=llm, num_pairs=2, cache_path=str(tmp_path / "cache.sqlite"), max_concurrency=1
    )
    assert generator.resolved_format() == "lines"
    index = QueryCentricGraphIndex.from_documents(
        docs,
        embed_model=minilm,
        llm=llm,
        generator=generator,
        transformations=[PassageParser()],
        k=1,
    )
    stats = index.build_stats
    assert stats["chunks"] == 2
    # Every chunk has query nodes: LLM pairs, or counted sentence fallbacks.
    assert {p.chunk_id for p in index.layer.pairs} == set(index.chunk_ids())
    # (the 135M model's list can stay cut at 96 tokens: a counted fallback, never kept cut)
    assert stats["fallback_chunks"] == index.llm_steps.record("doc2query").fallbacks
    hits = index.as_retriever(similarity_top_k=1).retrieve("Who designed the Brooklyn Bridge?")
    assert hits[0].node.ref_doc_id == "bridge"
    assert hits[0].node.metadata["evidence"]["query_nodes"]
