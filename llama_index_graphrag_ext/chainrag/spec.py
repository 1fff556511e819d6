"""ChainRAG as the runner, the CLI and the server know it."""

from ..core.spec import Chunking, MethodSpec
from .config import ChainRAGConfig

SPEC = MethodSpec(
    name="chainrag",
    summary="ChainRAG sentence graph: top-100 -> 3 seeds -> EC/SS/SA expansion -> one ranking "
    "(LLM-free); with an LLM its engine decomposes, rewrites, checks sufficiency, integrates",
    config=ChainRAGConfig,
    index="llama_index_graphrag_ext.chainrag.index:SentenceGraphIndex",
    chunking=Chunking(128, 0, "ChainRAG is silent; its chunks were benchmark passages"),
    own_engine=lambda config: True,
)
