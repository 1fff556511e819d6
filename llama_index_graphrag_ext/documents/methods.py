"""Every registered method as a persistent, updatable index of a user's files.

A method name is looked up in the one registry
(`REGISTRY` of [llama_index_graphrag_ext.eval.registry][]), whose pattern
groups (``cue-0.5`` -> alpha 0.5, ``lprag-pseudo-sage`` -> predictor sage)
become options like ``--set``. Each registered name belongs to one family
here, which knows how the method chunks by its paper's default, builds its
index from chunk nodes, loads it back, and makes its retriever with the same
options the benchmark adapters (``eval/methods/``) use. The graph methods'
indexes (``GraphIndexBase``) persist, load, insert and delete by themselves;
the baselines get the same through :mod:`.baselines`. Fusion names combine
several indexes at query time and are refused with a message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import LLM
from llama_index.core.schema import BaseNode

from ..eval.registry import REGISTRY, BenchContext, MethodSpec
from .errors import UserError


@dataclass(frozen=True)
class Chunking:
    """A family's default chunking (tokens, LlamaIndex's ``SentenceSplitter``) and its source."""

    size: int
    overlap: int
    source: str


#: The papers' chunking (digests in ``shared/papers/digests``). QCG-RAG and FG-RAG state
#: 1200/100 tokens; CUE-RAG and ChainRAG are silent (their experiments used
#: benchmark passages of about 100-135 tokens as chunks, hence 128); LP-RAG chunks
#: with an LLM (atomic chunks, used with a capable LLM) and its LLM-free stand-in
#: takes short 128-token chunks; the baselines take LlamaIndex's default.
CHUNKING = {
    "dense": Chunking(1024, 200, "LlamaIndex's SentenceSplitter default"),
    "bm25": Chunking(1024, 200, "LlamaIndex's SentenceSplitter default"),
    "li-hybrid": Chunking(1024, 200, "LlamaIndex's SentenceSplitter default"),
    "qcg": Chunking(1200, 100, "QCG-RAG §4.1: 1200-token chunks, 100 overlap"),
    "cue": Chunking(128, 0, "CUE-RAG is silent; its chunks were ~110-135-token passages (§4.1)"),
    "chainrag": Chunking(128, 0, "ChainRAG is silent; its chunks were benchmark passages"),
    "fgrag": Chunking(1200, 100, "FG-RAG §6.1: 1200-token chunks, 100 overlap"),
    "lprag": Chunking(128, 0, "LP-RAG §3.1 chunks with an LLM (atomic); LLM-free: 128 tokens"),
}

_FAMILIES = {
    "dense": "dense",
    "bm25": "bm25",
    "li-hybrid": "li-hybrid",
    "qcg-sentences": "qcg",
    "qcg-sentences-tuned-musique": "qcg",
    "qcg": "qcg",
    "cue": "cue",
    "chainrag": "chainrag",
    "fgrag": "fgrag",
    "fgrag-llm": "fgrag",
    "lprag": "lprag",
}


@dataclass
class Method:
    """A resolved method name: its registry spec, family and options."""

    name: str
    spec: MethodSpec
    family: str
    options: dict[str, str]

    @property
    def uses_llm(self) -> bool:
        """True when the method's index is built with the LLM (its registry tier is not llm-free)."""
        if self.family == "cue":
            return float(self.options.get("alpha", "0")) > 0
        # ChainRAG's index is LLM-free; its LLM works at query time (its engine).
        return self.spec.tier != "llm-free" and self.family != "chainrag"

    @property
    def chunking(self) -> Chunking:
        return CHUNKING[self.family]


def resolve(name: str, options: dict[str, str]) -> Method:
    """The method named ``name`` (any registry name or pattern match) with ``--set`` options.

    Raises:
        UserError: Unknown, or a fusion of several methods.
    """
    try:
        spec, captured = REGISTRY.resolve(name)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from exc
    key = spec.name
    if key.startswith(("fusion", "shared:")):
        raise UserError(
            f"{name} fuses several methods at query time and has no index of its own; "
            "index each part (e.g. --method cue-0.0, --method bm25) into its own folder"
        )
    family = _FAMILIES.get(key) or next(
        (f for prefix, f in _PREFIXES if key.startswith(prefix)), None
    )
    if family is None:
        raise UserError(f"{name}: no document index is defined for this method")
    return Method(name=name, spec=spec, family=family, options={**captured, **options})


_PREFIXES = (("cue-", "cue"), ("chainrag-retriever", "chainrag"), ("lprag", "lprag"))


def _ctx(method: Method, embed_model: BaseEmbedding, top_k: int, cache_dir: Path | None):
    return BenchContext(
        embed_model=embed_model, top_k=top_k, options=dict(method.options), cache_dir=cache_dir
    )


def _cache(cache_dir: Path | None, name: str) -> str | None:
    return str(cache_dir / name) if cache_dir is not None else None


