"""FG-RAG over the loopback wire: LLM extraction, the index's LLM rule, map-reduce, faults.

The model is :class:`~llama_index_graphrag_ext.testing.replies.ModelReplies` behind a real
OpenAI-compatible HTTP server. Its extraction records describe entities as "Named in: ..."
and relations as "Both in: ..." with the keyword "co-mention", which the LLM-free
co-occurrence graph never writes: that tells which extractor built each chunk.
"""

from __future__ import annotations

import pytest
from llama_index.core.base.response.schema import StreamingResponse
from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY, EntityNode
from llama_index.core.schema import Document, TextNode
from support.wire import Fault

from llama_index_graphrag_ext.core.llm import LLMFallbackError, RetryPolicy
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.fgrag import FGRAGExtractor, FGRAGIndex
from llama_index_graphrag_ext.fgrag.records import BUILT_BY, CO_OCCURS, DESCRIPTIONS, RELATED
from llama_index_graphrag_ext.fgrag.retriever import spacy_query_entities

DOCS = [
    Document(
        id_="bees",
        text="Honey Bees live in hives across Europe. Beekeepers in France sell honey at the "
        "Paris Market. Varroa Mites threaten Honey Bees in Germany.",
    ),
    Document(
        id_="farms",
        text="Small Farms in Spain grow olives near Seville. The Drought of 2022 hurt Small "
        "Farms in Andalusia. Farmers sold olive oil to Italian Buyers.",
    ),
    Document(
        id_="rivers",
        text="The Danube flows through Vienna and Budapest. Barges carry grain from Hungary to "
        "Romania on the Danube.",
    ),
]
QUESTION = "Do Beekeepers in France cope with the Drought in Spain?"
EXTRACTION = {"extraction", "glean-check"}
QUERY_TASKS = {"fg-entities", "fg-questions", "fg-summary", "fg-answer"}
USAGE = ("calls", "prompt_tokens", "completion_tokens")


def chunks() -> list[TextNode]:
    return [TextNode(id_=d.id_, text=d.text) for d in DOCS]


def built_by_llm(node) -> bool:
    """Every entity and relation of the chunk is the LLM's (not the co-occurrence graph's)."""
    entities, relations = node.metadata[KG_NODES_KEY], node.metadata[KG_RELATIONS_KEY]
    return bool(entities) and all(
        e.properties[BUILT_BY] == "llm"
        and all(d.startswith("Named in:") for d in e.properties[DESCRIPTIONS])
        for e in entities
    ) and all(
        r.label == RELATED and r.properties[BUILT_BY] == "llm" and r.properties["keywords"]
        for r in relations
    )  # fmt: skip


def meter_usage(meter) -> tuple[int, int, int]:
    return meter.calls, meter.prompt_tokens, meter.completion_tokens


def test_extractor_builds_the_graph_from_the_llm(model_server, wire_llm, how, give_llm):
    extractor = FGRAGExtractor(**give_llm(wire_llm))
    nodes = extractor(chunks())

    assert all(built_by_llm(n) for n in nodes)
    names = {e.name for n in nodes for e in n.metadata[KG_NODES_KEY]}
    assert {"danube", "beekeepers", "france", "drought", "spain"} <= names
    assert sum(len(n.metadata[KG_RELATIONS_KEY]) for n in nodes) >= 10
    stats = extractor.stats
    assert (stats["chunks"], stats["llm_chunks"], stats["fallback_chunks"]) == (3, 3, 0)
    # One extraction per chunk (re-asked with more room when cut) and one gleaning check each.
    tasks = model_server.responder.tasks
    assert tasks["glean-check"] == 3 and tasks["extraction"] >= 3
    assert tasks["extraction"] - 3 == extractor.usage.length_retries
    assert meter_usage(extractor.usage) == model_server.usage(EXTRACTION) == model_server.usage()
    record = extractor.llm_steps.record("extraction")
    assert (record.tier, record.source, record.items, record.fallbacks) == (
        "full-llm", how, 3, 0,
    )  # fmt: skip


