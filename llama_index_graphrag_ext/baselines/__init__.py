"""The references every method is measured against: dense, BM25 and LlamaIndex's hybrid."""

from .bm25 import BM25Retriever
from .dense import DenseRetriever, build_dense_index
from .index import BM25Config, BM25Index, DenseConfig, DenseIndex, HybridConfig, HybridIndex

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
