"""Dense retrieval over sentences: LlamaIndex's sentence-window pattern as a reference.

A passage longer than the embedder's window is one vector in ``dense`` (pooled
over windows), and a long passage that talks about many things (a chat
session, meeting notes) is then near none of them. What a LlamaIndex user does
about that is index smaller nodes: here one node per sentence, made by
LlamaIndex's own ``SentenceWindowNodeParser`` (each node embeds its sentence
alone and keeps its neighbours in ``metadata["window"]`` for the answer), in a
plain ``VectorStoreIndex``. A passage then ranks by its best sentence. It is a
reference for the graph methods on long documents: what sentence granularity
alone gives, without a graph.
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.node_parser import SentenceWindowNodeParser
from llama_index.core.schema import Document, MetadataMode

from ..core.compact_store import compact_storage_context
from ..core.defaults import resolve_embed_model
from ..core.embeddings import embed_texts
from ..core.nodes import prepare_documents
from .numpy_store import NumpyVectorStore


def build_sentence_index(
    documents: Sequence[Document],
    embed_model: BaseEmbedding | None = None,
    *,
    window_size: int = 1,
    show_progress: bool = False,
) -> VectorStoreIndex:
    """Index every sentence of ``documents`` as its own node (see the module docs).

    Args:
        documents: The documents; each node's ``ref_doc_id`` is its document's id.
        embed_model: Embedder (``Settings``, then the embedded MiniLM, when omitted).
        window_size: Sentences kept on each side in ``metadata["window"]`` (not embedded).
        show_progress: Show a progress bar while embedding.
    """
    embed_model = resolve_embed_model(embed_model)
    docs, _ = prepare_documents(documents)
    parser = SentenceWindowNodeParser.from_defaults(window_size=window_size)
    nodes = [n for n in parser.get_nodes_from_documents(docs) if n.get_content().strip()]
    texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    vectors = embed_texts(
        embed_model, texts, show_progress=show_progress, desc="Embedding sentences"
    )
    for node, vector in zip(nodes, vectors, strict=True):
        node.embedding = vector.tolist()
    storage_context = compact_storage_context(vector_store=NumpyVectorStore())
    return VectorStoreIndex(nodes, embed_model=embed_model, storage_context=storage_context)
