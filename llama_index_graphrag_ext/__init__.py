"""Graph-RAG methods as LlamaIndex components.

The public API is re-exported here; see the documentation site for tutorials.
"""

from importlib.metadata import version

__version__ = version("llama-index-graphrag-ext")

from .baselines import BM25Retriever, DenseRetriever, build_dense_index  # noqa: E402
from .compose import SharedResources, build_router, fuse_retrievers  # noqa: E402
from .core import (  # noqa: E402
    CachedEmbedding,
    GraphIndexBase,
    LLMCache,
    LLMCaller,
    LLMSettings,
    PassageParser,
    TypedGraph,
    default_embed_model,
    embedded_llm,
)

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
