"""ChainRAG's config: presets, validation, and Python giving what the runner measures."""

from __future__ import annotations

import json

import pytest
from llama_index.core.schema import Document
from support import ScriptedLLM

from llama_index_graphrag_ext.chainrag import ChainRAGConfig, SentenceGraphIndex
from llama_index_graphrag_ext.chainrag.key_entities import PAPER_BM25_CUT, KeyCut
from llama_index_graphrag_ext.chainrag.spec import SPEC
from llama_index_graphrag_ext.core.config import ConfigError
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.core.text.parallel import available_processes
from llama_index_graphrag_ext.eval.registry import BenchContext, build_system, resolve

DOCS = [
    Document(id_=f"d{i}", text=text, metadata={"title": title})
    for i, (title, text) in enumerate(
        [
            ("Bambi", "Bambi is a 1923 novel by Felix Salten. It follows a roe deer in Austria."),
            ("Felix Salten", "Felix Salten was an Austrian author. He was born in Pest."),
            ("Pest", "Pest is the eastern part of Budapest in Hungary. The Danube divides it."),
            ("Vienna", "Vienna is the capital of Austria. Felix Salten lived in Vienna."),
            ("Danube", "The Danube flows through Vienna and Budapest to the Black Sea."),
            ("Jaws", "Jaws is a 1975 film by Steven Spielberg. It was shot on Martha's Vineyard."),
        ]
    )
]
QUESTIONS = ["Where was the author of Bambi born?", "Which river flows through Budapest?"]
#: What ``default`` changes from the paper's settings (the old runner's values).
DEFAULT_CHANGES = {
    "key_importance": "idf",
    "key_cut": "global",
    "max_df": 20,
    "keep_rarest": True,
    "neighbor_score": "propagate",
    "nlp_processes": None,
    "bm25_weight": 0.5,
}


def test_presets_resolve_and_say_what_they_change():
    paper, default = ChainRAGConfig.preset("paper"), ChainRAGConfig.preset("default")
    assert paper == ChainRAGConfig() and not paper.uses_llm and not default.uses_llm
    changed = {k: v for k, v in default.flat().items() if paper.flat()[k] != v}
    assert changed == DEFAULT_CHANGES
    assert ChainRAGConfig.preset("common-entities") == default.updated(max_df=50)
    assert ChainRAGConfig.resolve(None) == default and default.origin == "default"
    assert default.retrieval.edge_kinds == ("EC", "SS", "SA")
    assert default.retrieval.edge_weights == {"EC": 0.4, "SS": 0.0, "SA": 0.4}
    for name in ChainRAGConfig.presets:
        config = ChainRAGConfig.preset(name)
        assert SPEC.tier(config) == "llm-free" and SPEC.own_engine(config)
        assert json.dumps(config.describe())  # reports and manifests take it as it is
    # The old runner's flag names and `--set` options name the same configs.
    assert resolve("chainrag:common-entities").config == resolve("chainrag/max_df=50").config
    assert resolve("chainrag/follow_ec=false").config.retrieval.edge_kinds == ("SS", "SA")


def test_the_index_builds_what_the_config_says(bow_embed):
    paper = SentenceGraphIndex([], config="paper", embed_model=bow_embed)
    assert paper.key_cut == PAPER_BM25_CUT and paper.nlp_processes == 1
    default = SentenceGraphIndex([], embed_model=bow_embed)
    assert default.key_cut == KeyCut(importance="idf", cut="global", max_df=20, keep_rarest=True)
    assert default.nlp_processes == available_processes()  # None: the machine's CPUs


def test_bad_settings_are_clear_errors(bow_embed):
    with pytest.raises(ConfigError, match="no preset 'retriever'"):
        ChainRAGConfig.resolve("retriever")
    with pytest.raises(ConfigError, match="no setting 'seed_k'"):
        ChainRAGConfig.preset("default").updated(seed_k=2)
    with pytest.raises(ConfigError, match="integration"):
        ChainRAGConfig.preset("default").updated(integration="both")
    with pytest.raises(ConfigError, match="alpha"):
        ChainRAGConfig.preset("default").updated(alpha="1.5")
    # Command-line strings are converted; "none" clears an optional field.
    config = ChainRAGConfig.preset("default").updated(
        {"max_df": "none", "follow_ec": "false", "hops": "2", "timeout": "none"}
    )
    assert (config.graph.max_df, config.retrieval.hops, config.llm.timeout) == (None, 2, None)
    assert config.retrieval.edge_kinds == ("SS", "SA")
    # A retriever or an engine cannot change the graph its index built.
    index = SentenceGraphIndex([], embed_model=bow_embed)
    with pytest.raises(ConfigError, match="window: a setting of the index"):
        index.as_retriever(window=1)
    with pytest.raises(ConfigError, match="m: a setting of the index"):
        index.as_query_engine(llm=ScriptedLLM(default="x"), m=5)


def _runner_ranking(name, embed, llm=None):
    ctx = BenchContext(embed_model=embed, llm_factory=lambda: llm, top_k=4)
    system = build_system(name, DOCS, ctx)
    return [system.retrieve(q)[0] for q in QUESTIONS]


def _python_ranking(config, embed, **fields):
    nodes = PassageParser().get_nodes_from_documents(DOCS)
    index = SentenceGraphIndex(nodes, config=config, embed_model=embed, **fields)
    retriever = index.as_retriever(similarity_top_k=4)
    return [[r.node.ref_doc_id for r in retriever.retrieve(q)] for q in QUESTIONS]


@pytest.mark.parametrize(
    ("name", "config", "fields"),
    [
        ("chainrag", "default", {}),
        ("chainrag:common-entities", "common-entities", {}),
        ("chainrag:paper", "paper", {}),
        ("chainrag/follow_ec=false", "default", {"follow_ec": False}),
    ],
)
def test_python_gets_the_ranking_the_runner_measures(bow_embed, name, config, fields):
    python = _python_ranking(config, bow_embed, **fields)
    assert python == _runner_ranking(name, bow_embed) and all(python)


def test_the_runner_answers_with_the_engine_when_it_has_an_llm(bow_embed):
    llm = ScriptedLLM({"JSON:": '["Who wrote Bambi?"]', "Reply yes or no": "yes"}, default="Pest")
    ctx = BenchContext(embed_model=bow_embed, llm_factory=lambda: llm, top_k=4)
    system = build_system("chainrag", DOCS, ctx)
    answer, passages = system.answerer(QUESTIONS[0])
    assert answer == "Pest" and passages
    decomposed = [steps.record("decompose") for steps in system.steps]
    assert [r.items for r in decomposed if r is not None] == [1]  # the engine's ledger
    # The retriever the runner scores is the LLM-free one, whatever the LLM.
    assert [system.retrieve(q)[0] for q in QUESTIONS] == _python_ranking("default", bow_embed)


def test_persistence_keeps_the_config(bow_embed, tmp_path):
    nodes = PassageParser().get_nodes_from_documents(DOCS)
    index = SentenceGraphIndex(nodes, config="common-entities", embed_model=bow_embed, k=2)
    index.persist(tmp_path / "idx")
    loaded = SentenceGraphIndex.load(tmp_path / "idx", embed_model=bow_embed)
    assert loaded.config == index.config and loaded.config.retrieval.k == 2
    assert loaded.config.origin == "common-entities + k=2"
    assert loaded.key_cut == index.key_cut
    for q in QUESTIONS:
        assert [r.node.ref_doc_id for r in loaded.as_retriever().retrieve(q)] == [
            r.node.ref_doc_id for r in index.as_retriever().retrieve(q)
        ]
