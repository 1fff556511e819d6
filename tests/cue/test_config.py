"""CUE-RAG's config: presets, validation, and Python giving what the runner measures."""

from __future__ import annotations

import json
import re

import pytest
from llama_index.core.schema import Document
from support import ScriptedLLM

from llama_index_graphrag_ext.core.config import ConfigError
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.cue import CUEConfig, KnowledgeUnitExtractor, MultiPartiteIndex
from llama_index_graphrag_ext.eval.registry import BenchContext, build_system, resolve

DOCS = [
    Document(id_=f"d{i}", text=f"{title}\n{text}", metadata={"title": title})
    for i, (title, text) in enumerate(
        [
            ("Green", "Green is an album by Steve Hillage. It was released in 1978."),
            ("Steve Hillage", "Steve Hillage is an English guitarist. He was born in Chingford."),
            ("Chingford", "Chingford is a town in London. It lies near Epping Forest."),
            ("Paris", "Paris is the capital of France. The Seine flows through Paris."),
            ("Epping Forest", "Epping Forest is an ancient woodland. It straddles Essex."),
        ]
    )
]
QUESTIONS = ["Where was the guitarist of Green born?", "Which river flows through Paris?"]


def test_presets_resolve_and_say_what_they_change():
    paper, default = CUEConfig.preset("paper"), CUEConfig.preset("default")
    assert paper == CUEConfig() and paper.uses_llm and not default.uses_llm
    assert (paper.graph.alpha, paper.retrieval.query_entities) == (1.0, "llm")
    params = paper.retrieval
    assert (params.K, params.D, params.M, params.N) == (3, 3, 5, 5)
    assert (params.lexical_weight, params.path_weight, params.long_chunks) == (0, 0, "pooled")
    assert CUEConfig.preset("path-weighted") == default.updated(M=8, path_weight=0.5)
    assert CUEConfig.resolve(None) == default and default.origin == "default"
    # alpha > 0 or the LLM's query entities make the tier llm
    assert default.updated(alpha=0.5).uses_llm and default.updated(query_entities="llm").uses_llm
    assert not default.updated(query_entities="auto").uses_llm
    assert json.dumps(default.describe())  # reports and manifests take it as it is


def test_old_runner_names_resolve_to_their_settings():
    default = CUEConfig.preset("default")
    assert resolve("cue").config == default
    assert resolve("cue/use_sa=false").config == default.updated(use_sa=False)
    old_paper = resolve("cue:paper/alpha=0/query_entities=spacy/title_entity=true/fill=dense")
    assert not old_paper.config.uses_llm and old_paper.tier == "llm-free"
    assert resolve("cue:paper").tier == "llm"
    paper = resolve("cue:paper/use_qu=false").config.retrieval
    assert (paper.M, paper.path_weight, paper.lexical_weight, paper.use_qu) == (5, 0, 0, False)
    # --set options go over the preset, the name's own fields over both.
    tuned = resolve("cue:path-weighted", {"path_weight": "0.75"}).config.retrieval
    assert (tuned.M, tuned.path_weight) == (8, 0.75)


def test_bad_settings_are_clear_errors(bow_embed):
    with pytest.raises(ConfigError, match="no preset 'tuned-musique'"):
        CUEConfig.resolve("tuned-musique")
    with pytest.raises(ConfigError, match="no setting 'beam'"):
        CUEConfig.preset("default").updated(beam=8)
    with pytest.raises(ConfigError, match="alpha"):
        CUEConfig.preset("default").updated(alpha=1.5)
    with pytest.raises(ConfigError, match="query_entities"):
        CUEConfig.preset("default").updated(query_entities="magic")
    # Command-line strings are converted; "none" clears an optional field.
    config = CUEConfig.preset("default").updated({"M": "8", "use_qu": "false", "timeout": "none"})
    assert (config.retrieval.M, config.retrieval.use_qu, config.llm.timeout) == (8, False, None)
    index = MultiPartiteIndex(PassageParser().get_nodes_from_documents(DOCS), embed_model=bow_embed)
    assert index.config == CUEConfig.preset("default")  # what Python gets with no config=
    assert index.as_retriever().params == CUEConfig.preset("default").retrieval
    # A retriever changes how it searches, never what the index built.
    with pytest.raises(ConfigError, match="alpha: a setting of the index"):
        index.as_retriever(alpha=1.0)
    with pytest.raises(TypeError, match="unknown settings"):
        MultiPartiteIndex([], embed_model=bow_embed, beam=8)


def _runner_ranking(name, embed, llm=None):
    ctx = BenchContext(embed_model=embed, llm_factory=lambda: llm, top_k=4)
    system = build_system(name, DOCS, ctx)
    return [system.retrieve(q)[0] for q in QUESTIONS], system


