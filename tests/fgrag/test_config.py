"""FG-RAG's config: presets, validation, Python giving what the runner measures, persistence."""

from __future__ import annotations

import json

import pytest
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import Document
from support import ScriptedLLM

from llama_index_graphrag_ext.core.config import ConfigError
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.eval.registry import BenchContext, build_system
from llama_index_graphrag_ext.fgrag import (
    CooccurrenceExtractor,
    FGRAGConfig,
    FGRAGExtractor,
    FGRAGIndex,
    FGRAGQueryEngine,
)
from llama_index_graphrag_ext.fgrag.spec import SPEC

DOCS = [
    Document(id_=f"d{i}", text=text, metadata={"title": title})
    for i, (title, text) in enumerate(
        [
            ("Curie", "Marie Curie studied radioactivity in Paris with Pierre Curie."),
            ("Sorbonne", "Pierre Curie taught physics at the Sorbonne in Paris."),
            ("Nobel", "Marie Curie won the Nobel Prize in Physics and in Chemistry."),
            ("Nile", "The Nile flows through Egypt and Sudan into the Mediterranean."),
            ("Cairo", "Cairo lies on the Nile. Egypt's capital is Cairo."),
            ("Amazon", "The Amazon rainforest covers much of Brazil and Peru."),
        ]
    )
]
QUESTIONS = ["Where did Pierre Curie teach physics?", "Which river flows through Egypt?"]


def records(prompt: str) -> str:
    """The paper's extraction records: each capitalised name of the chunk, related in a chain."""
    if "Answer with one word" in prompt:
        return "NO"
    text = prompt.rsplit("Text:", 1)[-1]
    names = list(dict.fromkeys(w.strip(".,'s") for w in text.split() if w[:1].isupper()))[:4]
    out = [f'("entity"<|>{n}<|>thing<|>{n} is named in: {text.strip()[:80]})' for n in names]
    pairs = zip(names, names[1:], strict=False)
    out += [f'("relationship"<|>{a}<|>{b}<|>{a} and {b}<|>co)' for a, b in pairs]
    return "##".join(out) + "<|COMPLETE|>"


def test_presets_resolve_and_say_what_they_change():
    paper, default = FGRAGConfig.preset("paper"), FGRAGConfig.preset("default")
    assert paper == FGRAGConfig() and paper.uses_llm and not default.uses_llm
    assert default == paper.updated(
        extractor="cooccurrence", fill="similarity", names_first=True, bm25_weight=0.5
    )
    assert FGRAGConfig.preset("light-bm25") == default.updated(bm25_weight=0.25)
    assert FGRAGConfig.resolve(None) == default and default.origin == "default"
    # The authors' settings where the paper is silent.
    expansion = paper.expansion
    assert (expansion.top_n, expansion.strong_top_n, expansion.description_budget) == (20, 20, 75)
    assert (expansion.max_query_entities, paper.answer.max_questions) == (9, 10)
    assert (paper.graph.max_gleanings, paper.graph.max_descriptions_per_entity) == (1, 50)
    assert json.dumps(default.describe())  # reports and manifests take it as it is
    assert SPEC.tier(paper) == "llm" and SPEC.tier(default) == "llm-free"
    assert SPEC.own_engine(paper) and not SPEC.own_engine(default)


def test_bad_settings_are_clear_errors(bow_embed):
    with pytest.raises(ConfigError, match="no preset 'llm'"):
        FGRAGConfig.resolve("llm")
    with pytest.raises(ConfigError, match="no setting 'include_query_as_entity'"):
        FGRAGConfig.preset("default").updated(include_query_as_entity=False)
    with pytest.raises(ConfigError, match="fill"):
        FGRAGConfig.preset("default").updated(fill="dense")
    with pytest.raises(ConfigError, match="top_n"):
        FGRAGConfig.preset("default").updated(top_n=0)
    # Command-line strings are converted; "none" clears an optional field.
    config = FGRAGConfig.preset("default").updated(
        {"max_depth": "2", "use_strong": "false", "per_entity": "none"}
    )
    assert (config.expansion.max_depth, config.expansion.use_strong) == (2, False)
    assert config.expansion.per_entity is None
    # A retriever cannot change the graph its index built.
    index = FGRAGIndex(nodes=[], embed_model=bow_embed)
    with pytest.raises(ConfigError, match="max_descriptions_per_entity: a setting of the index"):
        index.as_retriever(max_descriptions_per_entity=3)
    with pytest.raises(TypeError, match="unknown settings"):
        FGRAGIndex(nodes=[], embed_model=bow_embed, llm_options={})


