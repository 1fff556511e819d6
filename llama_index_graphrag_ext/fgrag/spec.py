"""FG-RAG as the runner, the CLI and the server know it."""

from ..core.spec import Chunking, MethodSpec
from .config import FGRAGConfig

SPEC = MethodSpec(
    name="fgrag",
    summary="FG-RAG: entity graph (LLM-extracted, or spaCy co-occurrence), context-aware "
    "entity expansion; map-reduce summaries over the LLM's graph, ranked chunks otherwise",
    config=FGRAGConfig,
    index="llama_index_graphrag_ext.fgrag.index:FGRAGIndex",
    chunking=Chunking(1200, 100, "FG-RAG §6.1: 1200-token chunks, 100 overlap"),
    own_engine=lambda config: config.uses_llm,
)