def _python_ranking(config, embed, llm=None):
    nodes = PassageParser().get_nodes_from_documents(DOCS)
    index = MultiPartiteIndex(nodes, config=config, embed_model=embed, llm=llm)
    retriever = index.as_retriever(similarity_top_k=4)
    return [[r.node.ref_doc_id for r in retriever.retrieve(q)] for q in QUESTIONS], index


@pytest.mark.parametrize("preset", ["default", "path-weighted"])
def test_python_gets_the_ranking_the_runner_measures(minilm, preset):
    name = "cue" if preset == "default" else f"cue:{preset}"
    python, index = _python_ranking(preset, minilm)
    runner, system = _runner_ranking(name, minilm)
    assert python == runner and all(len(r) == 4 for r in python)
    assert index.config == system.index.config and system.info["config"] == preset
    assert system.info["units"] == index.stats()["units"]
    assert index.build_stats["late_spans_alone"] == 0  # one-pass vectors


def _scripted(prompt: str) -> str:
    """Units: the passage's sentences; query entities: the question's capitalised words."""
    if "Passage:" in prompt:
        passage = prompt.rsplit("Passage:", 1)[1].split("Answer:")[0].strip()
        sentences = [s for s in re.split(r"(?<=\.)\s+", passage.split("\n", 1)[-1]) if s]
        return json.dumps({"units": sentences})
    question = prompt.rsplit("Question:", 1)[1]
    return json.dumps({"entities": [w.strip("?") for w in question.split()[1:] if w.istitle()]})


def test_the_paper_preset_too(bow_embed):
    python, index = _python_ranking("paper", bow_embed, ScriptedLLM(_scripted))
    runner, system = _runner_ranking("cue:paper", bow_embed, ScriptedLLM(_scripted))
    assert python == runner and any(python)
    stats = index.stats()["extraction"]
    assert stats["chunks_llm"] == len(DOCS) and stats["units_llm"] == stats["units"]
    [record] = system.retriever.llm_steps.records()
    assert (record.step, record.tier, record.items) == ("query-entities", "full-llm", 2)


def test_query_entities_auto_keeps_the_rule_of_earlier_releases(bow_embed, caplog):
    nodes = PassageParser().get_nodes_from_documents(DOCS)
    llm = ScriptedLLM(_scripted)
    free = MultiPartiteIndex(nodes, embed_model=bow_embed, llm=llm, query_entities="auto")
    retriever = free.as_retriever()
    assert retriever.query_entities == "spacy"  # alpha = 0: spaCy's, as the old runner
    assert retriever.llm_steps.record("query-entities").tier == "llm-free"
    assert llm.call_count == 0
    with_llm = MultiPartiteIndex(
        nodes, embed_model=bow_embed, llm=llm, alpha=1.0, query_entities="auto"
    )
    assert with_llm.as_retriever().query_entities == "llm"
    # An LLM that cannot write JSON (the embedded SmolLM2): "auto" takes spaCy's quietly,
    # the paper's "llm" too, with a warning saying why.
    smol = ScriptedLLM(_scripted, model_name="SmolLM2-360M-Instruct")
    quiet = with_llm.as_retriever(llm=smol)
    assert quiet.query_entities == "spacy" and "SmolLM2" not in caplog.text
    loud = with_llm.as_retriever(llm=smol, query_entities="llm")
    assert "cannot write JSON" in caplog.text and "spaCy entities" in caplog.text
    found = loud.retrieve(QUESTIONS[0])[0].node.metadata["evidence"]["query_entities"]
    assert "Green" in found and smol.call_count == 0


def test_an_extractor_object_s_settings_become_the_config(bow_embed, tmp_path):
    extractor = KnowledgeUnitExtractor(alpha=0.0, sentence_splitter="model", title_entity=False)
    nodes = PassageParser().get_nodes_from_documents(DOCS)
    index = MultiPartiteIndex(nodes, embed_model=bow_embed, extractor=extractor)
    assert index.extractor is extractor
    assert index.config.graph.sentence_splitter == "model" and not index.config.graph.title_entity
    assert "sentence_splitter=model" in index.config.origin


def test_persistence_keeps_the_config(bow_embed, tmp_path):
    nodes = PassageParser().get_nodes_from_documents(DOCS)
    index = MultiPartiteIndex(nodes, config="path-weighted", embed_model=bow_embed, D=2)
    index.persist(tmp_path / "cue")
    loaded = MultiPartiteIndex.load(tmp_path / "cue", embed_model=bow_embed)
    assert loaded.config == index.config and loaded.config.origin == "path-weighted + D=2"
    assert loaded.as_retriever().params == index.as_retriever().params
    # The extractor is rebuilt from the stored config: inserts make units as before.
    assert loaded.extractor.model_dump() == index.extractor.model_dump()
