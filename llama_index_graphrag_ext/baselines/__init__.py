"""The references every method is measured against: dense, BM25 and LlamaIndex's hybrid."""

from .._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "BM25Retriever": ".bm25",
    "DenseRetriever": ".dense",
    "build_dense_index": ".dense",
    "BM25Config": ".config",
    "DenseConfig": ".config",
    "HybridConfig": ".config",
    "BM25Index": ".index",
    "DenseIndex": ".index",
    "HybridIndex": ".index",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "BM25Config",
    "BM25Index",
    "BM25Retriever",
    "DenseConfig",
    "DenseIndex",
    "DenseRetriever",
    "HybridConfig",
    "HybridIndex",
    "build_dense_index",
]
