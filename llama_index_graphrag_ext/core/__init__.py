"""Shared substrate of the suite: knows nothing of any one method.

| module | what it gives |
|---|---|
| :mod:`.embeddings` | batched embedding, exact top-k, blocked kNN graphs |
| :mod:`.ann` | approximate kNN graphs for large tables (faiss IVF) |
| :mod:`.compact_store` | compressed in-memory KV store: the default docstore backend |
| :mod:`.vectors` | vector tables: in-memory numpy or any LlamaIndex vector store |
| :mod:`.graph` | the typed graph on networkx |
| :mod:`.viz` | GraphML and offline HTML export of a graph |
| :mod:`.llm` | the LLM resolution rule, step ledgers, the caller (retries, structured output, cache, usage), reply parsing, the event loop |
| :mod:`.embed_cache` | a persistent embedding cache around any embedder |
| :mod:`.text` | spaCy loading, sentences, NER, tokens, BM25, BLEU |
| :mod:`.rerank` | any LlamaIndex reranker, asked for exactly the nodes a method needs |
| :mod:`.nodes` | input hygiene, chunk nodes, evidence metadata |
| :mod:`.index` | the base class of the suite's indexes |
| :mod:`.persist` | versioned, atomic persistence |
| :mod:`.defaults` | the embedded offline models |
"""

from .._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "StringTable": ".arrays",
    "csr": ".arrays",
    "MissingModelError": ".defaults",
    "default_embed_model": ".defaults",
    "embedded_llm": ".defaults",
    "resolve_embed_model": ".defaults",
    "CachedEmbedding": ".embed_cache",
    "embed_query": ".embeddings",
    "embed_texts": ".embeddings",
    "knn_graph": ".embeddings",
    "top_k": ".embeddings",
    "TypedGraph": ".graph",
    "GraphIndexBase": ".index",
    "LLMCache": ".llm",
    "LLMCaller": ".llm",
    "LLMFallbackError": ".llm",
    "LLMOutputError": ".llm",
    "LLMSettings": ".llm",
    "LLMSteps": ".llm",
    "RetryPolicy": ".llm",
    "UsageMeter": ".llm",
    "choose_llm": ".llm",
    "resolve_llm": ".llm",
    "EVIDENCE_KEY": ".nodes",
    "PassageParser": ".nodes",
    "prepare_documents": ".nodes",
    "with_evidence": ".nodes",
    "IndexFormatError": ".persist",
    "Hits": ".vectors",
    "InMemoryVectorTable": ".vectors",
    "MatrixSearch": ".vectors",
    "RowSearcher": ".vectors",
    "VectorStoreTable": ".vectors",
    "VectorTable": ".vectors",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [
    "EVIDENCE_KEY",
    "CachedEmbedding",
    "GraphIndexBase",
    "Hits",
    "InMemoryVectorTable",
    "IndexFormatError",
    "LLMCache",
    "LLMCaller",
    "LLMFallbackError",
    "LLMOutputError",
    "LLMSettings",
    "LLMSteps",
    "MatrixSearch",
    "MissingModelError",
    "PassageParser",
    "RetryPolicy",
    "RowSearcher",
    "StringTable",
    "TypedGraph",
    "UsageMeter",
    "VectorStoreTable",
    "VectorTable",
    "choose_llm",
    "csr",
    "default_embed_model",
    "embed_query",
    "embed_texts",
    "embedded_llm",
    "knn_graph",
    "prepare_documents",
    "resolve_embed_model",
    "resolve_llm",
    "top_k",
    "with_evidence",
]
