"""The references as the runner, the CLI and the server know them."""

from ..core.spec import Chunking, MethodSpec
from .config import BM25Config, DenseConfig, HybridConfig

_LLAMA_INDEX = Chunking(1024, 200, "LlamaIndex's SentenceSplitter default")

DENSE = MethodSpec(
    name="dense",
    summary="LlamaIndex VectorStoreIndex, top-k cosine, same embedder (:sentences: one "
    "vector per sentence)",
    config=DenseConfig,
    index="llama_index_graphrag_ext.baselines.index:DenseIndex",
    chunking=_LLAMA_INDEX,
)
BM25 = MethodSpec(
    name="bm25",
    summary="Okapi BM25 over title and text",
    config=BM25Config,
    index="llama_index_graphrag_ext.baselines.index:BM25Index",
    chunking=_LLAMA_INDEX,
    embeds=False,
)
HYBRID = MethodSpec(
    name="li-hybrid",
    summary="LlamaIndex hybrid: BM25Retriever (bm25s) + vector retriever, reciprocal-rank "
    "fusion, one query",
    config=HybridConfig,
    index="llama_index_graphrag_ext.baselines.index:HybridIndex",
    chunking=_LLAMA_INDEX,
)
