"""ChainRAG (Zhu et al., "Mitigating Lost-in-Retrieval Problems in Retrieval Augmented Multi-Hop QA").

* :class:`SentenceGraphIndex`: sentences linked by entity co-occurrence (EC),
  semantic similarity (SS) and structural adjacency (SA) edges, built without an LLM.
* :class:`SentenceGraphRetriever`: the index's LLM-free retriever (seeds, graph
  expansion, chunks ranked by their best sentences).
* :class:`ChainRAGQueryEngine`: decomposition (:mod:`.decompose`), progressive
  retrieval (:mod:`.progressive`) with sub-question rewriting (:mod:`.rewriting`),
  answer or context integration (:mod:`.integration`).
* :class:`ChainRAGConfig`: their settings and presets (``default``, ``paper``,
  ``common-entities``).
"""

from .._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "ChainStep": ".chain",
    "EDGE_KINDS": ".config",
    "ChainRAGConfig": ".config",
    "ChainRAGQueryEngine": ".engine",
    "SentenceGraphIndex": ".index",
    "SentenceGraphRetriever": ".retriever",
    "SentenceSearch": ".search",
    "SentenceGraph": ".sentence_graph",
    "SentenceRecord": ".sentences",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "EDGE_KINDS",
    "ChainRAGConfig",
    "ChainRAGQueryEngine",
    "ChainStep",
    "SentenceGraph",
    "SentenceGraphIndex",
    "SentenceGraphRetriever",
    "SentenceRecord",
    "SentenceSearch",
]