# ------------------------------------------------------------------------------ chunking


def chunker(method: Method, llm: LLM | None, size: int, overlap: int, cache_dir: Path | None):
    """The node parser: LP-RAG's LLM atomic chunker with a capable LLM, else a sentence splitter."""
    from llama_index.core.node_parser import SentenceSplitter

    from ..core.llm import is_embedded

    if (
        method.family == "lprag"
        and method.uses_llm
        and llm is not None
        and not is_embedded(llm)
        and str(method.options.get("atomic", "true")).lower() in ("1", "true", "yes")
    ):
        from ..lprag.chunker import LLMAtomicChunker

        return LLMAtomicChunker(llm=llm, cache_path=_cache(cache_dir, "lprag-llm.sqlite"))
    return SentenceSplitter(chunk_size=size, chunk_overlap=overlap)


# ------------------------------------------------------------------------------ build / load


def build(
    method: Method,
    nodes: Sequence[BaseNode],
    embed_model: BaseEmbedding,
    llm: LLM | None,
    cache_dir: Path | None,
    show_progress: bool,
    steps: Any = None,
) -> Any:
    """Build the method's index from chunk nodes."""
    from .baselines import BM25Documents, DenseDocuments, HybridDocuments

    family, ctx = method.family, _ctx(method, embed_model, 10, cache_dir)
    nodes = list(nodes)
    common: dict[str, Any] = {"embed_model": embed_model, "show_progress": show_progress}
    if steps is not None:
        common["llm_steps"] = steps
    if family == "dense":
        return DenseDocuments.build(nodes, embed_model, show_progress)
    if family == "bm25":
        return BM25Documents.build(nodes)
    if family == "li-hybrid":
        return HybridDocuments.build(nodes, embed_model, show_progress)
    if family == "qcg":
        return _build_qcg(method, nodes, ctx, llm, common)
    if family == "cue":
        from ..cue.index import MultiPartiteIndex
        from ..eval.methods.cue import index_options

        alpha = float(method.options.get("alpha", "0"))
        return MultiPartiteIndex(
            nodes,
            llm=llm if alpha > 0 else None,
            alpha=alpha,
            cache_path=_cache(cache_dir, "cue-units.sqlite") if alpha > 0 else None,
            **index_options(ctx),
            **common,
        )
    if family == "chainrag":
        from ..chainrag.index import SentenceGraphIndex
        from ..eval.methods.chainrag import index_options as chainrag_options

        return SentenceGraphIndex(nodes, **chainrag_options(ctx), **common)
    if family == "fgrag":
        from ..fgrag.extract import CooccurrenceExtractor
        from ..fgrag.index import FGRAGIndex

        if method.uses_llm:
            opts = {"cache_path": _cache(cache_dir, "fgrag-extract.sqlite")}
            return FGRAGIndex(nodes, llm=llm, llm_options=opts, **common)
        return FGRAGIndex(nodes, kg_extractors=[CooccurrenceExtractor()], **common)
    if family == "lprag":
        from ..eval.methods.lprag import _settings
        from ..lprag.index import ChunkQueryLinkIndex

        if not method.uses_llm:
            return ChunkQueryLinkIndex(nodes, query_source="pseudo", **_settings(ctx), **common)
        bound = ctx.option("llm_batches", -1)
        return ChunkQueryLinkIndex(
            nodes,
            llm=llm,
            query_source="llm",
            max_llm_batches=None if bound < 0 else bound,
            llm_cache_path=_cache(cache_dir, "lprag-llm.sqlite"),
            on_llm_failure=ctx.option("on_llm_failure", "fallback"),
            **_settings(ctx),
            **common,
        )
    raise UserError(f"{method.name}: no document index is defined for this method")


def _build_qcg(method: Method, nodes, ctx: BenchContext, llm: LLM | None, common: dict) -> Any:
    from ..eval.methods.qcg import (
        SENTENCE_PRESETS,
        _retrieval_options,
        doc2query_generator,
        sentence_generator,
    )
    from ..qcg.index import QueryCentricGraphIndex

    ctx = replace(ctx, show_progress=common["show_progress"])
    if method.uses_llm:
        preset = ctx.option("preset", "multihop-rag")
        cache = _cache(ctx.cache_dir, "qcg-doc2query.sqlite")
        generator = doc2query_generator(ctx, llm, cache)
        extra = {"llm": llm}
    else:
        preset = SENTENCE_PRESETS[method.name]
        generator = sentence_generator(ctx)
        extra = {}
    return QueryCentricGraphIndex(
        nodes,
        generator=generator,
        preset=preset,
        **_retrieval_options(ctx, preset),
        **extra,
        **common,
    )


_CLASSES = {
    "qcg": ("..qcg.index", "QueryCentricGraphIndex"),
    "cue": ("..cue.index", "MultiPartiteIndex"),
    "chainrag": ("..chainrag.index", "SentenceGraphIndex"),
    "fgrag": ("..fgrag.index", "FGRAGIndex"),
    "lprag": ("..lprag.index", "ChunkQueryLinkIndex"),
}


