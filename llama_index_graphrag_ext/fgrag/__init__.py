"""FG-RAG: context-aware fine-grained graph RAG for query-focused summarization.

Paper: Hong et al., "FG-RAG: Enhancing Query-Focused Summarization with
Context-Aware Fine-Grained Graph RAG". Components:

- [`FGRAGConfig`][llama_index_graphrag_ext.fgrag.config.FGRAGConfig]: its settings
  and presets (``paper``, ``default``);
- [`FGRAGExtractor`][llama_index_graphrag_ext.fgrag.extract.FGRAGExtractor] and
  [`CooccurrenceExtractor`][llama_index_graphrag_ext.fgrag.cooccurrence.CooccurrenceExtractor]:
  ``kg_extractors`` for ``PropertyGraphIndex`` (LLM, and LLM-free);
- [`FGRAGIndex`][llama_index_graphrag_ext.fgrag.index.FGRAGIndex]: the merged entity
  graph with entity vectors, optionally mirrored into any LlamaIndex property
  graph store, which expansion then reads hop by hop;
- [`FGRAGRetriever`][llama_index_graphrag_ext.fgrag.retriever.FGRAGRetriever]:
  context-aware entity expansion, chunks with evidence (LLM-free);
- [`FGRAGQueryEngine`][llama_index_graphrag_ext.fgrag.engine.FGRAGQueryEngine]:
  query-level fine-grained summarization (map per query entity, streamed reduce).
"""

from .config import FGRAGConfig
from .cooccurrence import CooccurrenceExtractor
from .engine import FGRAGQueryEngine
from .expansion import Expansion, expand_many
from .extract import FGRAGExtractor, make_extractor
from .graph import EntityGraph
from .index import FGRAGIndex
from .records import parse_extraction
from .retriever import FGRAGRetriever, spacy_query_entities

__all__ = [
    "CooccurrenceExtractor",
    "EntityGraph",
    "Expansion",
    "FGRAGConfig",
    "FGRAGExtractor",
    "FGRAGIndex",
    "FGRAGQueryEngine",
    "FGRAGRetriever",
    "expand_many",
    "make_extractor",
    "parse_extraction",
    "spacy_query_entities",
]
