"""CUE-RAG as the runner, the CLI and the server know it."""

from ..core.spec import Chunking, MethodSpec
from .config import CUEConfig

SPEC = MethodSpec(
    name="cue",
    summary="CUE-RAG: chunks, knowledge units (LLM-written for the alpha token share, else "
    "sentences) and entities; Q-Iter: entity anchoring, beam search with query updating",
    config=CUEConfig,
    index="llama_index_graphrag_ext.cue.index:MultiPartiteIndex",
    chunking=Chunking(128, 0, "CUE-RAG is silent; its chunks were ~110-135-token passages (§4.1)"),
)
