"""The runner on tiny real slices, with the deterministic embedder and the scripted LLM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llama_index.core import Settings
from support import ScriptedLLM

from llama_index_graphrag_ext.baselines import BM25Retriever
from llama_index_graphrag_ext.eval.registry import (
    REGISTRY,
    BenchSystem,
    MethodRegistry,
    MethodSpec,
)
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


def _registry_with_llm_method():
    registry = MethodRegistry()

    def build(documents, ctx):
        llm = ctx.llm()
        llm.complete("summarise the corpus")  # one call at index time
        retriever = BM25Retriever.from_documents(documents, similarity_top_k=ctx.top_k)

        class Answerer:
            def __call__(self, question):
                answer = llm.complete(question).text
                ranked, _ = BenchSystem(retriever).retrieve(question)
                return answer, ranked

        return BenchSystem(retriever=retriever, answerer=Answerer(), info={"note": "scripted"})

    registry.register(MethodSpec("scripted-bm25", "llm", build, "BM25 plus a scripted LLM"))
    registry.register(
        MethodSpec(
            "bm25-(?P<k1>[0-9.]+)",
            "llm-free",
            lambda docs, ctx: BenchSystem(
                BM25Retriever.from_documents(
                    docs, similarity_top_k=ctx.top_k, k1=ctx.option("k1", 1.5)
                )
            ),
        )
    )
    return registry


def test_runner_report_shape_and_llm_accounting(musique_slice, settings_embed, monkeypatch):
    llm = ScriptedLLM(default="G. Stanley Hall")
    monkeypatch.setattr(Settings, "_llm", llm)
    registry = _registry_with_llm_method()
    config = RunConfig(
        data=str(musique_slice),
        methods=["scripted-bm25", "bm25-1.2"],
        answer=True,
        show_progress=False,
    )
    report = run_benchmark(config, registry)
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
    assert 0 < report["methods"]["bm25-1.2"]["recall@5"] <= 1
    json.dumps(report)  # JSON-ready
    table = format_table(report)
    assert "| scripted-bm25 | llm |" in table and "EM" in table


def test_runner_can_drop_titles_and_says_so(musique_slice, settings_embed):
    seen = []

    def titles(documents, ctx):
        seen.extend(d.metadata.get("title") for d in documents)
        return BenchSystem(BM25Retriever.from_documents(documents))

    registry = MethodRegistry()
    registry.register(MethodSpec("titles", "llm-free", titles))
    config = RunConfig(
        data=str(musique_slice), methods=["titles"], no_titles=True, show_progress=False
    )
    report = run_benchmark(config, registry)
    assert not any(seen) and len(seen) == 60
    assert report["bench"] == f"{musique_slice.name}-no-titles"
    assert report["run"]["titles_dropped"] is True


def test_runner_can_join_passages_into_long_documents(musique_slice, settings_embed):
    seen = []

    def docs(documents, ctx):
        seen.extend(documents)
        return BenchSystem(BM25Retriever.from_documents(documents))

    registry = MethodRegistry()
    registry.register(MethodSpec("docs", "llm-free", docs))
    config = RunConfig(
        data=str(musique_slice), methods=["docs"], join_passages=6, show_progress=False
    )
    report = run_benchmark(config, registry)
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


def test_runner_records_a_failing_method_and_goes_on(musique_slice, settings_embed):
    registry = MethodRegistry()

    def broken(documents, ctx):
        raise RuntimeError("no model")

    registry.register(MethodSpec("broken", "llm-free", broken))
    registry.register(
        MethodSpec("ok", "llm-free", lambda d, c: BenchSystem(BM25Retriever.from_documents(d)))
    )
    report = run_benchmark(
        RunConfig(data=str(musique_slice), methods=["broken", "ok"], show_progress=False), registry
    )
    assert report["methods"]["broken"]["error"] == "RuntimeError: no model"
    assert report["methods"]["ok"]["recall@2"] is not None
    assert "error: RuntimeError" in format_table(report)


def test_unknown_method_fails_before_any_work(musique_slice):
    with pytest.raises(KeyError, match="unknown method 'nope'"):
        run_benchmark(RunConfig(data=str(musique_slice), methods=["nope"]), MethodRegistry())


def test_an_unknown_name_lists_the_methods_as_users_type_them():
    with pytest.raises(KeyError) as caught:
        REGISTRY.resolve("nope")
    message = str(caught.value)
    # Names a user can type, not the registry's regular expressions.
    for name in ("dense", "li-hybrid", "cue-0.0", "cue-<alpha>", "chainrag-retriever"):
        assert f" {name}," in message
    assert "(?P<" not in message and "\\." not in message


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
