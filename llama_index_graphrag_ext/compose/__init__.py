"""Composition: fuse the suite's retrievers, route questions between engines, share work.

* Fusion: [`fuse_retrievers`][llama_index_graphrag_ext.compose.fusion.fuse_retrievers]
  builds LlamaIndex's ``QueryFusionRetriever`` over any retrievers, each adapted by
  [`PassageRetriever`][llama_index_graphrag_ext.compose.fusion.PassageRetriever].
* Routing: [`build_router`][llama_index_graphrag_ext.compose.routing.build_router]
  puts LlamaIndex's ``RouterQueryEngine`` over a summarization engine and a factoid
  engine, with the LLM-free
  [`QuestionTypeSelector`][llama_index_graphrag_ext.compose.routing.QuestionTypeSelector]
  or LlamaIndex's ``LLMSingleSelector``.
* Sharing: [`SharedResources`][llama_index_graphrag_ext.compose.sharing.SharedResources]
  holds one cached embedder, one spaCy parse cache and one LLM cache for several
  indexes over one corpus (what it saves is measured by
  [`measure_sharing`][llama_index_graphrag_ext.eval.sharing.measure_sharing]).
"""

from .fusion import PassageNode, PassageRetriever, fuse_retrievers, normalise_scores
from .routing import QuestionType, QuestionTypeSelector, build_router, classify_question
from .sharing import SharedResources

__all__ = [
    "PassageNode",
    "PassageRetriever",
    "QuestionType",
    "QuestionTypeSelector",
    "SharedResources",
    "build_router",
    "classify_question",
    "fuse_retrievers",
    "normalise_scores",
]