@pytest.mark.parametrize("how", ["settings"], indirect=True)
def test_index_with_only_settings_llm_extracts_with_the_llm(model_server, wire_llm, how, bow_embed):
    from llama_index.core import Settings

    Settings.llm = wire_llm  # nothing else: no llm=, no kg_extractors
    index = FGRAGIndex.from_documents(
        DOCS, config="paper", embed_model=bow_embed, transformations=[PassageParser()]
    )
    assert index.extractors_used == ["FGRAGExtractor"]
    record = index.llm_steps.record("extraction")
    assert (record.tier, record.source, record.llm_class) == (
        "full-llm", "settings", type(wire_llm).__name__,
    )  # fmt: skip
    assert (record.items, record.fallbacks) == (3, 0)
    assert model_server.responder.tasks["extraction"] >= 3
    assert model_server.responder.tasks["glean-check"] == 3
    entities = [n for n in index.property_graph_store.get() if isinstance(n, EntityNode)]
    assert entities and all(e.properties[BUILT_BY] == "llm" for e in entities)
    stats = index.stats()
    assert stats["entities"] == len(entities) and stats["relations"] > 0
    assert stats["extractors"] == ["FGRAGExtractor"]
    assert (stats["extraction"]["llm_chunks"], stats["extraction"]["fallback_chunks"]) == (3, 0)


@pytest.fixture
def fg_index(model_server, wire_llm, how, give_llm, bow_embed):
    """An index built over the wire; the engine then gets its LLM the ``how`` way."""
    kwargs = give_llm(wire_llm)
    index = FGRAGIndex.from_documents(
        DOCS, config="paper", embed_model=bow_embed, transformations=[PassageParser()], **kwargs
    )
    model_server.reset()
    model_server.responder.tasks.clear()
    return index, kwargs


def test_query_engine_map_reduce_over_the_wire(fg_index, model_server, how):
    index, kwargs = fg_index
    engine = index.as_query_engine(max_query_entities=2, max_questions=2, **kwargs)
    response = engine.query(QUESTION)

    units = response.metadata["fgrag"]
    # Eq. 8: the LLM's entities (capped at 2), plus the whole question as one more unit.
    assert [u["entity"] for u in units] == ["Beekeepers", "France", QUESTION]
    for unit in units:
        # Eq. 10: two follow-up questions per unit, read from a list ("1. ..." / "- ...").
        assert len(unit["questions"]) == 2
        assert all(q.startswith(("What is", "Where is")) for q in unit["questions"])
        assert unit["summary"].startswith(f"## {unit['entity']}")  # Eq. 11
        assert unit["descriptions"] > 0
    tasks = model_server.responder.tasks
    assert dict(tasks) == {"fg-entities": 1, "fg-questions": 3, "fg-summary": 3, "fg-answer": 1}
    (answer,) = [r.text for r in model_server.log if r.task == "fg-answer"]
    assert str(response) == answer.strip() and str(response).startswith("## Answer")
    assert response.source_nodes
    assert tuple(response.metadata["usage"][k] for k in USAGE) == model_server.usage(QUERY_TASKS)
    assert model_server.usage() == model_server.usage(QUERY_TASKS)  # nothing else was asked
    for step, items in (("query-entities", 1), ("summaries", 3)):
        record = engine.llm_steps.record(step)
        assert (record.source, record.items, record.fallbacks) == (how, items, 0)


def test_query_engine_streams_the_answer_and_counts_it(fg_index, model_server):
    index, kwargs = fg_index
    engine = index.as_query_engine(max_query_entities=2, max_questions=2, streaming=True, **kwargs)
    response = engine.query(QUESTION)
    assert isinstance(response, StreamingResponse)
    before = response.metadata["usage"]["calls"]
    streamed = "".join(response.response_gen)
    last = model_server.log[-1]
    assert last.task == "fg-answer" and last.request.stream and streamed == last.text
    usage = response.metadata["usage"]
    assert usage["calls"] == before + 1 == 8
    assert tuple(usage[k] for k in USAGE) == model_server.usage()


