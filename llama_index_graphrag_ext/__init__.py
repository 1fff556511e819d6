"""Graph-RAG methods as LlamaIndex components.

The public API is re-exported here; see the documentation site for tutorials.
Names are imported when first used (PEP 562), so ``graphrag-ext --help``,
``info`` and ``bench --list`` start without loading LlamaIndex's model stack.
"""

from importlib.metadata import version

from ._lazy import lazy_exports

__version__ = version("llama-index-graphrag-ext")

#: Public name -> the module that defines it.
_EXPORTS = {
    "BM25Retriever": ".baselines",
    "DenseRetriever": ".baselines",
    "build_dense_index": ".baselines",
    "SharedResources": ".compose",
    "build_router": ".compose",
    "fuse_retrievers": ".compose",
    "CachedEmbedding": ".core",
    "GraphIndexBase": ".core",
    "LLMCache": ".core",
    "LLMCaller": ".core",
    "LLMSettings": ".core",
    "PassageParser": ".core",
    "TypedGraph": ".core",
    "default_embed_model": ".core",
    "embedded_llm": ".core",
}

__all__ = [
    "BM25Retriever",
    "CachedEmbedding",
    "DenseRetriever",
    "GraphIndexBase",
    "LLMCache",
    "LLMCaller",
    "LLMSettings",
    "PassageParser",
    "SharedResources",
    "TypedGraph",
    "__version__",
    "build_dense_index",
    "build_router",
    "default_embed_model",
    "embedded_llm",
    "fuse_retrievers",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
