"""Link predictors over the chunk-query graph, and their training loop (LP-RAG §3.4).

Retrieval in LP-RAG is inductive link prediction: a query node that was never
seen in training is attached to the chunk graph and every (query, chunk) pair is
scored. This module gathers what is needed to train and apply the predictors;
each concern lives in its own module:

| module | what | paper |
|---|---|---|
| :mod:`.link_graph` | :class:`LinkGraph` (features, chunk edges, links) and :class:`ChunkStructure` (the chunk graph as torch-geometric operators) | §3.3, Eqs. 4-5 |
| :mod:`.predictor` | :class:`LinkPredictor` (PyG ``GCNConv`` / ``GraphConv`` encoders, NCN's common neighbours, the pairwise decoder) and :class:`LinkScorer` (frozen, thread-safe inference; :class:`MeanScorer` averages several) | §3.4, Eqs. 6-8; inference |
| :mod:`.train_config` | :class:`TrainConfig`, :class:`TrainReport` | Tables 7-8 |
| :mod:`.training` | :func:`train_link_predictor`: BCE with negative sampling, Adam, held-out queries for early stopping, seeded | §3.4, App. A.3 |
"""

from __future__ import annotations

from .link_graph import ChunkStructure, LinkGraph
from .predictor import PREDICTORS, LinkPredictor, LinkScorer, MeanScorer, Predictor
from .train_config import TrainConfig, TrainReport
from .training import deterministic_torch, train_link_predictor

__all__ = [
    "PREDICTORS",
    "ChunkStructure",
    "LinkGraph",
    "LinkPredictor",
    "LinkScorer",
    "MeanScorer",
    "Predictor",
    "TrainConfig",
    "TrainReport",
    "deterministic_torch",
    "train_link_predictor",
]
