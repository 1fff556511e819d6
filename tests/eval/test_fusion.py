"""Fusions in the benchmark runner: names, shared parts, and a real run."""

from __future__ import annotations

import pytest
from llama_index.core import Document, Settings

from llama_index_graphrag_ext.core.config import ConfigError
from llama_index_graphrag_ext.eval.fusion import (
    ALIASES,
    BUILT_PARTS,
    corpus_fingerprint,
    part_names,
)
from llama_index_graphrag_ext.eval.registry import BenchContext, build_system, resolve
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
    assert resolve("fusion-rrf:qcg+qcg:more-nodes+bm25").tier == "llm-free"
    assert part_names("fusion-rrf:qcg+qcg:more-nodes+bm25") == ["qcg", "qcg:more-nodes", "bm25"]
    assert resolve("fusion-llm-rel:qcg:paper+bm25").tier == "llm"
    for alias in ALIASES:
        assert resolve(alias).tier == "llm-free"
    assert part_names("fusion-rrf: dense + bm25") == ["dense", "bm25"]
    for bad, message in (
        ("fusion-rrf:dense", "two or more"),
        ("fusion-rrf:bm25+bm25", "repeat"),
        ("fusion-xyz:dense+bm25", "unknown fusion mode"),
        ("fusion-rrf:qcg:paper+bm25", "fusion-llm"),
        ("fusion-rrf:nope+bm25", "unknown method"),
    ):
        with pytest.raises(ConfigError, match=message):
            resolve(bad)


def test_parts_are_built_once_per_corpus(bow_embed):
    first = build_system("fusion-rrf:dense+bm25", DOCS, BenchContext(embed_model=bow_embed))
    assert first.info["parts"] == ["dense", "bm25"] and len(BUILT_PARTS) == 2
    second = build_system("fusion-rel:bm25+dense", DOCS, BenchContext(embed_model=bow_embed))
    assert second.info["part_build_seconds"] == {"bm25": 0.0, "dense": 0.0}  # reused
    assert len(BUILT_PARTS) == 2
    # another corpus starts afresh
    build_system("fusion-rrf:dense+bm25", DOCS[:2], BenchContext(embed_model=bow_embed))
    assert len(BUILT_PARTS) == 2 and corpus_fingerprint(DOCS[:2]) != corpus_fingerprint(DOCS)


def test_shared_part_names_build_once_for_every_fusion(bow_embed):
    alone = build_system("shared:bm25", DOCS, BenchContext(embed_model=bow_embed))
    assert alone.info["shared_part"]["method"] == "bm25"
    fused = build_system("fusion-rrf:bm25+dense", DOCS, BenchContext(embed_model=bow_embed))
    assert fused.info["part_build_seconds"]["bm25"] == 0.0  # built by shared:bm25
    assert fused.info["part_build_seconds"]["dense"] > 0.0
    ranked, _ = alone.retrieve("Marie Curie radioactivity")
    assert ranked[0] == "a"


def test_weights_must_match_parts(bow_embed):
    ctx = BenchContext(embed_model=bow_embed, options={"fusion_weights": "1,2,3"})
    with pytest.raises(ConfigError, match="3 values for 2 parts"):
        build_system("fusion-rel:dense+bm25", DOCS, ctx)


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
