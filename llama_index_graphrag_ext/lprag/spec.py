"""LP-RAG as the runner, the CLI and the server know it."""

from __future__ import annotations

import logging
from typing import Any

from ..core.spec import Chunking, MethodSpec
from .config import LPRAGConfig

logger = logging.getLogger(__name__)


def atomic_chunker(config: LPRAGConfig, llm: Any) -> Any:
    """The paper's atomic chunker (§3.1) when the config asks for it with LLM-written
    queries and ``llm`` can write it (not the embedded SmolLM2); else ``None``."""
    if not (config.uses_llm and config.indexing_llm.atomic_chunks) or llm is None:
        return None
    from ..core.llm import is_embedded  # the LLM stack: only when an index is built

    if is_embedded(llm):
        logger.info("lprag: the embedded SmolLM2 cannot write atomic chunks; passages are chunks")
        return None
    from .chunker import LLMAtomicChunker

    return LLMAtomicChunker(llm=llm, **config.llm.llm_settings())


SPEC = MethodSpec(
    name="lprag",
    summary="LP-RAG: a link predictor (NCN) trained on queries linked to batches of chunks "
    "(LLM questions, or LLM-free pseudo-queries and title bridges) scores query-chunk links",
    config=LPRAGConfig,
    index="llama_index_graphrag_ext.lprag.index:ChunkQueryLinkIndex",
    chunking=Chunking(128, 0, "LP-RAG §3.1 chunks with an LLM (atomic); LLM-free: 128 tokens"),
    node_parser=atomic_chunker,
)
