"""LP-RAG with the real embedded models (MiniLM, SmolLM2) end to end."""

from __future__ import annotations

import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.llm import is_embedded
from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex


@pytest.mark.embedded
def test_embedded_smollm_writes_synthetic_queries(minilm, tmp_path):
    from llama_index_graphrag_ext.core.defaults import embedded_llm

    llm = embedded_llm(max_new_tokens=64)
    assert is_embedded(llm)
    docs = [
        Document(id_="crux", text="Crux is an American comic book published by CrossGen."),
        Document(id_="crossgen", text="CrossGen was a comic book publisher from 1998 to 2004."),
        Document(id_="tea", text="Green tea is made from unoxidised tea leaves."),
    ]
    index = ChunkQueryLinkIndex.from_documents(
        docs,
        embed_model=minilm,
        llm=llm,
        config="paper",
        max_llm_batches=2,
        cache_path=str(tmp_path / "llm.sqlite"),
        epochs=10,
        hidden=32,
        threads=1,
    )
    stats = index.build_stats
    assert stats["batches"] == 3 and stats.get("llm_batches", 0) <= 2
    record = index.llm_steps.record("synthetic-queries")
    assert record.tier == "embedded-llm" and record.items == 2
    assert stats["llm_queries"] + stats["pseudo_queries"] == index.num_queries > 0
    top = index.as_retriever(similarity_top_k=1).retrieve("Who published Crux?")
    assert top[0].node.ref_doc_id in {"crux", "crossgen"}