def _runner_ranking(name, embed, llm=None):
    ctx = BenchContext(embed_model=embed, llm_factory=lambda: llm, top_k=4)
    system = build_system(name, DOCS, ctx)
    out = []
    for q in QUESTIONS:
        results = system.retrieve(q)[1]
        out.append([(r.node.ref_doc_id, round(r.score, 6)) for r in results])
    return out, system


def _python_ranking(config, embed, llm=None):
    nodes = PassageParser().get_nodes_from_documents(DOCS)
    index = FGRAGIndex(nodes, config=config, embed_model=embed, llm=llm)
    retriever = index.as_retriever(similarity_top_k=4)
    ranking = [
        [(r.node.ref_doc_id, round(r.score, 6)) for r in retriever.retrieve(q)] for q in QUESTIONS
    ]
    return ranking, index


def test_python_gets_the_ranking_the_runner_measures(bow_embed):
    python, index = _python_ranking("default", bow_embed)
    runner, system = _runner_ranking("fgrag", bow_embed)
    assert python == runner and all(len(r) == 4 for r in python)
    assert index.extractors_used == system.index.extractors_used == ["CooccurrenceExtractor"]
    assert system.answerer is None  # the LLM-free graph answers by retrieve-then-synthesize
    assert system.info["config"] == "default" and system.info["entities"] > 0
    assert isinstance(index.as_query_engine(llm=ScriptedLLM("x")), RetrieverQueryEngine)


def test_the_paper_preset_too(bow_embed):
    python, index = _python_ranking("paper", bow_embed, ScriptedLLM(records))
    runner, system = _runner_ranking("fgrag:paper", bow_embed, ScriptedLLM(records))
    assert python == runner and all(python)
    assert index.extractors_used == system.index.extractors_used == ["FGRAGExtractor"]
    assert system.info["extraction"]["llm_chunks"] == len(DOCS)
    assert system.answerer is not None  # the paper's map-reduce answers in the runner
    assert isinstance(index.as_query_engine(), FGRAGQueryEngine)


def test_persistence_keeps_the_config(bow_embed, tmp_path):
    nodes = PassageParser().get_nodes_from_documents(DOCS)
    index = FGRAGIndex(nodes, config="default", embed_model=bow_embed, top_n=5, evidence_weight=0.5)
    index.persist(tmp_path / "idx")
    loaded = FGRAGIndex.load(tmp_path / "idx", embed_model=bow_embed)
    assert loaded.config == index.config and loaded.config.expansion.top_n == 5
    assert loaded.config.origin == index.config.origin == "default + top_n=5, evidence_weight=0.5"
    question = QUESTIONS[0]
    assert [r.node.node_id for r in loaded.as_retriever().retrieve(question)] == [
        r.node.node_id for r in index.as_retriever().retrieve(question)
    ]


def test_given_extractors_say_which_graph_the_config_describes(bow_embed):
    nodes = PassageParser().get_nodes_from_documents(DOCS[:2])
    rule = CooccurrenceExtractor(sentence_splitter="rule", include_noun_chunks=True)
    index = FGRAGIndex(nodes, config="paper", kg_extractors=[rule], embed_model=bow_embed)
    graph = index.config.graph
    assert (graph.extractor, graph.sentence_splitter, graph.include_noun_chunks) == (
        "cooccurrence",
        "rule",
        True,
    )
    assert not index.config.uses_llm
    llm = FGRAGExtractor(llm=ScriptedLLM(records), max_gleanings=0)
    index = FGRAGIndex(nodes, kg_extractors=[llm], embed_model=bow_embed)
    assert index.config.uses_llm and index.config.graph.max_gleanings == 0
