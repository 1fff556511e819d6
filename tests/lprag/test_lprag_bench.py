"""Runner registration, and the real embedded models end to end."""

from __future__ import annotations

import pytest
from llama_index.core.schema import Document

from llama_index_graphrag_ext.core.llm import is_embedded
from llama_index_graphrag_ext.eval.registry import REGISTRY, BenchContext
from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex


def test_names_resolve_with_their_predictor():
    spec, opts = REGISTRY.resolve("lprag-pseudo-gcn")
    assert spec.tier == "llm-free" and opts == {"predictor": "gcn"}
    spec, opts = REGISTRY.resolve("lprag-pseudo")
    assert spec.tier == "llm-free" and opts == {}
    spec, opts = REGISTRY.resolve("lprag-sage")
    assert spec.tier == "llm" and opts == {"predictor": "sage"}
    spec, opts = REGISTRY.resolve("lprag-pseudo-mlp-bridges")
    assert spec.tier == "llm-free" and opts == {"predictor": "mlp", "bridges": "bridges"}
    _, opts = REGISTRY.resolve("lprag-pseudo-mlp-bridges-hard0.5-prior1")
    assert opts == {"predictor": "mlp", "bridges": "bridges", "hard": "0.5", "prior": "1"}


def test_pseudo_builder_reports_training(bow_embed):
    docs = [
        Document(id_=f"d{i}", text=f"Topic {i % 3} passage number {i}. It mentions item {i}.")
        for i in range(12)
    ]
    spec, opts = REGISTRY.resolve("lprag-pseudo-mlp")
    ctx = BenchContext(
        embed_model=bow_embed, top_k=5, options={**opts, "epochs": "10", "hidden": "16"}
    )
    system = spec.build(docs, ctx)
    ids, _ = system.retrieve("Topic 1 passage")
    assert len(ids) == 5
    assert system.info["predictor"] == "mlp" and system.info["train_seconds"] > 0
    assert system.info["queries"] > 0 and "val_auc" in system.info


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
        query_source="llm",
        max_llm_batches=2,
        llm_cache_path=str(tmp_path / "llm.sqlite"),
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
