"""FG-RAG: context-aware fine-grained graph RAG for query-focused summarization.

Paper: Hong et al., "FG-RAG: Enhancing Query-Focused Summarization with
Context-Aware Fine-Grained Graph RAG". Components:

- [`FGRAGExtractor`][llama_index_graphrag_ext.fgrag.extract.FGRAGExtractor] and
  [`CooccurrenceExtractor`][llama_index_graphrag_ext.fgrag.extract.CooccurrenceExtractor]:
  ``kg_extractors`` for ``PropertyGraphIndex`` (LLM, and LLM-free);
- [`FGRAGIndex`][llama_index_graphrag_ext.fgrag.index.FGRAGIndex]: ``PropertyGraphIndex``
  with same-name merging and entity vectors, on any property graph store;
- [`FGRAGRetriever`][llama_index_graphrag_ext.fgrag.retriever.FGRAGRetriever]:
  context-aware entity expansion, chunks with evidence (LLM-free);
- [`FGRAGQueryEngine`][llama_index_graphrag_ext.fgrag.engine.FGRAGQueryEngine]:
  query-level fine-grained summarization (map per query entity, streamed reduce).
"""

from .engine import FGRAGQueryEngine
from .expansion import EntityGraph, Expansion, expand, expand_many
from .extract import CooccurrenceExtractor, FGRAGExtractor, default_extractor, parse_extraction
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
    "expand",
    "expand_many",
    "parse_extraction",
    "spacy_query_entities",
]
