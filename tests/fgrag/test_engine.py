"""FGRAGQueryEngine: entity, question, map (summary) and reduce calls and their prompts."""

from __future__ import annotations

import re

import pytest
from llama_index.core import Document
from llama_index.core.base.response.schema import Response, StreamingResponse
from llama_index.core.prompts import PromptTemplate
from support import ScriptedLLM

from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.fgrag import FGRAGIndex, FGRAGQueryEngine

DOCS = [
    Document(id_="curie", text="Marie Curie studied radioactivity in Paris with Pierre Curie."),
    Document(id_="sorbonne", text="Pierre Curie taught physics at the Sorbonne in Paris."),
]
QUERY = "What did Marie Curie do in Paris?"


def summary(prompt: str) -> str:
    entity = re.search(r"focused summary about (.+?),", prompt).group(1)
    return f"SUMMARY[{entity}]"


def script() -> dict:
    return {
        "List the entities": "1. Marie Curie\n2. Paris\n",
        "what would you need to know about": "- Where did she work?\n- What did she find?",
        "Write a focused summary about": summary,
        "Merge the notes below": lambda p: (
            "MERGED[" + ",".join(re.findall(r"SUMMARY\[(.+?)\]", p)) + "]"
        ),
        "You answer questions from the notes": "FINAL ANSWER",
    }


@pytest.fixture
def index(bow_embed) -> FGRAGIndex:
    # The paper's config answers by map-reduce; with no LLM to extract, its graph is
    # the co-occurrence one (planned and said so). Each test gives the engine its LLM.
    return FGRAGIndex.from_documents(
        DOCS, config="paper", embed_model=bow_embed, transformations=[PassageParser()]
    )


def test_map_reduce_calls_and_prompts(index: FGRAGIndex) -> None:
    llm = ScriptedLLM(script())
    engine = index.as_query_engine(llm=llm, max_concurrency=1)
    assert isinstance(engine, FGRAGQueryEngine)
    response = engine.query(QUERY)
    assert isinstance(response, Response)
    assert str(response) == "FINAL ANSWER"
    # 1 entity call + (2 entities + the whole query) x (questions + summary) + 1 reduce
    assert llm.call_count == 8
    prompts = llm.calls
    summaries = [p for p in prompts if p.startswith("Write a focused summary")]
    assert len(summaries) == 3
    curie = next(p for p in summaries if "about Marie Curie" in p)
    assert "Marie Curie studied radioactivity" in curie  # the expansion's descriptions
    assert f"**{QUERY}**" in curie and "- Where did she work?" not in curie
    assert "Where did she work?" in curie
    reduce = prompts[-1]
    assert reduce.startswith("You answer questions from the notes")
    for unit in ("Marie Curie", "Paris", QUERY):
        assert f"SUMMARY[{unit}]" in reduce
    assert QUERY in reduce
    details = response.metadata["fgrag"]
    assert [d["entity"] for d in details] == ["Marie Curie", "Paris", QUERY]
    assert details[0]["questions"] == ["Where did she work?", "What did she find?"]
    assert details[0]["weak_context"] and details[0]["descriptions"] > 0
    assert response.metadata["usage"]["calls"] == 8
    assert response.metadata["usage"]["total_tokens"] > 0
    assert {n.node.ref_doc_id for n in response.source_nodes} <= {"curie", "sorbonne"}


async def test_aquery_and_entity_fallback(index: FGRAGIndex) -> None:
    s = script()
    s["List the entities"] = (
        "Sure! Here is a very long sentence that is not a list of entities at all ok"
    )
    llm = ScriptedLLM(s)
    engine = FGRAGQueryEngine(index, llm=llm, max_query_entities=1)
    response = await engine.aquery(QUERY)
    assert str(response) == "FINAL ANSWER"
    assert engine.entity_fallbacks == 1  # spaCy gave the entities
    assert len(response.metadata["fgrag"]) == 2  # one spaCy entity + the query


def test_streaming_reduce(index: FGRAGIndex) -> None:
    llm = ScriptedLLM(script())
    engine = index.as_query_engine(llm=llm, streaming=True)
    response = engine.query(QUERY)
    assert isinstance(response, StreamingResponse)
    pieces = list(response.response_gen)
    assert len(pieces) > 1 and "".join(pieces) == "FINAL ANSWER"
    assert response.metadata["usage"]["calls"] == 8
    assert response.metadata["usage"]["completion_tokens"] > 0


def test_prompts_are_exposed_and_replaceable(index: FGRAGIndex) -> None:
    llm = ScriptedLLM(script() | {"NOTES>>": "CUSTOM"})
    engine = index.as_query_engine(llm=llm)
    assert set(engine.get_prompts()) == {
        "query_entities",
        "questions",
        "summary",
        "combine",
        "answer",
    }
    engine.update_prompts({"answer": PromptTemplate("NOTES>> {context_str} Q: {query_str}")})
    assert str(engine.query(QUERY)) == "CUSTOM"


def test_token_budget_truncates_descriptions(index: FGRAGIndex) -> None:
    llm = ScriptedLLM(script())
    engine = index.as_query_engine(llm=llm, max_context_tokens=5)
    engine.query(QUERY)
    summaries = [p for p in llm.calls if p.startswith("Write a focused summary")]
    assert all("radioactivity" not in p for p in summaries)


def test_needs_an_llm(index: FGRAGIndex) -> None:
    with pytest.raises(ValueError, match="needs an LLM"):
        FGRAGQueryEngine(index, llm="none")


def test_summary_may_use_general_knowledge_unless_strict(index: FGRAGIndex) -> None:
    default = index.as_query_engine(llm=ScriptedLLM(script()))
    strict = index.as_query_engine(llm=ScriptedLLM(script()), general_knowledge=False)
    assert "general knowledge" in default.get_prompts()["summary"].get_template()
    assert "using only the information" in strict.get_prompts()["summary"].get_template()


def test_reduce_merges_in_rounds_and_drops_no_summary(index: FGRAGIndex) -> None:
    long = script() | {"Write a focused summary about": lambda p: summary(p) + " detail" * 20}
    llm = ScriptedLLM(long)
    # Room for about two summaries per prompt: three summaries need a merge round.
    engine = index.as_query_engine(llm=llm, max_context_tokens=90, max_concurrency=1)
    response = engine.query(QUERY)
    assert response.metadata["reduce"]["reduce_rounds"] >= 1
    merges = [p for p in llm.calls if p.startswith("Merge the notes")]
    merged = " ".join(merges)
    answer = llm.calls[-1]
    # every unit's summary reaches the answer, merged or as it was
    for unit in ("Marie Curie", "Paris", QUERY):
        assert f"SUMMARY[{unit}]" in merged or f"SUMMARY[{unit}]" in answer
    assert "MERGED[" in answer
    assert response.metadata["reduce"]["summaries_cut"] == 0
