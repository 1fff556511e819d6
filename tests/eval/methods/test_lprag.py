"""LP-RAG in the benchmark runner: names, options and a small LLM-free build."""

from __future__ import annotations

from llama_index.core.schema import Document

from llama_index_graphrag_ext.eval.registry import REGISTRY, BenchContext


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
    _, opts = REGISTRY.resolve("lprag-pseudo-titles-priorstd")
    assert opts == {"preset": "titles", "prior": "std"}


def test_titles_preset_fuses_standardized_scores_and_a_weight_overrides_it():
    from llama_index_graphrag_ext.eval.methods.lprag import _prior

    _, opts = REGISTRY.resolve("lprag-pseudo-titles")
    assert _prior(BenchContext(embed_model=None, top_k=5, options=opts)) == "standardized"
    _, opts = REGISTRY.resolve("lprag-pseudo-titles-tuned-musique")
    assert _prior(BenchContext(embed_model=None, top_k=5, options=opts)) == "standardized"
    _, opts = REGISTRY.resolve("lprag-pseudo-titles-prior2")
    assert _prior(BenchContext(embed_model=None, top_k=5, options=opts)) == 2.0
    _, opts = REGISTRY.resolve("lprag-pseudo")
    assert _prior(BenchContext(embed_model=None, top_k=5, options=opts)) == 0.0
    ctx = BenchContext(embed_model=None, top_k=5, options={"prior": "std"})
    assert _prior(ctx) == "standardized"


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
