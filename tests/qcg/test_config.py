"""QCG-RAG's config: presets, validation, and Python giving what the runner measures."""

from __future__ import annotations

import json

import pytest
from llama_index.core.schema import Document
from support import ScriptedLLM

from llama_index_graphrag_ext.core.config import ConfigError
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.eval.registry import BenchContext, build_system
from llama_index_graphrag_ext.qcg import QCGConfig, QueryCentricGraphIndex

DOCS = [
    Document(id_=f"d{i}", text=text, metadata={"title": title})
    for i, (title, text) in enumerate(
        [
            ("Paris", "Paris is the capital of France. The Eiffel Tower stands in Paris."),
            ("Rome", "Rome is the capital of Italy. The Colosseum stands in Rome."),
            ("Eiffel", "Gustave Eiffel built the tower. He also designed a bridge in Porto."),
            ("Porto", "Porto lies on the Douro river. Its bridges are famous."),
            ("Douro", "The Douro flows from Spain through Portugal to the Atlantic."),
        ]
    )
]
QUESTIONS = ["Who built the tower in the capital of France?", "Which river flows through Porto?"]


def test_presets_resolve_and_say_what_they_change():
    paper, default = QCGConfig.preset("paper"), QCGConfig.preset("default")
    assert paper == QCGConfig() and paper.uses_llm and not default.uses_llm
    assert QCGConfig.preset("paper-lihuaworld").flat() | {"k": 3, "n": 15, "gamma": 1.0} == (
        paper.flat()
    )
    assert QCGConfig.preset("more-nodes") == default.updated(n=30, bm25_weight=0.0)
    assert QCGConfig.resolve(None) == default and default.origin == "default"
    assert json.dumps(default.describe())  # reports and manifests take it as it is


def test_bad_settings_are_clear_errors():
    with pytest.raises(ConfigError, match="no preset 'sentences'"):
        QCGConfig.resolve("sentences")
    with pytest.raises(ConfigError, match="no setting 'hops'"):
        QCGConfig.preset("default").updated(hops=2)
    with pytest.raises(ConfigError, match="gamma"):
        QCGConfig.preset("default").updated(gamma="3")
    # Command-line strings are converted; "none" clears an optional field.
    config = QCGConfig.preset("default").updated({"h": "2", "fill": "false", "timeout": "none"})
    assert (config.retrieval.h, config.retrieval.fill, config.llm.timeout) == (2, False, None)


def _runner_ranking(name, embed, llm=None):
    ctx = BenchContext(embed_model=embed, llm_factory=lambda: llm, top_k=4)
    system = build_system(name, DOCS, ctx)
    return [system.retrieve(q)[0] for q in QUESTIONS]


def _python_ranking(config, embed, llm=None):
    nodes = PassageParser().get_nodes_from_documents(DOCS)
    index = QueryCentricGraphIndex(nodes, config=config, embed_model=embed, llm=llm)
    retriever = index.as_retriever(similarity_top_k=4)
    return [[r.node.ref_doc_id for r in retriever.retrieve(q)] for q in QUESTIONS]


@pytest.mark.parametrize("preset", ["default", "more-nodes"])
def test_python_gets_the_ranking_the_runner_measures(bow_embed, preset):
    name = "qcg" if preset == "default" else f"qcg:{preset}"
    assert _python_ranking(preset, bow_embed) == _runner_ranking(name, bow_embed)


def test_the_paper_preset_too(bow_embed):
    def pairs(prompt: str) -> str:
        words = [w for w in prompt.split() if w.istitle()][-3:]
        return json.dumps([{"query": f"What about {w}?", "answer": w} for w in words])

    python = _python_ranking("paper", bow_embed, ScriptedLLM(pairs))
    assert python == _runner_ranking("qcg:paper", bow_embed, ScriptedLLM(pairs))
    assert any(python)
