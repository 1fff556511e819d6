"""Composition: fuse the suite's retrievers, route questions between engines, share work.

* Fusion: [`fuse_retrievers`][llama_index_graphrag_ext.compose.fusion.fuse_retrievers].
* Routing: [`build_router`][llama_index_graphrag_ext.compose.routing.build_router].
* Sharing: [`SharedResources`][llama_index_graphrag_ext.compose.sharing.SharedResources].
"""

from .._lazy import lazy_exports

#: Public name -> the module defining it, imported on first use (see ``_lazy``).
_EXPORTS = {
    "PassageNode": ".fusion",
    "PassageRetriever": ".fusion",
    "fuse_retrievers": ".fusion",
    "normalise_scores": ".fusion",
    "QuestionType": ".routing",
    "QuestionTypeSelector": ".routing",
    "build_router": ".routing",
    "classify_question": ".routing",
    "SharedResources": ".sharing",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

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
