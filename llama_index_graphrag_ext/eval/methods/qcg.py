"""Benchmark registrations: ``qcg`` (LLM query-answer nodes) and the LLM-free stand-ins.

``qcg-sentences`` runs the ``sentences`` preset (chosen on 2wiki-101: report it
on musique-100); ``qcg-sentences-tuned-musique`` runs ``sentences-tuned-musique``
(chosen on musique-100: report it on 2wiki-101).

Options (``graphrag-ext bench --set key=value``), all optional:

* all: ``k``, ``n`` (max query nodes), ``gamma``, ``hops``, ``epsilon``,
  ``aggregator``, ``exclude_same_chunk``, ``fill``, ``chunk_vectors``,
  ``long_chunks`` (``best-window`` / ``pooled``);
* ``qcg-sentences``: ``title_prefix``, ``splitter`` (``rule`` / ``spacy``),
  ``min_chars``, ``sentence_alpha``;
* ``qcg``: ``pairs`` (``M``, default 20; use e.g. ``pairs=3`` with the embedded
  SmolLM2 to bound the work), ``alpha``, ``format`` (``auto`` / ``json`` /
  ``lines``), ``concurrency``, ``preset`` (``multihop-rag`` / ``lihuaworld``).

With ``--cache-dir`` ``qcg`` keeps every generated answer in
``<cache-dir>/qcg-doc2query.sqlite``, so a rerun makes no LLM call. Bound a slow generator with ``--max-passages`` (a corpus sample,
reported as such in the output) and ``pairs``.

Each method starts from its preset (``sentences`` / ``sentences-tuned-musique`` /
``multihop-rag``, see :data:`~llama_index_graphrag_ext.qcg.index.PRESETS`) with
``K`` set to the runner's ``top_k``; ``chunk_weight`` can be overridden too. The
LLM-free methods report the retriever's fill counts as ``info.retriever_stats``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from llama_index.core.llms import LLM
from llama_index.core.schema import Document

from ...core.nodes import PassageParser
from ...qcg.generator import Doc2QueryGenerator, SentenceQueryGenerator
from ...qcg.index import PRESETS, QueryCentricGraphIndex
from ..registry import BenchContext, BenchSystem, register_method


def _retrieval_options(ctx: BenchContext, preset: str) -> dict:
    """``--set`` overrides of the preset's knobs; K is the runner's ``top_k``."""
    base = PRESETS[preset]
    return {
        "k": ctx.option("k", base["k"]),
        "max_query_nodes": ctx.option("n", base["max_query_nodes"]),
        "gamma": ctx.option("gamma", float(base["gamma"])),
        "epsilon": ctx.option("epsilon", 1.0),
        "hops": ctx.option("hops", base["hops"]),
        "aggregator": ctx.option("aggregator", "mean"),
        "exclude_same_chunk": ctx.option("exclude_same_chunk", base["exclude_same_chunk"]),
        "chunk_weight": ctx.option("chunk_weight", float(base["chunk_weight"])),
        "fill": ctx.option("fill", bool(base["fill"])),
        "chunk_vectors": ctx.option("chunk_vectors", base["chunk_vectors"]),
        "long_chunks": ctx.option("long_chunks", base["long_chunks"]),
        "similarity_top_k": ctx.top_k,
    }


def _info(index: QueryCentricGraphIndex) -> dict:
    layer = index.layer
    return {
        "query_nodes": len(layer),
        "chunks": len(index),
        "knn_edges": int((layer.knn >= 0).sum()),
        "build": dict(index.build_stats),
        "params": index.config(),
    }


#: The LLM-free method names and the preset each runs.
SENTENCE_PRESETS = {
    "qcg-sentences": "sentences",
    "qcg-sentences-tuned-musique": "sentences-tuned-musique",
}


def sentence_generator(ctx: BenchContext) -> SentenceQueryGenerator:
    """The LLM-free query-node generator with its ``--set`` options."""
    return SentenceQueryGenerator(
        title_prefix=ctx.option("title_prefix", True),
        splitter=ctx.option("splitter", "rule"),
        min_chars=ctx.option("min_chars", 12),
        alpha=ctx.option("sentence_alpha", 1.0),
        vectors=ctx.option("sentence_vectors", "separate"),
        show_progress=ctx.show_progress,
    )


def doc2query_generator(
    ctx: BenchContext, llm: LLM | None, cache_path: str | None
) -> Doc2QueryGenerator:
    """The LLM's Doc2Query generator with its ``--set`` options."""
    return Doc2QueryGenerator(
        llm=llm,
        num_pairs=ctx.option("pairs", 20),
        alpha=ctx.option("alpha", 0.8),
        output_format=ctx.option("format", "auto"),
        max_concurrency=ctx.option("concurrency", 4),
        on_llm_failure=ctx.option("on_llm_failure", "fallback"),
        cache_path=cache_path,
        show_progress=ctx.show_progress,
    )


def _sentences_system(documents: Sequence[Document], ctx: BenchContext, preset: str) -> BenchSystem:
    generator = sentence_generator(ctx)
    index = QueryCentricGraphIndex.from_documents(
        documents,
        transformations=[PassageParser()],
        embed_model=ctx.embed_model,
        generator=generator,
        preset=preset,
        show_progress=ctx.show_progress,
        **_retrieval_options(ctx, preset),
    )
    retriever = index.as_retriever()
    info = _info(index)
    # The live counter (the report reads info after the questions): fills per run.
    info["retriever_stats"] = retriever._stats
    return BenchSystem(retriever=retriever, info=info)


@register_method(
    "qcg-sentences",
    "llm-free",
    "QCG-RAG with sentence query nodes (LLM-free; preset chosen on 2wiki-101)",
)
def build_qcg_sentences(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    return _sentences_system(documents, ctx, SENTENCE_PRESETS["qcg-sentences"])


@register_method(
    "qcg-sentences-tuned-musique",
    "llm-free",
    "QCG-RAG with sentence query nodes (LLM-free; preset chosen on musique-100)",
)
def build_qcg_sentences_musique(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    return _sentences_system(documents, ctx, SENTENCE_PRESETS["qcg-sentences-tuned-musique"])


def _cache_path(ctx: BenchContext) -> str | None:
    """The Doc2Query response cache under ``--cache-dir`` (none without one)."""
    return str(Path(ctx.cache_dir) / "qcg-doc2query.sqlite") if ctx.cache_dir else None


@register_method(
    "qcg",
    "embedded-llm",
    "QCG-RAG with LLM query-answer nodes (configured LLM; the embedded SmolLM2 by default)",
)
def build_qcg(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    llm = ctx.llm()
    if llm is None:
        raise ValueError("qcg needs an LLM (got --llm none); use qcg-sentences for LLM-free")
    preset = ctx.option("preset", "multihop-rag")
    generator = doc2query_generator(ctx, llm, _cache_path(ctx))
    index = QueryCentricGraphIndex.from_documents(
        documents,
        transformations=[PassageParser()],
        embed_model=ctx.embed_model,
        llm=llm,
        generator=generator,
        preset=preset,
        show_progress=ctx.show_progress,
        **_retrieval_options(ctx, preset),
    )
    info = _info(index)
    info["cache"] = generator.cache_path
    return BenchSystem(retriever=index.as_retriever(), info=info, steps=[index.llm_steps])