def load(
    method: Method,
    folder: Path,
    embed_model: BaseEmbedding,
    llm: LLM | None,
    cache_dir: Path | None,
) -> Any:
    """Load the index :func:`build` made and the collection persisted in ``folder``."""
    import importlib

    from .baselines import BM25Documents, DenseDocuments, HybridDocuments

    if method.family == "li-hybrid":
        return HybridDocuments.load(folder, embed_model)
    if method.family == "dense":
        return DenseDocuments.load(folder, embed_model)
    if method.family == "bm25":
        return BM25Documents.load(folder)
    module, name = _CLASSES[method.family]
    cls = getattr(importlib.import_module(module, __package__), name)
    extra: dict[str, Any] = {}
    if method.uses_llm:
        extra["llm"] = llm
        if method.family == "fgrag":
            extra["llm_options"] = {"cache_path": _cache(cache_dir, "fgrag-extract.sqlite")}
    return cls.load(folder, embed_model=embed_model, **extra)


# ------------------------------------------------------------------------------ retrieval


def retriever(method: Method, index: Any, embed_model: BaseEmbedding, top_k: int, llm: LLM | None):
    """The method's retriever over a loaded index, with the options it was built with."""
    family, ctx = method.family, _ctx(method, embed_model, top_k, None)
    if family in ("dense", "bm25", "li-hybrid"):
        return index.retriever(top_k, method.options)
    if family == "qcg":
        return index.as_retriever(similarity_top_k=top_k)
    if family == "cue":
        from ..eval.methods.cue import make_retriever

        return make_retriever(
            index, ctx, llm if float(method.options.get("alpha", "0")) > 0 else None
        )
    if family == "chainrag":
        from ..chainrag.sentence_graph import EDGE_KINDS

        drop = ctx.option("drop", "").upper()
        return index.as_retriever(
            similarity_top_k=top_k,
            seed_k=ctx.option("seed_k", 3),
            candidate_k=ctx.option("candidate_k", 100),
            hops=ctx.option("hops", 1),
            word_budget=ctx.option("word_budget", 3000),
            rank=ctx.option("rank", "graph"),
            edge_kinds=[k for k in EDGE_KINDS if k != drop],
        )
    if family == "fgrag":
        from ..eval.methods.fgrag import _retriever

        return _retriever(index, ctx)
    if family == "lprag":
        from ..eval.methods.lprag import _retriever

        return _retriever(index, ctx)
    raise UserError(f"{method.name}: no retriever is defined for this method")


def sizes(method: Method, index: Any) -> dict[str, Any]:
    """Chunks and graph sizes (nodes and edges by kind where the method has a graph)."""
    if method.family in ("dense", "bm25", "li-hybrid"):
        return index.sizes()
    out: dict[str, Any] = {"chunks": len(index)}
    graph = index.graph
    if graph is not None:
        out["graph"] = _graph_sizes(graph)
    stats = getattr(index, "stats", None)
    if callable(stats):
        out["stats"] = _plain(stats())
    return out


def _graph_sizes(graph: Any) -> dict[str, Any]:
    return {
        "nodes": {kind: graph.num_nodes(kind) for kind in graph.node_kinds()},
        "edges": {kind: graph.num_edges(kind) for kind in graph.edge_kind_names()},
    }


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def query_engine(
    method: Method, index: Any, retriever: Any, llm: LLM, cache_dir: Path | None, stream: bool
):
    """The engine that answers: the method's own where its paper defines one (ChainRAG's
    decompose-retrieve-rewrite loop, FG-RAG's map-reduce summaries), else LlamaIndex's
    ``RetrieverQueryEngine`` over the method's retriever."""
    ctx = _ctx(method, getattr(index, "embed_model", None), 10, cache_dir)
    failure = ctx.option("on_llm_failure", "fallback")
    if method.spec.name == "chainrag":
        from ..core.llm.cache import LLMCache

        path = _cache(cache_dir, "chainrag-llm.sqlite")
        return index.as_query_engine(
            llm=llm,
            integration=ctx.option("integration", "context"),
            max_hops=ctx.option("max_hops", 3),
            cache=LLMCache(path) if path else None,
            on_llm_failure=failure,
            streaming=stream,
        )
    if method.spec.name == "fgrag-llm":
        return index.as_query_engine(
            llm=llm,
            max_query_entities=ctx.option("max_query_entities", 9),
            max_questions=ctx.option("max_questions", 10),
            cache_path=_cache(cache_dir, "fgrag-query.sqlite"),
            on_llm_failure=failure,
            streaming=stream,
        )
    from llama_index.core.query_engine import RetrieverQueryEngine

    return RetrieverQueryEngine.from_args(retriever, llm=llm, streaming=stream)
