"""KnowledgeUnitExtractor: alpha = 0 without any LLM, and the scripted LLM (good, bad, empty)."""

from __future__ import annotations

import json

import pytest
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import Document, NodeRelationship
from support import ScriptedLLM

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.cue.extractor import KnowledgeUnitExtractor
from llama_index_graphrag_ext.cue.units import unit_id

DOCS = [
    Document(
        id_="green",
        text="Green\nGreen is an album by Steve Hillage. He released it in 1978.",
        metadata={"title": "Green"},
    ),
    Document(
        id_="hillage",
        text="Steve Hillage\nSteve Hillage is an English guitarist. He was born in Chingford.",
        metadata={"title": "Steve Hillage"},
    ),
    Document(
        id_="chingford",
        text="Chingford\nChingford is a town in east London, England, near Epping Forest.",
        metadata={"title": "Chingford"},
    ),
]


def chunks():
    return PassageParser().get_nodes_from_documents(DOCS)


def good_units(prompt: str) -> str:
    passage = prompt.rsplit("Passage:\n", 1)[1]
    title = passage.split("\n", 1)[0]
    return json.dumps({"units": [f"{title} is the subject.", f"{title}'s fact is stated."]})


def test_alpha_zero_needs_no_llm_and_splits_sentences(monkeypatch):
    def no_llm(*args, **kwargs):
        raise AssertionError("alpha=0 must not resolve an LLM")

    monkeypatch.setattr("llama_index_graphrag_ext.cue.extractor.choose_llm", no_llm)
    result = KnowledgeUnitExtractor(alpha=0.0).extract(chunks())
    assert result.selected == [] and result.stats["llm_total_tokens"] == 0
    texts = [u.text for u in result.units[1]]
    assert "He was born in Chingford." in texts
    born = next(u for u in result.units[1] if u.text == "He was born in Chingford.")
    keys = {e.key for e in born.entities}
    assert {"chingford", "steve hillage"} <= keys  # NER + the chunk title entity
    assert all(u.source == "sentence" for us in result.units for u in us)


def test_sentence_units_come_from_punctuation_rules_unless_the_parser_is_asked():
    # The paper splits with NLTK's rule-based sent_tokenize; "model" is spaCy's parser.
    doc = Document(
        id_="list",
        text="Album\nTracks: Solar Musick Suite; Sea Nature. Produced by Nick Mason.",
        metadata={"title": "Album"},
    )
    nodes = PassageParser().get_nodes_from_documents([doc])
    rule = KnowledgeUnitExtractor()
    model = KnowledgeUnitExtractor(sentence_splitter="model")
    ruled = [u.text for u in rule.extract(nodes).units[0]]
    assert "Produced by Nick Mason." in ruled
    keys = lambda us: {e.key for u in us for e in u.entities}  # noqa: E731
    # Entities come from NER either way; the title entity joins every unit.
    assert keys(rule.extract(nodes).units[0]) == keys(model.extract(nodes).units[0])
    with pytest.raises(ValueError):
        KnowledgeUnitExtractor(sentence_splitter="nltk")


def test_worker_processes_make_the_same_units(pools_started):
    many = chunks() * 20  # more chunks than one worker task
    parallel = KnowledgeUnitExtractor(nlp_processes=2)
    pooled = parallel.extract(many)
    alone = KnowledgeUnitExtractor().extract(many)
    assert len(pools_started) == 1  # one pool for the whole extraction
    assert [[(u.text, u.entities) for u in us] for us in pooled.units] == [
        [(u.text, u.entities) for u in us] for us in alone.units
    ]


def test_alpha_one_sends_every_chunk_to_the_llm_and_parses_units():
    llm = ScriptedLLM(good_units)
    result = KnowledgeUnitExtractor(alpha=1.0, llm=llm).extract(chunks())
    assert result.selected == [0, 1, 2] and llm.call_count == 3
    assert [u.text for u in result.units[1]] == [
        "Steve Hillage is the subject.",
        "Steve Hillage's fact is stated.",
    ]
    assert all(u.source == "llm" for us in result.units for u in us)
    assert result.stats["chunks_llm"] == 3 and result.stats["llm_total_tokens"] > 0


