"""QCG-RAG: Query-Centric Graph Retrieval-Augmented Generation (Wu et al., 2025).

| module | paper step |
|---|---|
| :mod:`.generator` | §3.3 steps 1-2: extended Doc2Query and Doc2Query--; sentence nodes (Fig. 4) |
| :mod:`.parsing` | tolerant parsing of generated pairs |
| :mod:`.graph` | §3.3 step 3: the query layer with its kNN edges (E_intra) and chunk links (E_inter) |
| :mod:`.index` | the index: presets, insert / delete / persist |
| :mod:`.retriever` | §3.4 steps 1-3: threshold + cap, h-hop expansion, chunk scoring |
| :mod:`.prompts` | the generation and answer prompts |
"""

from .generator import (
    QUERY_NODES_KEY,
    Doc2QueryGenerator,
    GeneratedNodes,
    QueryNodeGenerator,
    QueryPair,
    SentenceQueryGenerator,
    doc2query_minus,
    node_text,
)
from .graph import QueryLayer
from .index import PRESETS, QueryCentricGraphIndex
from .parsing import parse_pairs
from .prompts import DOC2QUERY_LINES_PROMPT, DOC2QUERY_PROMPT, QCG_ANSWER_PROMPT
from .retriever import QCGRetriever, RetrievalParams

__all__ = [
    "DOC2QUERY_LINES_PROMPT",
    "DOC2QUERY_PROMPT",
    "PRESETS",
    "QCG_ANSWER_PROMPT",
    "QUERY_NODES_KEY",
    "Doc2QueryGenerator",
    "GeneratedNodes",
    "QCGRetriever",
    "QueryCentricGraphIndex",
    "QueryLayer",
    "QueryNodeGenerator",
    "QueryPair",
    "RetrievalParams",
    "SentenceQueryGenerator",
    "doc2query_minus",
    "node_text",
    "parse_pairs",
]
