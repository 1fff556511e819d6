"""The reference retrievers every method is measured against."""

from .bm25 import BM25Retriever
from .dense import DenseRetriever, build_dense_index
from .hybrid import llama_index_hybrid
from .sentences import build_sentence_index

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "build_dense_index",
    "build_sentence_index",
    "llama_index_hybrid",
]
