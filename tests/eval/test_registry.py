"""Run names through the specs: the grammar, presets, fields, ``--set`` checks, ``--list``."""

from __future__ import annotations

import pytest
from llama_index.core.schema import Document
from support import BagOfWordsEmbedding

from llama_index_graphrag_ext.core.config import ConfigError
from llama_index_graphrag_ext.core.spec import parse_method_name
from llama_index_graphrag_ext.eval.registry import (
    BenchContext,
    build_system,
    check_options,
    describe_methods,
    resolve,
)
from llama_index_graphrag_ext.specs import SPECS


def test_the_name_grammar():
    name = parse_method_name("qcg:more-nodes/gamma=1.5/h=1")
    assert (name.method, name.preset, name.overrides) == (
        "qcg",
        "more-nodes",
        {"gamma": "1.5", "h": "1"},
    )
    assert parse_method_name("dense").preset is None
    with pytest.raises(ConfigError, match="FIELD=VALUE"):
        parse_method_name("qcg/gamma")


def test_names_select_preset_then_options_then_the_name_s_own_fields():
    resolved = resolve("qcg:more-nodes/gamma=1.5", {"gamma": "1.2", "h": "1", "k1": "2"})
    config = resolved.config
    assert (config.retrieval.n, config.retrieval.gamma, config.retrieval.h) == (30, 1.5, 1)
    assert resolved.tier == "llm-free" and resolve("qcg:paper").tier == "llm"
    assert config.origin == "more-nodes + gamma=1.2, h=1 + gamma=1.5"


def test_unknown_names_presets_fields_and_values_fail_before_anything_is_built():
    for name, message in (
        ("qcg-sentences", r"now qcg"),
        ("nope", "unknown method"),
        ("qcg:nope", "no preset 'nope'"),
        ("qcg/gama=1", "no setting 'gama'"),
        ("qcg/h=x", "valid integer"),
    ):
        with pytest.raises(ConfigError, match=message):
            resolve(name)
    check_options(["qcg", "bm25"], {"gamma": "1", "k1": "1.2"})
    with pytest.raises(ConfigError, match="--set gama"):
        check_options(["qcg", "bm25"], {"gama": "1"})


def test_every_spec_lists_its_presets_and_settings():
    text = describe_methods()
    for spec in SPECS.values():
        assert f"{spec.name}:default" in text
        for preset in spec.config.presets:
            assert f"{spec.name}:{preset}" in text
        spec.config.resolve()  # every default preset validates
    assert "(?P<" not in text


def test_reference_methods_build_and_rank(bow_embed, musique_slice):
    from llama_index_graphrag_ext.eval.data import load_benchmark

    bench = load_benchmark(musique_slice)
    for name in ("dense", "bm25", "li-hybrid"):
        assert resolve(name).tier == "llm-free"
        system = build_system(name, bench.documents(), BenchContext(embed_model=bow_embed, top_k=3))
        ids, _ = system.retrieve(bench.questions[0].question)
        assert len(ids) == 3 and set(ids) <= {p.id for p in bench.passages}
        assert system.info["config"] == "default"


def test_dense_sentences_asks_for_several_sentences_per_passage():
    filler = "The printers need toner. Parking closes early on Friday. Lunch was noodles."
    documents = [
        Document(id_="log", text=f"{filler} Anna repainted the Skagen lighthouse red. {filler}"),
        Document(id_="brochure", text="Lighthouses guide ships. A lighthouse has a lamp."),
        Document(id_="other", text="The bakery sells rye bread and cinnamon buns."),
    ]
    ctx = BenchContext(embed_model=BagOfWordsEmbedding(), top_k=2)
    system = build_system("dense:sentences", documents, ctx)
    assert system.info["vectors"] == 10 and system.retriever.similarity_top_k == 10
    ranked, _ = system.retrieve("Who repainted the Skagen lighthouse?")
    assert ranked[0] == "log" and len(ranked) >= ctx.top_k  # k passages for the runner


@pytest.mark.parametrize("name", ["dense", "dense:sentences", "bm25", "li-hybrid"])
def test_python_gets_the_ranking_the_runner_measures_for_the_references(name, musique_slice):
    from llama_index_graphrag_ext.core.nodes import PassageParser
    from llama_index_graphrag_ext.eval.data import load_benchmark

    bench = load_benchmark(musique_slice)
    embed = BagOfWordsEmbedding()
    system = build_system(name, bench.documents(), BenchContext(embed_model=embed, top_k=5))
    spec, preset = SPECS[name.partition(":")[0]], name.partition(":")[2] or "default"
    nodes = PassageParser().get_nodes_from_documents(bench.documents())
    retriever = spec.index_class()(nodes, config=preset, embed_model=embed).as_retriever(
        similarity_top_k=5
    )
    for q in bench.questions:
        python = [r.node.ref_doc_id for r in retriever.retrieve(q.question)]
        assert python == [r.node.ref_doc_id for r in system.retrieve(q.question)[1]]
