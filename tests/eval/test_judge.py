"""The pairwise judge: verdict parsing, order swapping, win-rate arithmetic, a full run."""

from __future__ import annotations

import json
import re

import pytest
from support import ScriptedLLM

from llama_index_graphrag_ext.core.llm import LLMCaller
from llama_index_graphrag_ext.eval.judge import (
    CRITERIA,
    Judgement,
    ajudge_pair,
    format_judge_table,
    parse_verdict,
    run_judge,
    unswap,
    win_rates,
)


def verdict(c: int, d: int, e: int, o: int) -> str:
    return json.dumps(
        {
            "Comprehensiveness": {"Winner": f"Answer {c}", "Explanation": "x"},
            "Diversity": {"Winner": f"Answer {d}", "Explanation": "x"},
            "Empowerment": {"Winner": f"Answer {e}", "Explanation": "x"},
            "Overall Winner": {"Winner": f"Answer {o}", "Explanation": "x"},
        }
    )


def test_parse_verdict_formats() -> None:
    assert parse_verdict(verdict(1, 2, 1, 2)) == {
        "comprehensiveness": 1,
        "diversity": 2,
        "empowerment": 1,
        "overall": 2,
    }
    fenced = '```json\n{"comprehensiveness": {"winner": 2}, "diversity": {"winner": 1},}\n```'
    parsed = parse_verdict(fenced)
    assert parsed["comprehensiveness"] == 2 and parsed["diversity"] == 1
    assert parsed["empowerment"] is None and parsed["overall"] is None
    prose = "Comprehensiveness: Answer 2 is better. Diversity - 1. Overall winner: Answer 2."
    parsed = parse_verdict(prose)
    assert parsed == {"comprehensiveness": 2, "diversity": 1, "empowerment": None, "overall": 2}
    assert parse_verdict("") == dict.fromkeys(CRITERIA)
    assert parse_verdict('{"overall": {"winner": "Answer 1 or Answer 2"}}')["overall"] is None


def test_unswap_maps_positions_back_to_systems() -> None:
    v = {"comprehensiveness": 1, "diversity": 2, "empowerment": None, "overall": 1}
    assert unswap(v, "ab") == {
        "comprehensiveness": "a",
        "diversity": "b",
        "empowerment": None,
        "overall": "a",
    }
    assert unswap(v, "ba")["comprehensiveness"] == "b" and unswap(v, "ba")["diversity"] == "a"


def test_win_rate_arithmetic() -> None:
    def j(**w: str | None) -> Judgement:
        return Judgement("q", "ab", {c: w.get(c) for c in CRITERIA})

    judgements = [
        j(comprehensiveness="a", overall="a"),
        j(comprehensiveness="a", overall="b"),
        j(comprehensiveness="b", overall="a"),
        j(comprehensiveness="a"),
    ]
    table = win_rates(judgements)
    assert table["comprehensiveness"]["a"] == pytest.approx(0.75)
    assert table["comprehensiveness"]["b"] == pytest.approx(0.25)
    assert table["overall"]["a"] == pytest.approx(2 / 3)  # unparsed verdicts are left out
    assert table["overall"]["unparsed"] == 1 and table["overall"]["judged"] == 3
    assert table["diversity"]["a"] is None and table["diversity"]["unparsed"] == 4


async def test_each_pair_is_judged_twice_with_order_swapped() -> None:
    def prefer_good(prompt: str) -> str:
        first = prompt.split("Answer 1:")[1].split("Answer 2:")[0]
        return verdict(*([1] * 4 if "GOOD" in first else [2] * 4))

    llm = ScriptedLLM(prefer_good)
    out = await ajudge_pair(LLMCaller(llm), "q1", "Q?", "GOOD answer", "weak answer")
    assert [j.order for j in out] == ["ab", "ba"]
    assert llm.calls[0].index("GOOD") < llm.calls[0].index("weak")
    assert llm.calls[1].index("weak") < llm.calls[1].index("GOOD")
    assert all(w == "a" for j in out for w in j.winners.values())  # content wins both orders

    biased = await ajudge_pair(LLMCaller(ScriptedLLM(verdict(1, 1, 1, 1))), "q1", "Q?", "x", "y")
    rates = win_rates(biased)  # a judge that always says "Answer 1" splits 50/50
    assert all(rates[c]["a"] == 0.5 for c in CRITERIA)


@pytest.fixture
def tiny_bench(tmp_path):
    corpus = [
        {"id": "p1", "title": "Bees", "text": "Beekeepers sell honey at farmers markets in Ohio."},
        {
            "id": "p2",
            "title": "Wax",
            "text": "Beeswax from the hive is sold to candle makers in Ohio.",
        },
    ]
    questions = [
        {
            "id": "q1",
            "question": "How do beekeepers sell hive products?",
            "answers": [],
            "gold_ids": [],
            "type": "qfs",
        },
        {"id": "q2", "question": "Who buys beeswax?", "answers": [], "gold_ids": [], "type": "qfs"},
    ]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in corpus))
    (tmp_path / "questions.jsonl").write_text("\n".join(json.dumps(r) for r in questions))
    return tmp_path


def test_run_judge_end_to_end(tiny_bench, bow_embed, tmp_path) -> None:
    def answer(prompt: str) -> str:
        if "You compare two answers" in prompt:
            first = prompt.split("Answer 1:")[1].split("Answer 2:")[0]
            return verdict(*([1] * 4 if "FGRAG" in first else [2] * 4))
        if "List the entities" in prompt:
            return "beekeepers\nhive products"
        if "You answer questions from the notes" in prompt:
            return "FGRAG answer"
        if "You answer questions from the passages" in prompt:
            return "naive answer"
        if "Task: read the text" in prompt:
            name = re.search(r"Text: (\w+)", prompt.split("Example")[-1].split("Output:")[1])
            who = name.group(1) if name else "Ohio"
            return f'("entity"<|>{who}<|>thing<|>Mentioned in the text.)<|DONE|>'
        if "Answer with one word" in prompt:
            return "NO"
        return "- a question?"

    llm = ScriptedLLM(answer, model_name="scripted-strong")
    report = run_judge(
        tiny_bench,
        "fgrag",
        "naive",
        limit=2,
        llm=llm,
        embed_model=bow_embed,
        cache_dir=tmp_path / "cache",
        show_progress=False,
    )
    assert report["questions"] == 2 and report["documents"] == 2
    rates = report["win_rates"]
    assert all(rates[c]["a"] == 1.0 and rates[c]["judged"] == 4 for c in CRITERIA)
    assert report["judge_calls"] == 4
    assert report["a_stats"]["llm_calls_index"] > 0  # the LLM extraction ran
    assert report["a_stats"]["llm_calls_query"] > report["b_stats"]["llm_calls_query"] == 2
    table = format_judge_table(report)
    assert "| overall | 100.0% | 0.0% | 4 | 0 |" in table
    assert "| naive |" in table and "judge: 4 calls" in table
    with pytest.raises(KeyError):
        run_judge(tiny_bench, "fgrag", "graphrag", llm=llm, embed_model=bow_embed)
