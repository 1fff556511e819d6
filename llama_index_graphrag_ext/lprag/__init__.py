"""LP-RAG: retrieval as link prediction on a chunk-query graph.

Paper: "LP-RAG: A Link Prediction-Based Framework for Retrieval-Augmented
Generation" (Nascimento, Franco, Souza). Components:

| component | paper step |
|---|---|
| :class:`LPRAGConfig` | the settings and presets (``paper``, ``pseudo``, ``default``, ...) |
| :class:`LLMAtomicChunker` | §3.1 LLM-prompted atomic chunks |
| :class:`ChunkQueryLinkIndex` | §3.2-3.3 mutual-kNN chunk graph, batches, synthetic queries; §3.4 training |
| :class:`LinkPredictor`, :func:`train_link_predictor` | §3.4 link predictors (SAGE, GCN, MLP, NCN) |
| :class:`LinkPredictionRetriever` | §3.4 inference: a new query node, scored links |
"""

from .._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "sample_batches": ".batches",
    "LLMAtomicChunker": ".chunker",
    "parse_bracketed_items": ".chunker",
    "LPRAGConfig": ".config",
    "ChunkQueryLinkIndex": ".index",
    "LinkGraph": ".link_graph",
    "PREDICTORS": ".predictor",
    "LinkPredictor": ".predictor",
    "LinkScorer": ".predictor",
    "ATOMIC_CHUNK_PROMPT": ".prompts",
    "LP_ANSWER_PROMPT": ".prompts",
    "SYNTHETIC_QUERY_PROMPT": ".prompts",
    "LinkPredictionRetriever": ".retriever",
    "SyntheticQueryGenerator": ".synthetic_queries",
    "TrainReport": ".training",
    "train_link_predictor": ".training",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

# Imported now: the name is also a submodule's, whose import would replace a lazy one.
from .pseudo_queries import pseudo_queries  # noqa: E402

__all__ = [
    "ATOMIC_CHUNK_PROMPT",
    "LP_ANSWER_PROMPT",
    "PREDICTORS",
    "SYNTHETIC_QUERY_PROMPT",
    "ChunkQueryLinkIndex",
    "LLMAtomicChunker",
    "LPRAGConfig",
    "LinkGraph",
    "LinkPredictionRetriever",
    "LinkPredictor",
    "LinkScorer",
    "SyntheticQueryGenerator",
    "TrainReport",
    "parse_bracketed_items",
    "pseudo_queries",
    "sample_batches",
    "train_link_predictor",
]
