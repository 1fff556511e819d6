"""CUE-RAG: multi-partite graph (chunks, knowledge units, entities) and Q-Iter retrieval.

Su et al., *CUE-RAG: Towards Accurate and Cost-Efficient Graph-Based RAG via
Multi-Partite Graph and Query-Driven Iterative Retrieval*. Settings and presets:
:mod:`.config`; the method as the runner knows it: :mod:`.spec`. See
``docs/methods/cue.md`` for the tutorial.
"""

from __future__ import annotations

from .._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "CUEConfig": ".config",
    "ExtractionResult": ".extraction_run",
    "ExtractionRun": ".extraction_run",
    "KnowledgeUnitExtractor": ".extractor",
    "MultiPartiteIndex": ".index",
    "CUE_ANSWER_PROMPT": ".prompts",
    "QUERY_ENTITY_PROMPT": ".prompts",
    "UNIT_EXTRACTION_PROMPT": ".prompts",
    "Anchoring": ".qiter",
    "PathCandidate": ".qiter",
    "anchor_entities": ".qiter",
    "beam_search": ".qiter",
    "QIterRetriever": ".retriever",
    "EmbeddingScorer": ".scoring",
    "QIterScorer": ".scoring",
    "RerankerScorer": ".scoring",
    "KnapsackResult": ".selection",
    "bleu_values": ".selection",
    "cosine_values": ".selection",
    "knapsack": ".selection",
    "token_budget": ".selection",
    "KnowledgeUnit": ".units",
    "UnitEntity": ".units",
    "Adjacency": ".view",
    "CueGraphView": ".view",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "CUE_ANSWER_PROMPT",
    "QUERY_ENTITY_PROMPT",
    "UNIT_EXTRACTION_PROMPT",
    "Adjacency",
    "Anchoring",
    "CUEConfig",
    "CueGraphView",
    "EmbeddingScorer",
    "ExtractionResult",
    "ExtractionRun",
    "KnapsackResult",
    "KnowledgeUnit",
    "KnowledgeUnitExtractor",
    "MultiPartiteIndex",
    "PathCandidate",
    "QIterRetriever",
    "QIterScorer",
    "RerankerScorer",
    "UnitEntity",
    "anchor_entities",
    "beam_search",
    "bleu_values",
    "cosine_values",
    "knapsack",
    "token_budget",
]
