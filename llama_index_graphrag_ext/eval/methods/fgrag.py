"""FG-RAG in the benchmark runner.

- ``fgrag``: the LLM-free graph (spaCy entities + sentence co-occurrence) and
  context-aware entity expansion; every passage the expansion reached is ranked
  by its similarity to the question plus its weighted description evidence,
  and a short list is filled from passage similarity, counted in the report's
  ``info`` (see [`FGRAGRetriever`][llama_index_graphrag_ext.fgrag.retriever.FGRAGRetriever]).
- ``fgrag-llm``: the same retrieval over a graph extracted by the configured
  LLM (the embedded SmolLM2 cannot write extraction tuples, so with it the graph
  falls back to co-occurrence, and the report's ``info`` says so).

Options (``--set key=value``): ``top_n``, ``strong_top_n``,
``description_budget``, ``per_entity``, ``max_depth``, ``max_query_entities``,
``include_query`` (bool), ``use_strong`` (bool), ``chunk_ranking``
(``combined`` / ``evidence``), ``evidence_weight``, ``fill`` (``similarity`` /
``none`` / ``raise``), ``long_chunks`` (``best-window`` / ``pooled``), ``sentence_splitter`` (``rule`` / ``model``: the
co-occurrence extractor's). Each benchmark passage is one
chunk (the runner's convention), not the paper's 1200-token chunks.
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.schema import Document

from ...core.nodes import PassageParser
from ...fgrag.extract import CooccurrenceExtractor, default_extractor
from ...fgrag.index import FGRAGIndex
from ..registry import BenchContext, BenchSystem, query_engine_answerer, register_method


def _optional_int(ctx: BenchContext, name: str) -> int | None:
    value = ctx.option(name, "")
    return int(value) if str(value).strip() not in ("", "none", "None") else None


def _retriever(index: FGRAGIndex, ctx: BenchContext):
    return index.as_retriever(
        similarity_top_k=ctx.top_k,
        top_n=ctx.option("top_n", 20),
        strong_top_n=ctx.option("strong_top_n", 20),
        description_budget=ctx.option("description_budget", 75),
        per_entity=_optional_int(ctx, "per_entity"),
        max_depth=_optional_int(ctx, "max_depth"),
        max_query_entities=ctx.option("max_query_entities", 9),
        include_query_as_entity=ctx.option("include_query", True),
        use_strong_context=ctx.option("use_strong", True),
        chunk_ranking=ctx.option("chunk_ranking", "combined"),
        evidence_weight=float(ctx.option("evidence_weight", 0.3)),
        fill=ctx.option("fill", "similarity"),
        long_chunks=ctx.option("long_chunks", "best-window"),
    )


def _build(
    documents: Sequence[Document], ctx: BenchContext, extractor, steps=None
) -> tuple[BenchSystem, FGRAGIndex]:
    index = FGRAGIndex.from_documents(
        documents,
        kg_extractors=[extractor],
        embed_model=ctx.embed_model,
        transformations=[PassageParser()],
        show_progress=ctx.show_progress,
        llm_steps=steps,
    )
    info = index.stats()
    stats = getattr(extractor, "stats", None)
    if stats:
        info["extraction"] = stats
    retriever = _retriever(index, ctx)
    info["retrieval"] = retriever.stats  # live counts: read when the report is written
    return BenchSystem(retriever=retriever, info=info, steps=[index.llm_steps]), index


@register_method(
    "fgrag",
    "llm-free",
    "FG-RAG: spaCy co-occurrence graph, context-aware entity expansion, chunks by description",
)
def build_fgrag(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    default = CooccurrenceExtractor.model_fields["sentence_splitter"].default
    splitter = ctx.option("sentence_splitter", default)
    return _build(documents, ctx, CooccurrenceExtractor(sentence_splitter=splitter))[0]


@register_method(
    "fgrag-llm",
    "llm",
    "FG-RAG over an LLM-extracted graph (LLM-free, and said so, with the embedded LLM)",
)
def build_fgrag_llm(documents: Sequence[Document], ctx: BenchContext) -> BenchSystem:
    from ...core.llm import LLMSteps

    steps = LLMSteps("FGRAGIndex")
    cache = str(ctx.cache_dir / "fgrag-extract.sqlite") if ctx.cache_dir else None
    extractor = default_extractor(
        ctx.llm(),
        steps=steps,
        cache_path=cache,
        on_llm_failure=ctx.option("on_llm_failure", "fallback"),
    )  # the embedded SmolLM2 cannot write the records: co-occurrence, planned and logged
    system, index = _build(documents, ctx, extractor, steps)
    # The full tier answers with the paper's map-reduce (used when the runner answers).
    engine = index.as_query_engine(
        llm=ctx.llm(),
        max_query_entities=ctx.option("max_query_entities", 9),
        max_questions=ctx.option("max_questions", 10),
        cache_path=str(ctx.cache_dir / "fgrag-query.sqlite") if ctx.cache_dir else None,
        on_llm_failure=ctx.option("on_llm_failure", "fallback"),
    )
    system.answerer = query_engine_answerer(engine)
    system.steps.append(engine.llm_steps)
    return system
