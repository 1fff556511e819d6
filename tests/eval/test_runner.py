"""The runner on tiny real slices, with the deterministic embedder and the scripted LLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llama_index.core import Settings
from support import ScriptedLLM

from llama_index_graphrag_ext.baselines import BM25Retriever
from llama_index_graphrag_ext.core.config import ConfigError
from llama_index_graphrag_ext.eval import runner
from llama_index_graphrag_ext.eval.registry import BenchSystem, Resolved
from llama_index_graphrag_ext.eval.runner import RunConfig, run_benchmark
from llama_index_graphrag_ext.eval.table import format_table

KEYS = {
    "tier",
    "recall@2",
    "recall@5",
    "recall@10",
    "all@5",
    "index_seconds",
    "query_ms_p50",
    "query_ms_p95",
    "llm_calls_index",
    "llm_tokens_index",
    "llm_calls_query",
    "llm_tokens_query",
    "peak_rss_mb",
}


@pytest.fixture
def settings_embed(bow_embed, monkeypatch):
    monkeypatch.setattr(Settings, "_embed_model", bow_embed)
    return bow_embed


@pytest.fixture
def custom_methods(monkeypatch):
    """``add(name, tier, build)``: a method the runner builds with ``build(documents, ctx)``."""
    builders: dict = {}
    real_resolve, real_build, real_check = runner.resolve, runner.build_system, runner.check_options

    def resolve(name, options=None):
        return (
            Resolved(name, builders[name][0]) if name in builders else real_resolve(name, options)
        )

    def build_system(name, documents, ctx):
        if name in builders:
            return builders[name][1](documents, ctx)
        return real_build(name, documents, ctx)

    def check_options(names, options):
        real_check([n for n in names if n not in builders], options)

    monkeypatch.setattr(runner, "resolve", resolve)
    monkeypatch.setattr(runner, "build_system", build_system)
    monkeypatch.setattr(runner, "check_options", check_options)
    return lambda name, tier, build: builders.__setitem__(name, (tier, build))


def _scripted_bm25(documents, ctx):
    llm = ctx.llm()
    llm.complete("summarise the corpus")  # one call at index time
    retriever = BM25Retriever.from_documents(documents, similarity_top_k=ctx.top_k)

    def answer(question):
        ranked, _ = BenchSystem(retriever).retrieve(question)
        return llm.complete(question).text, ranked

    return BenchSystem(retriever=retriever, answerer=answer, info={"note": "scripted"})


def test_runner_report_shape_and_llm_accounting(
    musique_slice, settings_embed, monkeypatch, custom_methods
):
    llm = ScriptedLLM(default="G. Stanley Hall")
    monkeypatch.setattr(Settings, "_llm", llm)
    custom_methods("scripted-bm25", "llm", _scripted_bm25)
    config = RunConfig(
        data=str(musique_slice),
        methods=["scripted-bm25", "bm25/k1=1.2"],
        answer=True,
        show_progress=False,
    )
    report = run_benchmark(config)
    assert report["bench"] == musique_slice.name
    assert report["questions"] == 8 and report["passages"] == 60
    scripted = report["methods"]["scripted-bm25"]
    assert set(scripted) >= KEYS
    assert scripted["llm_calls_index"] == 1
    assert scripted["llm_calls_query"] == 8  # one answer per question, nothing else
    assert scripted["llm_tokens_query"] > 0
    # the first question's gold answer is G. Stanley Hall: EM 1/8 at least
    assert scripted["em"] >= 1 / 8 and 0 <= scripted["f1"] <= 1
    assert scripted["info"] == {"note": "scripted"}
    assert 0 < report["methods"]["bm25/k1=1.2"]["recall@5"] <= 1
    assert report["methods"]["bm25/k1=1.2"]["info"]["config"] == "default + k1=1.2"
    json.dumps(report)  # JSON-ready
    table = format_table(report)
    assert "| scripted-bm25 | llm |" in table and "EM" in table


def test_runner_can_drop_titles_and_says_so(musique_slice, settings_embed, custom_methods):
    seen = []

    def titles(documents, ctx):
        seen.extend(d.metadata.get("title") for d in documents)
        return BenchSystem(BM25Retriever.from_documents(documents))

    custom_methods("titles", "llm-free", titles)
    config = RunConfig(
        data=str(musique_slice), methods=["titles"], no_titles=True, show_progress=False
    )
    report = run_benchmark(config)
    assert not any(seen) and len(seen) == 60
    assert report["bench"] == f"{musique_slice.name}-no-titles"
    assert report["run"]["titles_dropped"] is True


def test_runner_can_join_passages_into_long_documents(
    musique_slice, settings_embed, custom_methods
):
    seen = []

    def docs(documents, ctx):
        seen.extend(documents)
        return BenchSystem(BM25Retriever.from_documents(documents))

    custom_methods("docs", "llm-free", docs)
    config = RunConfig(
        data=str(musique_slice), methods=["docs"], join_passages=6, show_progress=False
    )
    report = run_benchmark(config)
    assert len(seen) == 10 and report["passages"] == 10
    assert report["bench"] == f"{musique_slice.name}-joined6"
    assert report["run"]["passages_joined"] == 6 and report["run"]["sampled"] is False
    # Gold is the documents holding the gold passages: a gold passage's words rank its
    # document, and the rankings are of document ids.
    ranked = [o["ranked"] for o in report["methods"]["docs"]["per_question"]]
    assert all(
        r and all(d.startswith(report["bench"].rsplit("-", 1)[0]) for d in r) for r in ranked
    )
    assert report["methods"]["docs"]["recall@2"] > 0.5


def test_runner_records_a_failing_method_and_goes_on(musique_slice, settings_embed, custom_methods):
    def broken(documents, ctx):
        raise RuntimeError("no model")

    custom_methods("broken", "llm-free", broken)
    report = run_benchmark(
        RunConfig(data=str(musique_slice), methods=["broken", "bm25"], show_progress=False)
    )
    assert report["methods"]["broken"]["error"] == "RuntimeError: no model"
    assert report["methods"]["bm25"]["recall@2"] is not None
    assert "error: RuntimeError" in format_table(report)


def test_unknown_methods_and_settings_fail_before_any_work(musique_slice):
    for methods, options, message in (
        (["dense", "nope"], {}, "unknown method 'nope'; methods: dense, bm25, li-hybrid, qcg"),
        (["dense", "qcg:nope"], {}, "no preset 'nope'"),
        (["dense", "qcg"], {"gama": "1"}, "--set gama"),
    ):
        config = RunConfig(data=str(musique_slice), methods=methods, options=options)
        with pytest.raises(ConfigError, match=message):
            run_benchmark(config)


def test_dense_and_bm25_with_the_real_embedder(musique_slice, minilm, monkeypatch):
    monkeypatch.setattr(Settings, "_embed_model", minilm)
    report = run_benchmark(
        RunConfig(
            data=str(musique_slice), methods=["dense", "bm25"], show_progress=False, floor=True
        )
    )
    dense, bm25 = report["methods"]["dense"], report["methods"]["bm25"]
    # On this slice of 60 passages, both find most gold passages in their top 10.
    assert dense["recall@10"] > 0.6 and bm25["recall@10"] > 0.5
    assert dense["llm_calls_index"] == dense["llm_calls_query"] == 0
    assert report["run"]["embed_floor_seconds"] > 0 and dense["index_vs_embed"] > 0
    # The run says how many passages exceed MiniLM's 256 word pieces (and that they were pooled).
    window = report["run"]["embed_window"]
    assert window["tokens"] == 256 and window["pooled"] is True
    assert 0 <= window["passages_over"] <= 60
    assert window["stats"]["texts_pooled"] >= window["passages_over"]
    assert f"{window['passages_over']} of 60 passages exceed" in format_table(report)


def test_paired_intervals_against_dense(musique_slice, settings_embed):
    from llama_index_graphrag_ext.eval.report import render_section
    from llama_index_graphrag_ext.eval.table import DELTA_HEADER

    report = run_benchmark(
        RunConfig(data=str(musique_slice), methods=["dense", "bm25"], show_progress=False)
    )
    dense, bm25 = report["methods"]["dense"]["vs_dense"], report["methods"]["bm25"]["vs_dense"]
    assert (dense["mean"], dense["low"], dense["high"], dense["n"]) == (0, 0, 0, 8)
    assert "| dense | llm-free |" in format_table(report)
    difference = report["methods"]["bm25"]["recall@5"] - report["methods"]["dense"]["recall@5"]
    assert bm25["mean"] == pytest.approx(difference, abs=1e-4)
    assert bm25["low"] <= bm25["mean"] <= bm25["high"] and bm25["metric"] == "recall@5"
    table = format_table(report)
    assert DELTA_HEADER in table and "not a claim" in table
    row = next(line for line in table.splitlines() if line.startswith("| bm25 |"))
    assert f"{bm25['mean']:+.3f} [{bm25['low']:+.3f}, {bm25['high']:+.3f}]" in row
    section = render_section(Path("run.json"), report, None)
    assert DELTA_HEADER in section and "not a claim" in section
    # Without dense in the run there is nothing to compare with: no column.
    alone = run_benchmark(RunConfig(data=str(musique_slice), methods=["bm25"], show_progress=False))
    assert "vs_dense" not in alone["methods"]["bm25"]
    assert DELTA_HEADER not in format_table(alone)
