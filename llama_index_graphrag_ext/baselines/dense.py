"""Dense top-k retrieval: LlamaIndex's ``VectorStoreIndex`` with the suite's embedder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import Document, MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.storage.storage_context import DEFAULT_VECTOR_STORE
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from ..core.compact_store import compact_storage_context
from ..core.config import top_k_of
from ..core.defaults import resolve_embed_model
from ..core.embeddings import embed_texts
from ..core.nodes import documents_to_chunks, prepare_documents, require_query, with_evidence
from .numpy_store import NumpyVectorStore


def build_dense_index(
    documents: Sequence[Document],
    embed_model: BaseEmbedding | None = None,
    *,
    show_progress: bool = False,
    vector_store: BasePydanticVectorStore | None = None,
    **kwargs: Any,
) -> VectorStoreIndex:
    """Index documents (one chunk each) in a plain ``VectorStoreIndex``.

    Chunks are embedded by :func:`~llama_index_graphrag_ext.core.embeddings.embed_texts`
    (length-sorted batches) and handed over with their vectors, so the index
    stores them without embedding twice.

    Args:
        documents: The documents.
        embed_model: Embedder (``Settings``, then the embedded MiniLM, when omitted).
        show_progress: Show a progress bar while embedding.
        vector_store: Any LlamaIndex vector store (Milvus, Qdrant, ...) to hold
            the chunks; ``None`` (and no ``storage_context``) keeps them in a
            :class:`~.numpy_store.NumpyVectorStore` (one float32 matrix; same
            cosine ranking as ``SimpleVectorStore``, whose per-row Python loop
            grows linearly per query; see ``docs/scaling.md``). Reload such an
            index with ``VectorStoreIndex.from_vector_store``.
        **kwargs: Passed to ``VectorStoreIndex`` (e.g. ``storage_context``).
    """
    embed_model = resolve_embed_model(embed_model)
    docs, _ = prepare_documents(documents)
    batches = [docs[start : start + _INSERT_BATCH] for start in range(0, len(docs), _INSERT_BATCH)]
    # The chunk nodes are made a batch at a time, twice (once for the texts to
    # embed, once to insert), and dropped after each batch: nodes made all at
    # once stayed alive while the index's own small objects were allocated
    # among them, and their memory then stayed resident for good (see
    # burst_ids in core/nodes.py). One embedding call over all texts keeps the
    # length-sorted embedding batches, and so the vectors, what they were.
    texts: list[str] = []
    for batch in batches:
        texts.extend(
            n.get_content(metadata_mode=MetadataMode.EMBED) for n in documents_to_chunks(batch)
        )
    vectors = embed_texts(embed_model, texts, show_progress=show_progress, desc="Embedding chunks")
    del texts
    if vector_store is None and "storage_context" not in kwargs:
        vector_store = NumpyVectorStore()
    if vector_store is not None:
        storage_context = kwargs.pop("storage_context", None)
        if storage_context is None:
            # Nodes as compressed JSON: LlamaIndex's default keeps a dict tree per node.
            storage_context = compact_storage_context(vector_store=vector_store)
        else:
            storage_context.add_vector_store(vector_store, DEFAULT_VECTOR_STORE)
        kwargs["storage_context"] = storage_context
    index = VectorStoreIndex([], embed_model=embed_model, **kwargs)
    # Vectors go over a batch at a time: LlamaIndex takes them as lists of
    # Python floats (12 KB per 384-d vector), which for a whole corpus at once
    # was the dense build's peak memory (1.5 GB at 64k chunks).
    # Each batch goes through the index's ``_insert`` hook and the index struct
    # is written to the index store once at the end, as LlamaIndex's own
    # constructor does: ``insert_nodes`` re-encodes the whole struct per call.
    row = 0
    for batch in batches:
        nodes = documents_to_chunks(batch)
        for node, vector in zip(nodes, vectors[row : row + len(nodes)], strict=True):
            node.embedding = vector.tolist()
        row += len(nodes)
        index._insert(nodes)
        del nodes
    index.storage_context.index_store.add_index_struct(index.index_struct)
    return index


#: Documents per batch: small batches keep the build's temporaries few (see above).
_INSERT_BATCH = 256


class DenseRetriever(BaseRetriever):
    """Top-k cosine retrieval over a ``VectorStoreIndex``, with evidence metadata.

    Args:
        index: The vector index.
        similarity_top_k: Chunks to return.
        callback_manager: LlamaIndex callbacks; falls back to ``Settings``.
    """

    def __init__(
        self,
        index: VectorStoreIndex,
        similarity_top_k: int = 5,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        similarity_top_k = top_k_of(similarity_top_k, 5)
        self._inner = index.as_retriever(similarity_top_k=similarity_top_k)
        self.similarity_top_k = similarity_top_k
        super().__init__(callback_manager=callback_manager)

    def _wrap(self, results: list[NodeWithScore]) -> list[NodeWithScore]:
        return [
            with_evidence(r.node, r.score, {"method": "dense", "rank": i + 1, "cosine": r.score})
            for i, r in enumerate(results)
        ]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        require_query(query_bundle.query_str, query_bundle.embedding)
        return self._wrap(self._inner.retrieve(query_bundle))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        require_query(query_bundle.query_str, query_bundle.embedding)
        return self._wrap(await self._inner.aretrieve(query_bundle))
