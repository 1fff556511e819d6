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
    assert nested == "x: rank=2; sentences=[(text='A long sentence here', hop=1)]"
    assert format_evidence(None) == "(no evidence recorded)"


def test_demo_retrieval_only_without_llm():
    out = io.StringIO()
    summary = run_demo(["dense"], llm="none", out=out)
    text = out.getvalue()
    assert text.count("\nQ: ") == 4 and "why: dense: rank=1; cosine=" in text
    assert "(no LLM: retrieval only)" in text and summary["llm_calls"] == 0
    assert "*1." in text  # a gold passage ranked first for at least one question


@pytest.mark.embedded
def test_demo_with_the_embedded_llm():
    out = io.StringIO()
    summary = run_demo(llm="embedded", out=out)
    text = out.getvalue()
    assert "LLM: EmbeddedLlamaCPP(SmolLM2-135M-Instruct.Q4_1.gguf) from argument" in text
    assert "(embedded-llm)" in text
    n_questions = 4 * len(DEMO_METHODS)
    assert summary["llm_calls"] == n_questions and summary["llm_tokens"] > 0
    for method in DEMO_METHODS:
        answers = summary["methods"][method]["answers"]
        assert len(answers) == 4 and all(a.strip() for a in answers)
    assert f"LLM: {n_questions} calls" in text
