"""LP-RAG's config: presets, validation, the spec's chunker, and Python giving what the
runner measures."""

from __future__ import annotations

import json
import re

import pytest
from llama_index.core.schema import Document
from support import ScriptedLLM

from llama_index_graphrag_ext.core.config import ConfigError
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.eval.registry import BenchContext, build_system
from llama_index_graphrag_ext.lprag import ChunkQueryLinkIndex, LLMAtomicChunker, LPRAGConfig
from llama_index_graphrag_ext.lprag.spec import SPEC

PAGES = {
    "Song X": "Song X is a ballad recorded by Ann Lee in 1990. It topped the charts.",
    "Ann Lee": "Ann Lee is a singer born in Oslo. She married Bo Berg in 2001.",
    "Oslo": "Oslo is the capital of Norway. It lies on a fjord.",
    "Bo Berg": "Bo Berg is a painter. He studied in Oslo and Rome.",
    "Green tea": "Green tea is made from unoxidised leaves. It is popular in Japan.",
    "Rome": "Rome is the capital of Italy. Ann Lee sang in Rome in 1995.",
}
DOCS = [Document(id_=t, text=v, metadata={"title": t}) for t, v in PAGES.items()]
QUESTIONS = ["Who recorded Song X?", "Where was the spouse of Ann Lee born?", "tea in Japan"]
#: The measured presets as the runner's old adapter set them (lprag-pseudo-titles).
TITLES = {
    "query_source": "pseudo",
    "bridges": True,
    "knn_edges": False,
    "bridge_mask": True,
    "bridges_per_chunk": 3,
    "hard_negative_fraction": 0.5,
    "epochs": 60,
    "M": 3,
    "ensemble": 3,
    "cosine_prior": "standardized",
    "max_candidates": 4096,
    "long_chunks": "best-window",
}


def test_presets_resolve_validate_and_say_what_they_change():
    paper = LPRAGConfig.preset("paper")
    assert paper == LPRAGConfig() and paper.uses_llm
    assert paper.training.predictor == "ncn" and paper.training.ensemble == 1
    assert paper.queries.n_B == 2 and paper.graph.k == 5 and paper.retrieval.cosine_prior == 0
    assert paper.retrieval.max_candidates is None and paper.indexing_llm.atomic_chunks
    for name in LPRAGConfig.presets:
        config = LPRAGConfig.preset(name)
        assert config.origin == name and LPRAGConfig.model_validate(config.model_dump()) == config
        assert json.dumps(config.describe())
    pseudo = LPRAGConfig.preset("pseudo")
    assert not pseudo.uses_llm and pseudo.training == paper.training
    default = LPRAGConfig.preset("default")
    assert LPRAGConfig.resolve(None) == default and not default.uses_llm
    # The settings the runner's lprag-pseudo-titles used, BM25 fused, long chunks scored by
    # their best run of sentences, and nothing else changed.
    assert default == LPRAGConfig().updated(
        TITLES, atomic_chunks=False, bm25_weight=0.5, long_chunks="best-sentences"
    )
    assert LPRAGConfig.preset("short-training") == default.updated(epochs=30, bm25_weight=0.25)
    table7 = LPRAGConfig.preset("paper-2wiki").training
    assert (table7.layers, table7.lr, table7.hidden, table7.epochs) == (3, 0.0085, 32, 1000)


def test_bad_settings_are_clear_errors():
    with pytest.raises(ConfigError, match="no preset 'pseudo-titles'"):
        LPRAGConfig.resolve("pseudo-titles")
    with pytest.raises(ConfigError, match="no setting 'query_neighbors'"):
        LPRAGConfig.preset("default").updated(query_neighbors=3)
    with pytest.raises(ConfigError, match="predictor"):
        LPRAGConfig.preset("default").updated(predictor="seal")
    with pytest.raises(ConfigError, match="cosine_prior must be a number >= 0 or 'standardized'"):
        LPRAGConfig.preset("default").updated(cosine_prior="std")
    with pytest.raises(ConfigError, match="knn_edges=False needs bridges=True"):
        LPRAGConfig.preset("default").updated(bridges=False)
    with pytest.raises(ConfigError, match=r"max_candidates \(2\) must be at least M \(3\)"):
        LPRAGConfig.preset("default").updated(max_candidates=2)
    # Command-line strings are converted; "none" clears an optional field.
    config = LPRAGConfig.preset("default").updated(
        {"cosine_prior": "1.5", "knn_edges": "true", "max_candidates": "none", "tau": "0.5"}
    )
    assert config.retrieval.cosine_prior == 1.5 and config.graph.knn_edges
    assert config.retrieval.max_candidates is None and config.retrieval.tau == 0.5


