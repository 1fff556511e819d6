"""Extraction parsing, gleaning, fallback and the LLM-free co-occurrence graph."""

from __future__ import annotations

import pytest
from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY
from llama_index.core.schema import TextNode
from support import ScriptedLLM

from llama_index_graphrag_ext.core.llm import LLMFallbackError, LLMSteps, is_embedded
from llama_index_graphrag_ext.fgrag.config import FGRAGConfig
from llama_index_graphrag_ext.fgrag.cooccurrence import CooccurrenceExtractor
from llama_index_graphrag_ext.fgrag.extract import FGRAGExtractor, make_extractor
from llama_index_graphrag_ext.fgrag.records import extraction_to_graph, parse_extraction

GOOD = (
    '("entity"<|>Marie Curie<|>person<|>A physicist who studied radioactivity.)##\n'
    '("entity"<|>Paris<|>place<|>City where Curie worked.)##\n'
    '("relationship"<|>Marie Curie<|>Paris<|>Curie worked in Paris.<|>work, location)\n'
    "<|DONE|>"
)


def test_parse_good_records() -> None:
    out = parse_extraction(GOOD)
    assert [e.name for e in out.entities] == ["Marie Curie", "Paris"]
    assert out.entities[0].type == "person"
    assert out.entities[0].description == "A physicist who studied radioactivity."
    rel = out.relations[0]
    assert (rel.source, rel.target) == ("Marie Curie", "Paris")
    assert rel.keywords == ("work", "location")
    assert out.malformed == 0


def test_parse_tolerates_noise_and_counts_malformed() -> None:
    text = (
        "Sure! Here are the records:\n```\n"
        "(entity<|>Ada Lovelace<|>A mathematician (and writer).)"
        '("entity"<|>Broken)\n'
        '("relationship"<|>Ada Lovelace<|>Babbage)\n'
        "```"
    )
    out = parse_extraction(text)
    assert [e.name for e in out.entities] == ["Ada Lovelace"]
    assert out.entities[0].type == ""  # three-field entity: no type
    assert out.entities[0].description.startswith("A mathematician (and writer")
    assert out.relations == []
    assert out.malformed == 2


def test_parse_empty() -> None:
    for text in ("", "   ", "I cannot help with that.", None):
        out = parse_extraction(text)  # type: ignore[arg-type]
        assert out.entities == [] and out.relations == [] and out.malformed == 0


def test_same_name_entities_merge_and_dangling_relations_drop() -> None:
    text = GOOD + (
        '\n("entity"<|>marie curie<|>person<|>Won two Nobel prizes.)'
        '\n("relationship"<|>Marie Curie<|>Warsaw<|>Born in Warsaw.<|>birth)'
    )
    entities, relations, dropped = extraction_to_graph(parse_extraction(text))
    by_name = {e.name: e for e in entities}
    assert set(by_name) == {"marie curie", "paris"}
    assert by_name["marie curie"].properties["descriptions"] == [
        "A physicist who studied radioactivity.",
        "Won two Nobel prizes.",
    ]
    assert by_name["marie curie"].properties["display_name"] == "Marie Curie"
    assert len(relations) == 1 and dropped == 1  # Warsaw was never extracted as an entity


def test_llm_extractor_gleans_once_on_yes() -> None:
    more = '("entity"<|>Sorbonne<|>organisation<|>University in Paris.)<|DONE|>'
    llm = ScriptedLLM(
        {
            "Answer with one word": "YES",
            "Write only the missing": more,
            "Task: read the text": GOOD,
        }
    )
    extractor = FGRAGExtractor(llm=llm, max_gleanings=1)
    node = extractor([TextNode(text="Marie Curie worked in Paris at the Sorbonne.")])[0]
    names = {n.name for n in node.metadata[KG_NODES_KEY]}
    assert names == {"marie curie", "paris", "sorbonne"}
    assert len(node.metadata[KG_RELATIONS_KEY]) == 1
    assert llm.call_count == 3
    assert extractor.stats["gleaning_rounds"] == 1
    assert extractor.stats["llm_chunks"] == 1


