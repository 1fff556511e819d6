"""Query nodes of the query-centric graph: where each paper step lives.

Paper §3.3 (indexing steps 1-2) and the "Sentence Nodes" ablation (§4.2, Fig. 4):

| module | step |
|---|---|
| :mod:`.query_nodes` | the query node record (:class:`QueryPair`), its text ``q ⊕ a``, the generator base |
| :mod:`.doc2query` | step 1, extended Doc2Query: :class:`Doc2QueryGenerator` |
| :mod:`.filtering` | step 2, extended Doc2Query--: :func:`doc2query_minus` |
| :mod:`.sentence_nodes` | the LLM-free "Sentence Nodes": :class:`SentenceQueryGenerator` |

This module keeps the names importable from where they lived before the split.
"""

from __future__ import annotations

from .doc2query import STEP, Doc2QueryGenerator
from .filtering import doc2query_minus, keep_count
from .query_nodes import (
    QUERY_NODES_KEY,
    GeneratedNodes,
    NodeFormat,
    QueryNodeGenerator,
    QueryPair,
    node_text,
)
from .sentence_nodes import SentenceQueryGenerator

__all__ = [
    "QUERY_NODES_KEY",
    "STEP",
    "Doc2QueryGenerator",
    "GeneratedNodes",
    "NodeFormat",
    "QueryNodeGenerator",
    "QueryPair",
    "SentenceQueryGenerator",
    "doc2query_minus",
    "keep_count",
    "node_text",
]
