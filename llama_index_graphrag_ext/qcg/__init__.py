"""QCG-RAG: Query-Centric Graph Retrieval-Augmented Generation (Wu et al., 2025).

| module | paper step |
|---|---|
| :mod:`.query_nodes` | §3.3: the query node record, its text ``q ⊕ a``, the generator base |
| :mod:`.doc2query` | §3.3 step 1: extended Doc2Query (LLM question-answer pairs) |
| :mod:`.filtering` | §3.3 step 2: extended Doc2Query-- (top ``alpha`` by cosine to the chunk) |
| :mod:`.sentence_nodes` | §4.2, Fig. 4: sentence nodes, the LLM-free tier |
| :mod:`.parsing` | tolerant parsing of generated pairs |
| :mod:`.graph` | §3.3 step 3: the query layer with its kNN edges (E_intra) and chunk links (E_inter) |
| :mod:`.config` | every setting, with the paper's symbols; the presets (``paper``, ``default``, ...) |
| :mod:`.index` | the index: insert / delete / persist |
| :mod:`.spec` | the method as the runner and the CLI know it |
| :mod:`.retriever` | §3.4 steps 1-3: threshold + cap, h-hop expansion, chunk scoring |
| :mod:`.prompts` | the generation and answer prompts |
"""

from .._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "QCGConfig": ".config",
    "Doc2QueryGenerator": ".doc2query",
    "doc2query_minus": ".filtering",
    "QueryLayer": ".graph",
    "QueryCentricGraphIndex": ".index",
    "parse_pairs": ".parsing",
    "DOC2QUERY_LINES_PROMPT": ".prompts",
    "DOC2QUERY_PROMPT": ".prompts",
    "QCG_ANSWER_PROMPT": ".prompts",
    "QUERY_NODES_KEY": ".query_nodes",
    "GeneratedNodes": ".query_nodes",
    "QueryNodeGenerator": ".query_nodes",
    "QueryPair": ".query_nodes",
    "node_text": ".query_nodes",
    "QCGRetriever": ".retriever",
    "SentenceQueryGenerator": ".sentence_nodes",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "DOC2QUERY_LINES_PROMPT",
    "DOC2QUERY_PROMPT",
    "QCG_ANSWER_PROMPT",
    "QUERY_NODES_KEY",
    "Doc2QueryGenerator",
    "QCGConfig",
    "GeneratedNodes",
    "QCGRetriever",
    "QueryCentricGraphIndex",
    "QueryLayer",
    "QueryNodeGenerator",
    "QueryPair",
    "SentenceQueryGenerator",
    "doc2query_minus",
    "node_text",
    "parse_pairs",
]