def test_llm_extractor_stops_on_no_and_falls_back_on_garbage() -> None:
    llm = ScriptedLLM({"Answer with one word": "NO", "Task: read the text": ["", GOOD]})
    extractor = FGRAGExtractor(llm=llm, max_concurrency=1)
    nodes = extractor(
        [
            TextNode(text="Marie Curie lived in Paris with Pierre Curie."),
            TextNode(text="Marie Curie worked in Paris."),
        ]
    )
    stats = extractor.stats
    assert stats["chunks"] == 2 and stats["fallback_chunks"] == 1 and stats["llm_chunks"] == 1
    for node in nodes:  # the fallback chunk still has a graph (spaCy co-occurrence)
        assert node.metadata[KG_NODES_KEY]
    assert extractor.usage.calls == 3  # one extraction answer was empty: no gleaning check
    record = extractor.llm_steps.record("extraction")
    assert (record.items, record.fallbacks) == (2, 1)
    assert dict(record.reasons) == {"empty reply": 1}


def test_llm_extractor_failure_is_counted_and_can_raise() -> None:
    llm = ScriptedLLM({"Task: read the text": RuntimeError("down")})
    extractor = FGRAGExtractor(llm=llm)
    node = extractor([TextNode(text="Marie Curie worked in Paris.")])[0]
    assert node.metadata[KG_NODES_KEY]  # the co-occurrence graph stands in
    assert extractor.stats["fallback_chunks"] == 1
    assert extractor.usage.failures == 1 and extractor.usage.calls == 1  # not retryable
    assert dict(extractor.llm_steps.record("extraction").reasons) == {"RuntimeError": 1}
    strict = FGRAGExtractor(llm=llm, on_llm_failure="raise")
    with pytest.raises(LLMFallbackError, match="extraction"):
        strict([TextNode(text="Marie Curie worked in Paris.")])


def test_cooccurrence_graph_on_handwritten_text() -> None:
    text = (
        "Marie Curie moved to Paris in 1891. "
        "In Paris she met Pierre Curie. "
        "The Sorbonne hired Marie Curie."
    )
    node = CooccurrenceExtractor()([TextNode(text=text)])[0]
    entities = {e.name: e for e in node.metadata[KG_NODES_KEY]}
    assert {"marie curie", "paris", "pierre curie"} <= set(entities)
    assert entities["paris"].properties["descriptions"][:2] == [
        "Marie Curie moved to Paris in 1891.",
        "In Paris she met Pierre Curie.",
    ]
    pairs = {
        (r.source_id, r.target_id): r.properties["descriptions"]
        for r in node.metadata[KG_RELATIONS_KEY]
    }
    assert pairs[("marie curie", "paris")] == ["Marie Curie moved to Paris in 1891."]
    assert ("marie curie", "pierre curie") not in pairs  # never in one sentence


def test_extractor_choice(monkeypatch, caplog) -> None:
    monkeypatch.setenv("GRAPHRAG_LLM", "none")
    paper = FGRAGConfig.resolve("paper", max_gleanings=2, sentence_splitter="rule")
    assert isinstance(make_extractor(paper, None), CooccurrenceExtractor)
    strong = ScriptedLLM("x", model_name="gpt-test")
    extractor = make_extractor(paper, strong)
    assert isinstance(extractor, FGRAGExtractor) and extractor.max_gleanings == 2
    weak = ScriptedLLM("x", model_name="SmolLM2-135M-Instruct.gguf")
    assert is_embedded(weak)
    steps = LLMSteps("test")
    with caplog.at_level("WARNING"):
        fallback = make_extractor(paper, weak, steps)
    assert isinstance(fallback, CooccurrenceExtractor) and fallback.sentence_splitter == "rule"
    assert "cannot write JSON" in caplog.text  # said loudly, not silently
    record = steps.record("extraction")
    assert record.tier == "llm-free" and record.llm_class == "ScriptedLLM"
    # The LLM-free config never asks for an LLM, whatever is given.
    steps = LLMSteps("test")
    chosen = make_extractor(FGRAGConfig.resolve("default"), strong, steps)
    assert isinstance(chosen, CooccurrenceExtractor)
    assert steps.record("extraction").source == "choice"