def test_llm_tokens_scale_with_alpha():
    spent, chosen = [], []
    for alpha in (0.0, 0.4, 1.0):
        extractor = KnowledgeUnitExtractor(alpha=alpha, llm=ScriptedLLM(good_units))
        result = extractor.extract(chunks())
        spent.append(result.stats["llm_total_tokens"])
        chosen.append(len(result.selected))
    assert spent[0] == 0 < spent[1] < spent[2]
    assert chosen[0] == 0 < chosen[1] < chosen[2] == 3


def test_knapsack_budget_is_respected_by_the_selection():
    extractor = KnowledgeUnitExtractor(alpha=0.5, llm=ScriptedLLM(good_units))
    nodes = chunks()
    result = extractor.extract(nodes)
    from llama_index_graphrag_ext.core.text import count_tokens

    chosen = sum(count_tokens(nodes[i].get_content()) for i in result.selected)
    assert 0 < chosen <= result.stats["token_budget"]


def test_malformed_and_empty_answers_fall_back_to_sentences():
    answers = {
        "Green is an album": ["not json at all", "still {not json"],
        "English guitarist": ['{"units": []}', '{"units": []}'],
        "Chingford is a town": '```json\n{"knowledge units": ["Chingford is in London.",]}\n```',
    }
    llm = ScriptedLLM(answers)
    extractor = KnowledgeUnitExtractor(alpha=1.0, llm=llm, repair_attempts=1)
    result = extractor.extract(chunks())
    assert result.stats["chunks_fallback"] == 2 and result.stats["chunks_llm"] == 1
    assert result.stats["llm_parse_failures"] == 2
    assert [u.source for u in result.units[0]] == ["sentence", "sentence"]
    assert [u.text for u in result.units[2]] == ["Chingford is in London."]
    assert llm.call_count == 5  # two tries for each bad chunk, one for the good one


def test_llm_errors_fall_back_and_are_counted():
    llm = ScriptedLLM(lambda prompt: RuntimeError("server down"))
    result = KnowledgeUnitExtractor(alpha=1.0, llm=llm).extract(chunks()[:1])
    assert result.stats["chunks_fallback"] == 1
    assert [u.source for u in result.units[0]] == ["sentence", "sentence"]


def test_embedded_llm_falls_back_to_sentences(caplog):
    class FakeSmol(ScriptedLLM):
        model_path: str = "/x/SmolLM2-135M-Instruct-Q4_1.gguf"

    llm = FakeSmol(good_units)
    result = KnowledgeUnitExtractor(alpha=1.0, llm=llm).extract(chunks())
    assert llm.call_count == 0 and result.stats["chunks_fallback"] == 3
    assert "cannot write JSON" in caplog.text


def test_cache_means_a_second_run_makes_no_calls(tmp_path):
    llm = ScriptedLLM(good_units)
    cache = str(tmp_path / "units.sqlite")
    KnowledgeUnitExtractor(alpha=1.0, llm=llm, cache_path=cache).extract(chunks())
    first = llm.call_count
    result = KnowledgeUnitExtractor(alpha=1.0, llm=llm, cache_path=cache).extract(chunks())
    assert llm.call_count == first and result.stats["llm_cache_hits"] == 3


def test_transform_component_in_an_ingestion_pipeline():
    pipeline = IngestionPipeline(transformations=[PassageParser(), KnowledgeUnitExtractor()])
    units = pipeline.run(documents=DOCS)
    assert units and all(u.metadata["chunk_id"] for u in units)
    assert all(NodeRelationship.SOURCE in u.relationships for u in units)
    first = units[0]
    assert first.node_id.endswith(unit_id(first.text))


def test_prompt_is_exposed_and_replaceable():
    from llama_index.core.prompts import PromptTemplate

    extractor = KnowledgeUnitExtractor(alpha=1.0, llm=ScriptedLLM(lambda p: '["a b c"]'))
    assert "unit_extraction" in extractor.get_prompts()
    extractor.update_prompts({"unit_extraction": PromptTemplate("UNITS OF: {passage}")})
    result = extractor.extract(chunks()[:1])
    assert [u.text for u in result.units[0]] == ["a b c"]


def test_fields_are_validated():
    with pytest.raises(ValueError):
        KnowledgeUnitExtractor(alpha=1.5)
    with pytest.raises(ValueError):
        KnowledgeUnitExtractor(selection="pagerank")
    with pytest.raises(ValueError):
        KnowledgeUnitExtractor(max_concurrency=0)
    with pytest.raises(ValueError):
        KnowledgeUnitExtractor(on_llm_failure="ignore")