def test_junk_extraction_falls_back_for_exactly_those_chunks(model_server, wire_llm):
    model_server.responder.junk = lambda req, task: task == "extraction" and "Danube" in req.prompt
    extractor = FGRAGExtractor(llm=wire_llm)
    nodes = {n.node_id: n for n in extractor(chunks())}

    assert built_by_llm(nodes["bees"]) and built_by_llm(nodes["farms"])
    rivers = nodes["rivers"]  # the co-occurrence graph: spaCy entities, sentence descriptions
    assert rivers.metadata[KG_NODES_KEY]
    assert all(e.properties[BUILT_BY] == "cooccurrence" for e in rivers.metadata[KG_NODES_KEY])
    assert all(r.label == CO_OCCURS for r in rivers.metadata[KG_RELATIONS_KEY])
    stats = extractor.stats
    assert (stats["llm_chunks"], stats["fallback_chunks"]) == (2, 1)
    record = extractor.llm_steps.record("extraction")
    assert (record.items, record.fallbacks) == (3, 1)
    assert dict(record.reasons) == {"no entity in the reply": 1}
    # An unusable reply is not refined: only the two usable chunks got a gleaning check.
    assert model_server.responder.tasks["glean-check"] == 2
    assert meter_usage(extractor.usage) == model_server.usage()

    strict = FGRAGExtractor(llm=wire_llm, on_llm_failure="raise")
    with pytest.raises(LLMFallbackError, match="1 chunk"):
        strict(chunks())


def test_server_errors_are_retried_without_a_fallback(model_server, wire_llm, monkeypatch):
    monkeypatch.setattr(RetryPolicy, "backoff", lambda self, attempt: 0.0)
    clean = FGRAGExtractor(llm=wire_llm)
    clean(chunks())
    clean_requests = model_server.stats()["requests"]
    model_server.reset()
    # The rivers chunk's extraction fails twice (503, then 500) before it is answered.
    rivers = lambda r: "Danube" in r.prompt and "left out" not in r.prompt  # noqa: E731
    model_server.inject(Fault(status=503, match=rivers), Fault(status=500, match=rivers))
    extractor = FGRAGExtractor(llm=wire_llm)
    nodes = extractor(chunks())

    assert all(built_by_llm(n) for n in nodes)
    stats = model_server.stats()
    assert stats["requests"] == clean_requests + 2
    assert stats["by_status"] == {503: 1, 500: 1, 200: clean_requests}
    assert (extractor.usage.retries, extractor.usage.failures) == (2, 0)
    assert extractor.llm_steps.record("extraction").fallbacks == 0
    assert extractor.stats["fallback_chunks"] == 0
    assert meter_usage(extractor.usage) == model_server.usage()


def test_junk_query_entities_fall_back_to_spacy(model_server, wire_llm, bow_embed):
    index = FGRAGIndex.from_documents(
        DOCS,
        config="paper",
        llm=wire_llm,
        embed_model=bow_embed,
        transformations=[PassageParser()],
    )
    model_server.reset()
    model_server.responder.junk = lambda req, task: task == "fg-entities"
    engine = index.as_query_engine(max_query_entities=2, max_questions=2)
    response = engine.query(QUESTION)

    units = [u["entity"] for u in response.metadata["fgrag"]]
    assert units == [*spacy_query_entities(QUESTION, 2), QUESTION]
    assert engine.entity_fallbacks == 1
    record = engine.llm_steps.record("query-entities")
    assert (record.items, record.fallbacks, dict(record.reasons)) == (1, 1, {"unusable reply": 1})
    assert str(response).startswith("## Answer")
    assert tuple(response.metadata["usage"][k] for k in USAGE) == model_server.usage()

    strict = index.as_query_engine(max_query_entities=2, on_llm_failure="raise")
    with pytest.raises(LLMFallbackError, match="query-entities"):
        strict.query(QUESTION)