def test_the_spec_chunks_atomically_only_with_llm_queries_and_a_capable_llm():
    llm = ScriptedLLM("[x]")
    paper = LPRAGConfig.preset("paper").updated(cache_path="/tmp/x.sqlite", max_attempts=5)
    chunker = SPEC.node_parser(paper, llm)
    assert isinstance(chunker, LLMAtomicChunker) and chunker.llm is llm
    assert (chunker.cache_path, chunker.max_attempts) == ("/tmp/x.sqlite", 5)
    assert SPEC.node_parser(paper.updated(atomic_chunks=False), llm) is None
    assert SPEC.node_parser(LPRAGConfig.preset("pseudo").updated(atomic_chunks=True), llm) is None
    assert SPEC.node_parser(paper, None) is None
    embedded = ScriptedLLM("[x]", model_name="SmolLM2-360M-Instruct")
    assert SPEC.node_parser(paper, embedded) is None


def _runner(name, embed, llm=None):
    ctx = BenchContext(embed_model=embed, llm_factory=lambda: llm, top_k=4)
    system = build_system(name, DOCS, ctx)
    return system, [[(r.node.node_id, r.score) for r in system.retrieve(q)[1]] for q in QUESTIONS]


def _python(nodes, config, embed, llm=None):
    index = ChunkQueryLinkIndex(nodes, config=config, embed_model=embed, llm=llm)
    retriever = index.as_retriever(similarity_top_k=4)
    return index, [[(r.node.node_id, r.score) for r in retriever.retrieve(q)] for q in QUESTIONS]


@pytest.mark.parametrize("preset", ["default", "pseudo"])
def test_python_gets_the_ranking_the_runner_measures(bow_embed, preset):
    name = "lprag" if preset == "default" else f"lprag:{preset}"
    system, runner = _runner(name, bow_embed)
    nodes = PassageParser().get_nodes_from_documents(DOCS)
    index, python = _python(nodes, preset, bow_embed)
    assert python == runner and all(python)
    assert system.info["config"] == preset
    assert system.info["queries"] == index.stats()["queries"] > 0
    if preset != "pseudo":
        assert system.info["bridge_queries"] > 0 and system.info["ensemble"] == 3


def _answer(prompt: str) -> str:
    if "atomic statements" in prompt:
        paragraph = prompt.rsplit("Paragraph:\n", 1)[1].split("\nAnswer:")[0]
        return "\n".join(f"[{s.strip()}.]" for s in paragraph.split(".") if s.strip())
    first = re.search(r"\[Passage 1\] (\w+ \w+)", prompt).group(1)
    return f"[What do we know about {first}?]\n[Who is linked to {first}?]"


def test_the_paper_preset_too(bow_embed):
    runner_llm, python_llm = ScriptedLLM(_answer), ScriptedLLM(_answer)
    system, runner = _runner("lprag:paper/epochs=20", bow_embed, runner_llm)
    nodes = LLMAtomicChunker(llm=python_llm).get_nodes_from_documents(DOCS)
    index, python = _python(
        nodes, LPRAGConfig.preset("paper").updated(epochs=20), bow_embed, python_llm
    )
    assert python == runner and all(python)
    assert len(index) > len(DOCS)  # atomic chunks, not passages
    assert system.info["chunker"] == "LLMAtomicChunker"
    # The chunker's step is in the runner's ledger, as in the index's.
    steps = {r.step: r for ledger in system.steps for r in ledger.records()}
    assert steps["atomic-chunks"].tier == "full-llm" and steps["atomic-chunks"].items == len(DOCS)
    assert {q["origin"] for q in index.queries()} == {"llm"}
    assert runner_llm.call_count == python_llm.call_count


def test_persistence_keeps_the_config(bow_embed, tmp_path):
    nodes = PassageParser().get_nodes_from_documents(DOCS)
    index = ChunkQueryLinkIndex(
        nodes, config="short-training", embed_model=bow_embed, epochs=5, predictor="sage"
    )
    index.persist(tmp_path / "lp")
    loaded = ChunkQueryLinkIndex.load(tmp_path / "lp", embed_model=bow_embed)
    assert loaded.config == index.config and loaded.config.training.predictor == "sage"
    assert loaded.config.origin == index.config.origin
    assert loaded.stats() == index.stats()
    question = QUESTIONS[1]
    assert [(r.node.node_id, r.score) for r in loaded.as_retriever().retrieve(question)] == [
        (r.node.node_id, r.score) for r in index.as_retriever().retrieve(question)
    ]
