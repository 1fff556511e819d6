"""ChainRAGQueryEngine with a scripted LLM: rewrite, summary, sufficiency loop, integrations."""

from __future__ import annotations

import pytest
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import Document, NodeWithScore, QueryBundle
from support import BagOfWordsEmbedding, ScriptedLLM

from llama_index_graphrag_ext.chainrag import SentenceGraphIndex
from llama_index_graphrag_ext.chainrag.prompts import missing_entity
from llama_index_graphrag_ext.core.llm import LLMFallbackError, is_unanswered, parse_yes_no
from llama_index_graphrag_ext.core.nodes import PassageParser

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
    assert is_unanswered("I don't know.") and is_unanswered("Not specified")
    assert not is_unanswered("Felix Salten")
    assert parse_yes_no("Yes, it can.") and parse_yes_no("Based on the context, yes.")
    assert parse_yes_no("No") is False and parse_yes_no("") is None


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
    engine = index.as_query_engine(llm=llm, integration="context", max_hops=5, k=1)
    response = engine.query(QUESTION)
    for step in response.metadata["chain"]:
        assert step["stopped"] in ("exhausted", "budget") and step["hops"] >= 1
    tight = index.as_query_engine(llm=_script(**{"Reply yes or no": "no"}), word_budget=15)
    for step in tight.query(QUESTION).metadata["chain"]:
        assert step["stopped"] == "budget"
        assert sum(len(s["text"].split()) for s in step["sentences"] if s["role"] != "seed") <= 15


def test_malformed_decomposition_falls_back_to_the_question(index):
    llm = ScriptedLLM({"JSON:": "sure! here you go", "Reply yes or no": "yes", "Answer:": "Pest"})
    engine = index.as_query_engine(llm=llm)
    response = engine.query(QUESTION)
    assert response.metadata["notes"]["decomposition"] == "fallback"
    assert [s["question"] for s in response.metadata["chain"]] == [QUESTION]
    assert response.metadata["usage"]["parse_failures"] == 1
    record = engine.llm_steps.record("decompose")
    assert (record.items, record.fallbacks, dict(record.reasons)) == (1, 1, {"unusable reply": 1})
    strict = index.as_query_engine(llm=llm, on_llm_failure="raise")
    with pytest.raises(LLMFallbackError, match="decompose"):
        strict.query(QUESTION)


def test_replies_as_real_models_write_them(index):
    """Reasoning blocks, labels, "Based on ..., yes", unanswered phrasings, wrapped JSON."""
    llm = _script(
        **{
            "JSON:": 'Here is the decomposition:\n```json\n{"sub_questions": '
            '["Who wrote Bambi?", "Where was this author born?"]}\n```\nHope it helps.',
            "Reply yes or no": "<think>The context names the author.</think>\n"
            "Based on the context, yes.",
            "Rewritten:": "Rewritten question: Where was Felix Salten born?",
            "Question: Who wrote Bambi?\nAnswer:": "<think>Bambi ... Salten</think>Answer: Felix Salten",
            "Sub-questions and their answers": "**Answer:** Pest",
        }
    )
    engine = index.as_query_engine(llm=llm, integration="answer")
    response = engine.query(QUESTION)
    chain = response.metadata["chain"]
    assert [s["original"] for s in chain] == ["Who wrote Bambi?", "Where was this author born?"]
    assert chain[0]["answer"] == "Felix Salten" and chain[0]["stopped"] == "sufficient"
    assert chain[1]["question"] == "Where was Felix Salten born?"  # the label is gone
    assert str(response) == "Pest"
    assert all(r.fallbacks == 0 for r in engine.llm_steps.records())
    not_known = _script(
        **{
            "Question: Who wrote Bambi?\nAnswer:": "I don't know.",
            "Summary:": "Bambi: a novel.",
            "Question: Where was this author born?\nAnswer:": "Not specified",
        }
    )
    chain = index.as_query_engine(llm=not_known).query(QUESTION).metadata["chain"]
    assert chain[0]["answered"] is False and chain[1]["action"] == "summary"
    assert chain[1]["answered"] is False


def test_unreadable_sufficiency_reply_is_counted_and_search_goes_on(index):
    llm = _script(**{"Reply yes or no": "Hmm, let me think about the passages."})
    engine = index.as_query_engine(llm=llm, max_hops=2)
    response = engine.query(QUESTION)
    record = engine.llm_steps.record("sufficiency")
    assert record.items >= 2 and record.fallbacks == record.items
    assert all(s["stopped"] != "sufficient" for s in response.metadata["chain"])


class _TopTwo(BaseNodePostprocessor):
    """A reranker that, like SentenceTransformerRerank, keeps only ``top_n`` (2) nodes."""

    top_n: int = 2

    def _postprocess_nodes(self, nodes, query_bundle: QueryBundle | None = None):
        words = set(query_bundle.query_str.lower().split())
        scored = [
            NodeWithScore(node=n.node, score=len(words & set(n.node.get_content().lower().split())))
            for n in nodes
        ]
        return sorted(scored, key=lambda n: -n.score)[: self.top_n]


def test_reranker_top_n_does_not_shrink_seeds_or_context(index):
    engine = index.as_query_engine(
        llm=_script(**{"Reply yes or no": "no"}), reranker=_TopTwo(), k=3, max_hops=1
    )
    response = engine.query(QUESTION)
    for step in response.metadata["chain"]:
        assert sum(s["role"] == "seed" for s in step["sentences"]) == 3
    retriever = index.as_retriever(reranker=_TopTwo(), k=3, similarity_top_k=4)
    assert len(retriever.retrieve(QUESTION)) == 4


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
    assert engine.llm_steps.record("decompose").tier == "llm-free"
    assert response.metadata["usage"]["calls"] >= 3
    assert str(response).strip()
    assert response.source_nodes[0].node.ref_doc_id in {"salten", "bambi"}


def test_word_budget_is_cut_to_the_llm_context_window():
    from llama_index_graphrag_ext.chainrag.engine import words_that_fit

    small = ScriptedLLM(default="x", context_window=2048, num_output=256)
    assert words_that_fit(small) == int((2048 - 256 - 400) * 0.6)
    large = ScriptedLLM(default="x", context_window=128000, num_output=512)
    assert words_that_fit(large) > 3000


def test_a_seed_bm25_brings_is_scored_by_the_reranker_like_the_others(index):
    # Every sentence BM25 alone brings (here: an empty first round) is scored by the
    # reranker as the cosine's were (word overlap, an integer), never by a cosine.
    search = index.as_retriever(reranker=_TopTwo(), k=3, candidate_k=3, bm25_weight=1.0).search
    state = search.start(QUESTION)
    brought = search._with_bm25(state, [])
    assert brought and all(float(s).is_integer() for _, s in brought)
    assert all(float(s).is_integer() for _, s in state.candidates)
