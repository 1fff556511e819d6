"""The demo end to end: the shipped corpus, the real embedder, and the real embedded SmolLM2."""

import io

import pytest

from llama_index_graphrag_ext.demo import DEMO_METHODS, format_evidence, run_demo


def test_format_evidence():
    line = format_evidence(
        {"method": "qcg", "query": "q?", "score": 0.51234, "queries": ["a", "b", "c", "d"]}
    )
    assert line == "qcg: score=0.512; queries=[a, b, c, ... 4 in all]"
    nested = format_evidence(
        {"method": "x", "sentences": [{"text": "A long sentence here", "hop": 1}], "rank": 2}
    )
    assert nested == "x: sentences=['A long sentence here']; rank=2"  # the text first
    qcg = format_evidence({"method": "qcg", "collected": 3, "query_nodes": [{"query": "Who?"}]})
    assert qcg == "qcg: query_nodes=[Who?]; collected=3"  # the matched queries, not counters
    assert format_evidence(None) == "(no evidence recorded)"


def test_demo_retrieval_only_without_llm():
    out = io.StringIO()
    summary = run_demo(["dense"], llm="none", out=out)
    text = out.getvalue()
    assert text.count("\nQ: ") == 4 and "why: dense: rank=1; cosine=" in text
    assert "(no LLM: retrieval only)" in text and summary["llm_calls"] == 0
    assert "*1." in text  # a gold passage ranked first for at least one question
    assert "gold passages in top 3" in text  # the closing table, one line per method
    found, total = summary["methods"]["dense"]["gold_in_top_k"]
    assert 0 < found <= total and f"{found} of {total}" in text


@pytest.mark.embedded
def test_demo_with_the_embedded_llm():
    out = io.StringIO()
    summary = run_demo(llm="embedded", out=out)
    text = out.getvalue()
    assert "LLM: EmbeddedLlamaCPP(SmolLM2-135M-Instruct.Q4_1.gguf) from argument" in text
    assert "(embedded-llm)" in text and "135-million-parameter model" in text
    assert "fgrag" in DEMO_METHODS
    n_questions = 4 * len(DEMO_METHODS)
    assert summary["llm_calls"] == n_questions and summary["llm_tokens"] > 0
    for method in DEMO_METHODS:
        answers = summary["methods"][method]["answers"]
        assert len(answers) == 4 and all(a.strip() for a in answers)
    assert f"LLM: {n_questions} calls" in text
