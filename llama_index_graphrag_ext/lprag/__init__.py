"""LP-RAG: retrieval as link prediction on a chunk-query graph.

Paper: "LP-RAG: A Link Prediction-Based Framework for Retrieval-Augmented
Generation" (Nascimento, Franco, Souza). Components:

| component | paper step |
|---|---|
| :class:`LLMAtomicChunker` | §3.1 LLM-prompted atomic chunks |
| :class:`ChunkQueryLinkIndex` | §3.2-3.3 mutual-kNN chunk graph, batches, synthetic queries; §3.4 training |
| :class:`LinkPredictor`, :func:`train_link_predictor` | §3.4 link predictors (SAGE, GCN, MLP, NCN) |
| :class:`LinkPredictionRetriever` | §3.4 inference: a new query node, scored links |
"""

from .chunker import LLMAtomicChunker, parse_bracketed_items
from .index import ChunkQueryLinkIndex
from .models import (
    PREDICTORS,
    LinkGraph,
    LinkPredictor,
    LinkScorer,
    TrainConfig,
    TrainReport,
    train_link_predictor,
)
from .prompts import ATOMIC_CHUNK_PROMPT, LP_ANSWER_PROMPT, SYNTHETIC_QUERY_PROMPT
from .queries import SyntheticQueryGenerator, pseudo_queries, sample_batches
from .retriever import LinkPredictionRetriever

__all__ = [
    "ATOMIC_CHUNK_PROMPT",
    "LP_ANSWER_PROMPT",
    "PREDICTORS",
    "SYNTHETIC_QUERY_PROMPT",
    "ChunkQueryLinkIndex",
    "LLMAtomicChunker",
    "LinkGraph",
    "LinkPredictionRetriever",
    "LinkPredictor",
    "LinkScorer",
    "SyntheticQueryGenerator",
    "TrainConfig",
    "TrainReport",
    "parse_bracketed_items",
    "pseudo_queries",
    "sample_batches",
    "train_link_predictor",
]
