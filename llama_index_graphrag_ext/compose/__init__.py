"""Composition: fuse the suite's retrievers, route questions between engines, share work.

* Fusion: [`fuse_retrievers`][llama_index_graphrag_ext.compose.fusion.fuse_retrievers].
* Routing: [`build_router`][llama_index_graphrag_ext.compose.routing.build_router].
* Sharing: [`SharedResources`][llama_index_graphrag_ext.compose.sharing.SharedResources].
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
