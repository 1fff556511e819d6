"""Benchmark registrations: ``chainrag-retriever`` (LLM-free), its edge ablations, ``chainrag``."""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.schema import Document

from ...chainrag.index import SentenceGraphIndex
from ...chainrag.sentence_graph import EDGE_KINDS
from ...core.llm.cache import LLMCache
from ...core.nodes import PassageParser, dedupe_by_source
from ..registry import BenchContext, BenchSystem, register_method


def _index(documents: Sequence[Document], ctx: BenchContext) -> SentenceGraphIndex:
    return SentenceGraphIndex.from_documents(
        documents,
        embed_model=ctx.embed_model,
        transformations=[PassageParser()],
        show_progress=ctx.show_progress,
        alpha=ctx.option("alpha", 0.6),
        m=ctx.option("m", 10),
        window=ctx.option("window", 3),
    )


def _info(index: SentenceGraphIndex, kinds: Sequence[str]) -> dict:
    sg = index.sentence_graph
    # Counted from the stored matrices only: the exact EC pair count needs K @ K.T,
    # whose size grows with the square of a frequent entity's sentences.
    return {
        "sentences": len(sg),
        "edges": {"SS": sg.num_edges("SS"), "SA": sg.num_edges("SA")},
        "ec": sg.ec_summary(),
        "edge_kinds_followed": list(kinds),
    }


@register_method(
    "chainrag-retriever(?:-no-(?P<drop>ec|ss|sa))?",
    "llm-free",
    "ChainRAG sentence graph: top-100 -> 3 seeds -> 1-hop EC/SS/SA expansion (-no-X: ablation)",
)
def build_retriever(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    drop = ctx.option("drop", "").upper()
    kinds = [k for k in EDGE_KINDS if k != drop]
    index = _index(documents, ctx)
    retriever = index.as_retriever(
        similarity_top_k=ctx.top_k,
        seed_k=ctx.option("seed_k", 3),
        candidate_k=ctx.option("candidate_k", 100),
        hops=ctx.option("hops", 1),
        word_budget=ctx.option("word_budget", 3000),
        rank=ctx.option("rank", "graph"),
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
