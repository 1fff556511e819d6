"""The pairwise judge over the loopback wire, on a tiny real slice of UltraDomain.

The model (:class:`~llama_index_graphrag_ext.testing.replies.ModelReplies`) always prefers
the longer answer, whichever position it is shown in: a judge run that undoes the order
swap right must then give the same system every verdict of a pair.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.replies import JUNK_REPLY

from llama_index_graphrag_ext.core.llm import LLMCaller
from llama_index_graphrag_ext.eval.judge import CRITERIA, ajudge_pair, run_judge, win_rates

ULTRADOMAIN = Path(__file__).resolve().parents[2].parent / "shared/benchmarks/ultradomain-mix"


@pytest.fixture
def ultradomain():
    if not (ULTRADOMAIN / "questions.jsonl").is_file():
        pytest.skip(f"{ULTRADOMAIN} is not present")
    return ULTRADOMAIN


def test_run_judge_judges_each_pair_twice_and_counts_the_judge(
    ultradomain, model_server, wire_llm, bow_embed
):
    report = run_judge(
        ultradomain,
        a="fgrag",
        b="naive",
        limit=1,
        llm=wire_llm,
        max_documents=2,
        embed_model=bow_embed,
        options={"max_query_entities": "2", "max_questions": "2"},
        show_progress=False,
    )
    assert (report["questions"], report["documents"]) == (1, 2)
    assert report["llm"] == report["judge"] == f"{type(wire_llm).__name__}({wire_llm.model})"

    # Each pair judged twice, in both orders; every verdict parsed.
    verdicts = report["verdicts"]
    assert [v["order"] for v in verdicts] == ["ab", "ba"]
    for criterion in CRITERIA:
        row = report["win_rates"][criterion]
        assert (row["judged"], row["unparsed"]) == (2, 0)
    # The judge prefers the longer answer in either position: the swap is undone.
    answers = report["answers"][0]
    longer = "a" if len(answers["fgrag"]) >= len(answers["naive"]) else "b"
    assert all(set(v["winners"].values()) == {longer} for v in verdicts)
    assert report["win_rates"]["overall"][longer] == 1.0

    # The judge's calls and tokens are what the server counted for the judge task.
    tasks = model_server.responder.tasks
    assert report["judge_calls"] == 2 * report["questions"] == tasks["judge"]
    calls, prompt, completion = model_server.usage({"judge"})
    assert report["judge_tokens"] == prompt + completion
    # Both systems answered over the wire, FG-RAG's graph from LLM extraction.
    assert tasks["fg-answer"] == 1 and tasks["naive-answer"] == 1
    assert (
        report["a_stats"]["llm_calls_index"] == model_server.usage({"extraction", "glean-check"})[0]
    )
    assert report["a_stats"]["llm_calls_index"] > 0 and report["b_stats"]["llm_calls_index"] == 0
    assert "failed_answers" not in report["a_stats"] and "failed_answers" not in report["b_stats"]
    assert model_server.stats()["by_status"] == {200: model_server.stats()["requests"]}


def test_ajudge_pair_leaves_an_unusable_verdict_unparsed(model_server, wire_llm):
    import asyncio

    caller = LLMCaller(wire_llm)
    # The second order ("ba") gets a refusal instead of a verdict.
    model_server.responder.junk = lambda req, task: task == "judge" and req.number == 2
    short, long = "Paris.", "Paris, the capital of France, on the Seine."
    judgements = asyncio.run(ajudge_pair(caller, "q1", "Where is the Louvre?", short, long))

    assert [j.order for j in judgements] == ["ab", "ba"]
    assert judgements[0].winners == dict.fromkeys(CRITERIA, "b")  # b is the longer answer
    assert judgements[1].winners == dict.fromkeys(CRITERIA) and judgements[1].raw == JUNK_REPLY
    rates = win_rates(judgements)
    assert all((rates[c]["judged"], rates[c]["unparsed"]) == (1, 1) for c in CRITERIA)
    assert caller.meter.calls == model_server.responder.tasks["judge"] == 2
