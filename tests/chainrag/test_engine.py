"""ChainRAGQueryEngine with a scripted LLM: rewrite, summary, sufficiency loop, integrations."""

from __future__ import annotations

import pytest
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import Document

from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
from llama_index_graphrag_ext.chainrag.prompts import is_unanswered, missing_entity, parse_yes
from llama_index_graphrag_ext.core.nodes import PassageParser
from llama_index_graphrag_ext.testing import ScriptedLLM

DOCS = [
    Document(id_="bambi", text="Bambi is a 1923 novel by Felix Salten. It follows a roe deer."),
    Document(id_="salten", text="Felix Salten was an Austrian author. He was born in Pest."),
    Document(id_="vienna", text="Vienna is the capital of Austria. It lies on the Danube."),
    Document(id_="pest", text="Pest is the eastern part of Budapest in Hungary."),
]
QUESTION = "Where was the author of Bambi born?"
DECOMP = '["Who wrote Bambi?", "Where was this author born?"]'


@pytest.fixture(scope="module")
def index():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from conftest import BagOfWordsEmbedding

    return SentenceGraphIndex.from_documents(
        DOCS, embed_model=BagOfWordsEmbedding(), transformations=[PassageParser()]
    )


def _script(**over):
    script = {
        "JSON:": DECOMP,
        "Reply yes or no": "yes",
        "Rewritten:": "Where was Felix Salten born?",
        "Question: Who wrote Bambi?\nAnswer:": "Felix Salten",
        "Question: Where was Felix Salten born?\nAnswer:": "Pest",
        "Sub-questions and their answers": "Pest",
        "Question: " + QUESTION + "\nAnswer:": "Pest",
    }
    script.update(over)
    return ScriptedLLM(script)


def test_pronoun_detection_and_reply_parsing():
    assert missing_entity("Where was this author born?") == ["this"]
    assert missing_entity("Where was the author of Bambi born?") == []  # "the" is no trigger
    assert missing_entity("Which item did they sell?") == ["they"]
    assert is_unanswered("Unknown") and is_unanswered("Unable to answer the question.")
    assert not is_unanswered("Felix Salten")
    assert parse_yes("Yes, it can.") and not parse_yes("No") and not parse_yes("")


def test_rewrite_path_and_answer_integration(index):
    llm = _script()
    engine = index.as_query_engine(llm=llm, integration="answer")
    response = engine.query(QUESTION)
    assert str(response) == "Pest"
    chain = response.metadata["chain"]
    assert [s["original"] for s in chain] == ["Who wrote Bambi?", "Where was this author born?"]
    assert chain[1]["question"] == "Where was Felix Salten born?"
    assert chain[1]["action"] == "rewritten" and chain[0]["action"] == "none"
    assert chain[0]["answer"] == "Felix Salten" and chain[0]["stopped"] == "sufficient"
    assert chain[0]["hops"] == 1 and chain[0]["sentences"]
    # decompose + 2 x (sufficiency + answer) + rewrite + final
    assert response.metadata["usage"]["calls"] == llm.call_count == 7
    final = llm.calls[-1]
    assert "Felix Salten" in final and "Context:" not in final  # AnsInt: answers only
    assert response.source_nodes and response.source_nodes[0].node.ref_doc_id in {
        "bambi",
        "salten",
        "pest",
        "vienna",
    }


def test_summary_path_when_an_earlier_answer_is_missing(index):
    llm = _script(
        **{
            "Question: Who wrote Bambi?\nAnswer:": "unknown",
            "Summary:": "Bambi is a novel by Felix Salten.",
            "Question: Where was this author born?\nAnswer:": "Pest",
        }
    )
    response = index.as_query_engine(llm=llm, integration="context").query(QUESTION)
    chain = response.metadata["chain"]
    assert chain[0]["answered"] is False
    assert chain[1]["action"] == "summary" and chain[1]["question"] == chain[1]["original"]
    assert "Felix Salten" in chain[1]["summary"]
    answer_prompt = next(c for c in llm.calls if "Where was this author born?\nAnswer:" in c)
    assert "Earlier findings: Bambi is a novel" in answer_prompt
    assert "Context:" in llm.calls[-1]  # CxtInt: merged sentences


def test_sufficiency_loop_stops_at_budget_or_exhaustion(index):
    llm = _script(**{"Reply yes or no": "no"})
    engine = index.as_query_engine(llm=llm, integration="context", max_hops=5, seed_k=1)
    response = engine.query(QUESTION)
    for step in response.metadata["chain"]:
        assert step["stopped"] in ("exhausted", "budget") and step["hops"] >= 1
    tight = index.as_query_engine(llm=_script(**{"Reply yes or no": "no"}), word_budget=15)
    for step in tight.query(QUESTION).metadata["chain"]:
        assert step["stopped"] == "budget"
        assert sum(len(s["text"].split()) for s in step["sentences"] if s["role"] != "seed") <= 15


def test_malformed_decomposition_falls_back_to_the_question(index):
    llm = ScriptedLLM({"JSON:": "sure! here you go", "Reply yes or no": "yes", "Answer:": "Pest"})
    response = index.as_query_engine(llm=llm).query(QUESTION)
    assert response.metadata["notes"]["decomposition"] == "fallback"
    assert [s["question"] for s in response.metadata["chain"]] == [QUESTION]
    assert response.metadata["usage"]["parse_failures"] == 1


def test_streaming_and_prompts(index):
    engine = index.as_query_engine(llm=_script(), streaming=True)
    response = engine.query(QUESTION)
    assert "".join(response.response_gen).strip() == "Pest"
    assert len(response.metadata["chain"]) == 2
    assert set(engine.get_prompts()) >= {"decompose", "rewrite", "sufficiency", "summary"}
    engine.update_prompts({"decompose": PromptTemplate("Q: {query_str} -> JSON:")})
    assert engine.get_prompts()["decompose"].template.startswith("Q: ")
    with pytest.raises(ValueError):
        index.as_query_engine(llm=_script(), integration="both")


@pytest.mark.embedded
def test_end_to_end_with_the_embedded_llm(minilm):
    from llama_index_graphrag_ext.core.defaults import embedded_llm

    idx = SentenceGraphIndex.from_documents(
        DOCS, embed_model=minilm, transformations=[PassageParser()]
    )
    engine = idx.as_query_engine(llm=embedded_llm(max_new_tokens=24), max_hops=1)
    response = engine.query("Where was Felix Salten born?")
    assert response.metadata["notes"]["decomposition"] == "skipped"  # SmolLM2 writes no JSON
    assert response.metadata["usage"]["calls"] >= 3
    assert str(response).strip()
    assert response.source_nodes[0].node.ref_doc_id in {"salten", "bambi"}


def test_word_budget_is_cut_to_the_llm_context_window():
    from llama_index_graphrag_ext.chainrag.engine import words_that_fit

    small = ScriptedLLM(default="x", context_window=2048, num_output=256)
    assert words_that_fit(small) == int((2048 - 256 - 400) * 0.6)
    large = ScriptedLLM(default="x", context_window=128000, num_output=512)
    assert words_that_fit(large) > 3000
