"""Fusion methods in the benchmark runner: names, shared parts, and a real run."""

from __future__ import annotations

import pytest
from llama_index.core import Document, Settings

from llama_index_graphrag_ext.eval.methods.compose import (
    ALIASES,
    BUILT_PARTS,
    corpus_fingerprint,
    split_parts,
)
from llama_index_graphrag_ext.eval.registry import REGISTRY, BenchContext
from llama_index_graphrag_ext.eval.runner import RunConfig, run_benchmark

DOCS = [
    Document(id_="a", text="Marie Curie studied radioactivity in Paris."),
    Document(id_="b", text="Pierre Curie taught physics at the Sorbonne."),
    Document(id_="c", text="Beekeepers in Ohio sell raw honey."),
]


@pytest.fixture(autouse=True)
def fresh_parts():
    BUILT_PARTS.clear()
    yield
    BUILT_PARTS.clear()


def test_names_resolve_with_their_parts():
    spec, captured = REGISTRY.resolve("fusion-rrf:qcg-sentences+cue-0.0+bm25")
    assert spec.tier == "llm-free"
    assert captured == {"mode": "rrf", "parts": "qcg-sentences+cue-0.0+bm25"}
    assert REGISTRY.resolve("fusion-llm-rel:qcg+bm25")[0].tier == "llm"
    for alias in ALIASES:
        assert REGISTRY.resolve(alias)[0].name == alias
    assert split_parts("dense + bm25") == ["dense", "bm25"]
    with pytest.raises(ValueError, match="two or more"):
        split_parts("dense")
    with pytest.raises(ValueError, match="repeat"):
        split_parts("bm25+bm25")


def test_parts_are_built_once_per_corpus_and_llm_parts_need_the_llm_variant(bow_embed):
    spec, captured = REGISTRY.resolve("fusion-rrf:dense+bm25")
    first = spec.build(DOCS, BenchContext(embed_model=bow_embed, options=dict(captured)))
    assert first.info["parts"] == ["dense", "bm25"]
    assert len(BUILT_PARTS) == 2
    spec2, captured2 = REGISTRY.resolve("fusion-rel:bm25+dense")
    second = spec2.build(DOCS, BenchContext(embed_model=bow_embed, options=dict(captured2)))
    assert second.info["part_build_seconds"] == {"bm25": 0.0, "dense": 0.0}  # reused
    assert len(BUILT_PARTS) == 2
    # another corpus starts afresh
    spec.build(DOCS[:2], BenchContext(embed_model=bow_embed, options=dict(captured)))
    assert len(BUILT_PARTS) == 2 and corpus_fingerprint(DOCS[:2]) != corpus_fingerprint(DOCS)
    llm_spec, llm_captured = REGISTRY.resolve("fusion-rrf:qcg+bm25")
    with pytest.raises(ValueError, match="fusion-llm"):
        llm_spec.build(DOCS, BenchContext(embed_model=bow_embed, options=dict(llm_captured)))
    with pytest.raises(KeyError, match="unknown method"):
        REGISTRY.resolve("fusion-rrf:nope+bm25")[0].build(
            DOCS, BenchContext(embed_model=bow_embed, options={"mode": "rrf", "parts": "nope+bm25"})
        )


def test_shared_part_names_build_once_for_every_fusion(bow_embed):
    spec, captured = REGISTRY.resolve("shared:bm25")
    assert captured == {"part": "bm25"}
    alone = spec.build(DOCS, BenchContext(embed_model=bow_embed, options=dict(captured)))
    assert alone.info["shared_part"]["method"] == "bm25"
    fspec, fcaptured = REGISTRY.resolve("fusion-rrf:bm25+dense")
    fused = fspec.build(DOCS, BenchContext(embed_model=bow_embed, options=dict(fcaptured)))
    assert fused.info["part_build_seconds"]["bm25"] == 0.0  # built by shared:bm25
    assert fused.info["part_build_seconds"]["dense"] > 0.0
    ranked, _ = alone.retrieve("Marie Curie radioactivity")
    assert ranked[0] == "a"


def test_weights_must_match_parts(bow_embed):
    spec, captured = REGISTRY.resolve("fusion-rel:dense+bm25")
    ctx = BenchContext(embed_model=bow_embed, options={**captured, "fusion_weights": "1,2,3"})
    with pytest.raises(ValueError, match="3 values for 2 parts"):
        spec.build(DOCS, ctx)


def test_runner_reports_fusions_beside_their_parts(musique_slice, bow_embed, monkeypatch):
    monkeypatch.setattr(Settings, "_embed_model", bow_embed)
    methods = ["dense", "bm25", "fusion-rrf:dense+bm25", "fusion-rel:dense+bm25"]
    report = run_benchmark(RunConfig(data=str(musique_slice), methods=methods, show_progress=False))
    rows = report["methods"]
    assert all("error" not in rows[m] for m in methods), rows
    for name in methods[2:]:
        assert rows[name]["recall@10"] is not None
        # fusing keeps what the parts rank highly (on this slice: above both parts' top-5)
        assert rows[name]["recall@10"] >= min(rows["dense"]["recall@5"], rows["bm25"]["recall@5"])
    assert rows["fusion-rel:dense+bm25"]["info"]["part_build_seconds"] == {
        "dense": 0.0,
        "bm25": 0.0,
    }
