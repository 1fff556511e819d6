"""ChainRAG (Zhu et al., "Mitigating Lost-in-Retrieval Problems in Retrieval Augmented Multi-Hop QA").

* :class:`SentenceGraphIndex`: sentences linked by entity co-occurrence (EC),
  semantic similarity (SS) and structural adjacency (SA) edges, built without an LLM.
* :class:`SentenceGraphRetriever`: the index's LLM-free retriever (seeds, graph
  expansion, chunks ranked by their best sentences).
* :class:`ChainRAGQueryEngine`: decomposition (:mod:`.decompose`), progressive
  retrieval (:mod:`.progressive`) with sub-question rewriting (:mod:`.rewriting`),
  answer or context integration (:mod:`.integration`).
"""

from .chain import ChainStep
from .engine import ChainRAGQueryEngine
from .index import SentenceGraphIndex
from .retriever import SentenceGraphRetriever, SentenceSearch
from .sentence_graph import EDGE_KINDS, SentenceGraph, SentenceRecord

__all__ = [
    "EDGE_KINDS",
    "ChainRAGQueryEngine",
    "ChainStep",
    "SentenceGraph",
    "SentenceGraphIndex",
    "SentenceGraphRetriever",
    "SentenceRecord",
    "SentenceSearch",
]
