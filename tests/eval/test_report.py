"""The results page is generated from runner reports and must match them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_graphrag_ext.cli import build_parser
from llama_index_graphrag_ext.eval.report import render_page, render_section, reproduce_command

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "docs" / "assets" / "bench"


def _report(**run) -> dict:
    base = {
        "data": "../shared/benchmarks/musique-100",
        "corpus_passages": 1890,
        "corpus_questions": 100,
        "sampled": True,
        "top_k": 10,
        "answer": True,
        "options": {"pairs": "3", "alpha": "0.5"},
        "embed_model": "MiniLM",
    }
    base.update(run)
    return {
        "bench": "musique-100",
        "questions": 10,
        "passages": 40,
        "methods": {
            "dense": {"tier": "llm-free", "recall@5": 0.5, "info": {"train_seconds": 1.25}},
            "qcg": {"tier": "llm", "recall@5": 0.6, "llm": "SmolLM2"},
        },
        "run": base,
    }


def test_reproduce_command_parses_back_to_the_same_run():
    command = reproduce_command(_report()).replace("\\\n", " ").split()
    assert command[0] == "graphrag-ext"
    args = build_parser().parse_args(command[1:])
    assert args.data == "musique-100"  # the bundled set, by name: runs from any folder
    assert args.methods == "dense,qcg"
    assert args.limit == 10 and args.max_passages == 40 and args.answer
    assert sorted(args.set) == ["alpha=0.5", "pairs=3"]


def test_full_corpus_run_needs_no_sampling_flags():
    report = _report(sampled=False, answer=False, options={})
    report["questions"], report["passages"] = 100, 1890
    command = reproduce_command(report)
    assert "--limit" not in command and "--max-passages" not in command
    assert "--answer" not in command and "--set" not in command
    assert "--no-titles" not in command


def test_a_run_without_titles_says_so_and_reproduces():
    report = _report(titles_dropped=True)
    command = reproduce_command(report).replace("\\\n", " ").split()
    assert build_parser().parse_args(command[1:]).no_titles
    page = render_section(Path("01-run.json"), report, None)
    assert "titles dropped" in page


def test_a_run_over_joined_passages_says_so_and_reproduces():
    report = _report(passages_joined=8, sample_passages=320)
    command = reproduce_command(report).replace("\\\n", " ").split()
    args = build_parser().parse_args(command[1:])
    # The sample is drawn before joining: its size, not the documents', reproduces it.
    assert args.join_passages == 8 and args.max_passages == 320
    page = render_section(Path("01-run.json"), report, None)
    assert "each a document of 8 joined passages" in page


def test_section_shows_table_facts_and_plot(tmp_path):
    path = tmp_path / "01-run.json"
    path.write_text(json.dumps({**_report(), "title": "A run", "note": "Bounded."}))
    page = render_page([path], plots_dir=tmp_path / "plots", page_dir=tmp_path)
    assert "## A run" in page and "Bounded." in page
    assert "| dense | llm-free |" in page and "0.500" in page
    assert "train_seconds=1.25" in page and "SmolLM2" in page
    assert "(plots/01-run.png)" in page
    assert (tmp_path / "plots" / "01-run.png").stat().st_size > 0


def test_rejects_files_that_are_not_reports(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"cells": {}}')
    with pytest.raises(ValueError, match="not a benchmark runner report"):
        render_page([path])


def test_committed_results_page_is_generated_from_the_committed_reports():
    reports = sorted(BENCH.glob("*.json"))
    assert reports, "docs/assets/bench holds the runner reports"
    page = render_page(reports, plots_dir=BENCH, page_dir=ROOT / "docs", write_plots=False)
    committed = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert committed == page, (
        "docs/results.md is stale: run `graphrag-ext report docs/assets/bench/*.json "
        "--out docs/results.md --plots docs/assets/bench`"
    )
    for report in reports:
        assert (BENCH / (report.stem + ".png")).exists()


def test_reports_without_per_question_outcomes_render_without_intervals(tmp_path):
    from llama_index_graphrag_ext.eval.table import DELTA_HEADER

    path = tmp_path / "01-old.json"
    path.write_text(json.dumps(_report()))
    page = render_page([path])
    assert "| dense | llm-free |" in page and DELTA_HEADER not in page
    assert "not a claim" not in page and "window" not in page


def test_recall_against_cost_is_drawn_when_two_methods_have_costs(tmp_path):
    from llama_index_graphrag_ext.eval.plot import plot_cost

    report = _report()
    for name, seconds in (("dense", 1.2), ("qcg", 3.4)):
        report["methods"][name].update(index_seconds=seconds, query_ms_p50=20.0)
    assert plot_cost(report, tmp_path / "cost.png") and (tmp_path / "cost.png").stat().st_size
    del report["methods"]["qcg"]
    assert not plot_cost(report, tmp_path / "none.png") and not (tmp_path / "none.png").exists()
