"""The two reference retrievers every method is measured against."""

from .bm25 import BM25Retriever
from .dense import DenseRetriever, build_dense_index

__all__ = ["BM25Retriever", "DenseRetriever", "build_dense_index"]
