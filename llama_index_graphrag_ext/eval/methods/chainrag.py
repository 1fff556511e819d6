"""Benchmark registrations: ``chainrag-retriever`` (LLM-free), its edge ablations, ``chainrag``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import Document

from ...chainrag.index import SentenceGraphIndex
from ...chainrag.retriever import DEFAULT_EDGE_WEIGHTS
from ...chainrag.sentence_graph import EDGE_KINDS
from ...core.llm.cache import LLMCache
from ...core.nodes import PassageParser, dedupe_by_source
from ...core.text.parallel import available_processes
from ..registry import BenchContext, BenchSystem, register_method


def index_options(ctx: BenchContext) -> dict[str, Any]:
    """The index settings and their ``--set`` options (runner and CLI alike)."""
    return {
        "alpha": ctx.option("alpha", 0.6),
        "m": ctx.option("m", 10),
        "window": ctx.option("window", 3),
        "key_importance": ctx.option("key_importance", "idf"),
        "key_cut": ctx.option("key_cut", "global"),
        "max_df": ctx.option("max_df", 20),
        "keep_rarest": ctx.option("keep_rarest", True),
        # spaCy in worker processes: the same graph, built faster on several cores.
        "nlp_processes": ctx.option("nlp_processes", available_processes()),
    }


def _index(documents: Sequence[Document], ctx: BenchContext) -> SentenceGraphIndex:
    return SentenceGraphIndex.from_documents(
        documents,
        embed_model=ctx.embed_model,
        transformations=[PassageParser()],
        show_progress=ctx.show_progress,
        **index_options(ctx),
    )


def _info(index: SentenceGraphIndex, kinds: Sequence[str]) -> dict:
    sg = index.sentence_graph
    # Counted from the stored matrices only: the exact EC pair count needs K @ K.T,
    # whose size grows with the square of a frequent entity's sentences.
    return {
        "sentences": len(sg),
        "edges": {"SS": sg.num_edges("SS"), "SA": sg.num_edges("SA")},
        "ec": sg.ec_summary(),
        "key_cut": {k: sg.params.get(k) for k in ("alpha", "importance", "cut", "max_df")},
        "edge_kinds_followed": list(kinds),
    }


@register_method(
    "chainrag-retriever(?:-no-(?P<drop>ec|ss|sa))?",
    "llm-free",
    "ChainRAG sentence graph: top-100 -> 3 seeds -> EC/SS/SA expansion -> one ranking "
    "(-no-X: edge ablation)",
)
def build_retriever(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    """One setting for both dev sets (chosen on 2wiki-101, verified on musique-100).

    Options (``--set``): the index's ``alpha``, ``m``, ``window``,
    ``key_importance``, ``key_cut``, ``max_df``, ``keep_rarest``,
    ``nlp_processes`` (spaCy worker processes; default: the CPUs, at most 4); the
    retriever's ``seed_k``, ``candidate_k``, ``hops``, ``word_budget``,
    ``rank`` (``one`` / ``graph``), ``neighbor_score`` (``propagate`` /
    ``question``) and ``w_ec`` / ``w_ss`` / ``w_sa`` (edge weights).
    """
    drop = ctx.option("drop", "").upper()
    kinds = [k for k in EDGE_KINDS if k != drop]
    index = _index(documents, ctx)
    weights = {k: ctx.option(f"w_{k.lower()}", DEFAULT_EDGE_WEIGHTS[k]) for k in EDGE_KINDS}
    retriever = index.as_retriever(
        similarity_top_k=ctx.top_k,
        seed_k=ctx.option("seed_k", 3),
        candidate_k=ctx.option("candidate_k", 100),
        hops=ctx.option("hops", 1),
        word_budget=ctx.option("word_budget", 3000),
        rank=ctx.option("rank", "one"),
        neighbor_score=ctx.option("neighbor_score", "propagate"),
        edge_weights=weights,
        edge_kinds=kinds,
    )
    return BenchSystem(retriever=retriever, info=_info(index, kinds))


@register_method(
    "chainrag",
    "llm",
    "ChainRAG engine: decompose, graph retrieval with sufficiency checks, rewrite, integrate",
)
def build_engine(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    index = _index(documents, ctx)
    llm = ctx.llm()
    if llm is None:
        raise ValueError("the chainrag engine needs an LLM (--llm embedded or a provider)")
    cache = LLMCache(ctx.cache_dir / "chainrag-llm.sqlite") if ctx.cache_dir else None
    engine = index.as_query_engine(
        llm=llm,
        integration=ctx.option("integration", "context"),
        max_hops=ctx.option("max_hops", 3),
        cache=cache,
        on_llm_failure=ctx.option("on_llm_failure", "fallback"),
    )
    calls: list[int] = []

    def answer(question: str) -> tuple[str, list[str]]:
        response = engine.query(question)
        calls.append(response.metadata["usage"]["calls"])
        return str(response), dedupe_by_source(response.source_nodes)

    retriever = index.as_retriever(similarity_top_k=ctx.top_k)
    info = _info(index, EDGE_KINDS)
    info["engine_llm_calls"] = calls  # filled while the runner asks questions
    return BenchSystem(retriever=retriever, answerer=answer, info=info, steps=[engine.llm_steps])
