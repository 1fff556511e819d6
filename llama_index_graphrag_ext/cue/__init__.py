"""CUE-RAG: multi-partite graph (chunks, knowledge units, entities) and Q-Iter retrieval.

Su et al., *CUE-RAG: Towards Accurate and Cost-Efficient Graph-Based RAG via
Multi-Partite Graph and Query-Driven Iterative Retrieval*. Settings and presets:
:mod:`.config`; the method as the runner knows it: :mod:`.spec`. See
``docs/methods/cue.md`` for the tutorial.
"""

from __future__ import annotations

from .config import CUEConfig
from .extraction_run import ExtractionResult, ExtractionRun
from .extractor import KnowledgeUnitExtractor
from .index import MultiPartiteIndex
from .prompts import CUE_ANSWER_PROMPT, QUERY_ENTITY_PROMPT, UNIT_EXTRACTION_PROMPT
from .qiter import Anchoring, PathCandidate, anchor_entities, beam_search
from .retriever import QIterRetriever
from .scoring import EmbeddingScorer, QIterScorer, RerankerScorer
from .selection import KnapsackResult, bleu_values, cosine_values, knapsack, token_budget
from .units import KnowledgeUnit, UnitEntity
from .view import Adjacency, CueGraphView

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
