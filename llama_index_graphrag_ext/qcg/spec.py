"""QCG-RAG as the runner, the CLI and the server know it."""

from ..core.spec import Chunking, MethodSpec
from .config import QCGConfig

SPEC = MethodSpec(
    name="qcg",
    summary="QCG-RAG: query nodes (LLM question-answer pairs, or sentences) between "
    "question and chunks; threshold, kNN hops, chunk scoring",
    config=QCGConfig,
    index="llama_index_graphrag_ext.qcg.index:QueryCentricGraphIndex",
    chunking=Chunking(1200, 100, "QCG-RAG §4.1: 1200-token chunks, 100 overlap"),
)
