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

from .._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "FGRAGConfig": ".config",
    "CooccurrenceExtractor": ".cooccurrence",
    "FGRAGQueryEngine": ".engine",
    "Expansion": ".expansion",
    "expand_many": ".expansion",
    "FGRAGExtractor": ".extract",
    "make_extractor": ".extract",
    "EntityGraph": ".graph",
    "FGRAGIndex": ".index",
    "parse_extraction": ".records",
    "FGRAGRetriever": ".retriever",
    "spacy_query_entities": ".retriever",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

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
