"""FG-RAG: context-aware fine-grained graph RAG for query-focused summarization.

Paper: Hong et al., "FG-RAG: Enhancing Query-Focused Summarization with
Context-Aware Fine-Grained Graph RAG". Components:

- [`FGRAGExtractor`][llama_index_graphrag_ext.fgrag.extract.FGRAGExtractor] and
  [`CooccurrenceExtractor`][llama_index_graphrag_ext.fgrag.extract.CooccurrenceExtractor]:
  ``kg_extractors`` for ``PropertyGraphIndex`` (LLM, and LLM-free);
- [`FGRAGIndex`][llama_index_graphrag_ext.fgrag.index.FGRAGIndex]: the merged entity
  graph ([`EntityGraph`][llama_index_graphrag_ext.fgrag.graph.EntityGraph]) with entity
  vectors, a suite index like the other four; optionally mirrored into any LlamaIndex
  property graph store, which expansion then reads hop by hop;
- [`FGRAGRetriever`][llama_index_graphrag_ext.fgrag.retriever.FGRAGRetriever]:
  context-aware entity expansion, chunks with evidence (LLM-free);
- [`FGRAGQueryEngine`][llama_index_graphrag_ext.fgrag.engine.FGRAGQueryEngine]:
  query-level fine-grained summarization (map per query entity, streamed reduce).
"""

from .cooccurrence import CooccurrenceExtractor
from .engine import FGRAGQueryEngine
from .expansion import Expansion, expand_many
from .extract import FGRAGExtractor, default_extractor, parse_extraction
from .graph import EntityGraph
from .index import FGRAGIndex
from .retriever import FGRAGRetriever, spacy_query_entities

__all__ = [
    "CooccurrenceExtractor",
    "EntityGraph",
    "Expansion",
    "FGRAGExtractor",
    "FGRAGIndex",
    "FGRAGQueryEngine",
    "FGRAGRetriever",
    "default_extractor",
    "expand_many",
    "parse_extraction",
    "spacy_query_entities",
]
