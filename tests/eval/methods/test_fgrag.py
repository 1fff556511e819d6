"""FG-RAG registered in the runner, on a real musique slice."""

from __future__ import annotations

from llama_index_graphrag_ext.eval.registry import REGISTRY
from llama_index_graphrag_ext.eval.runner import RunConfig, run_benchmark


def test_registered() -> None:
    spec, _ = REGISTRY.resolve("fgrag")
    assert spec.tier == "llm-free"
    assert REGISTRY.resolve("fgrag-llm")[0].tier == "llm"


def test_fgrag_runs_in_the_runner(musique_slice, bow_embed, monkeypatch) -> None:
    monkeypatch.setattr(
        "llama_index_graphrag_ext.eval.runner.resolve_embed_model", lambda *a, **k: bow_embed
    )
    config = RunConfig(
        data=str(musique_slice),
        methods=["fgrag"],
        limit=4,
        show_progress=False,
        options={"top_n": "10"},
    )
    row = run_benchmark(config)["methods"]["fgrag"]
    assert "error" not in row, row.get("error")
    assert 0.0 <= row["recall@10"] <= 1.0 and row["recall@10"] > 0
    assert row["info"]["entities"] > 0 and row["info"]["extractors"] == ["CooccurrenceExtractor"]
    assert row["llm_calls_index"] == 0 and row["llm_calls_query"] == 0
