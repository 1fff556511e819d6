"""The two baselines as persistent, updatable indexes for the document commands.

``dense`` is LlamaIndex's ``VectorStoreIndex`` over the suite's
:class:`~llama_index_graphrag_ext.baselines.numpy_store.NumpyVectorStore`,
persisted with LlamaIndex's own ``StorageContext.persist`` and updated with its
``insert_nodes`` / ``delete_ref_doc``. ``bm25`` keeps its chunks in a LlamaIndex
docstore (inserted and deleted by document) and fits the suite's
:class:`~llama_index_graphrag_ext.baselines.BM25Retriever` over them when a
retriever is asked for: BM25's statistics are corpus-wide, so a fit over the
current chunks is what an update needs, and it costs a tokenisation pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle
from llama_index.core.storage.docstore import SimpleDocumentStore

from ..baselines import BM25Retriever, DenseRetriever
from ..baselines.numpy_store import NumpyVectorStore
from ..core.nodes import with_evidence

_VECTORS = "default__vector_store.json"


class DenseDocuments:
    """``dense``: a ``VectorStoreIndex`` that persists, loads, inserts and deletes by document."""

    kind = "dense"

    def __init__(self, index: VectorStoreIndex) -> None:
        self.index = index

    @classmethod
    def build(
        cls, nodes: Sequence[BaseNode], embed_model: BaseEmbedding, show_progress: bool = False
    ) -> DenseDocuments:
        storage = StorageContext.from_defaults(vector_store=NumpyVectorStore())
        index = VectorStoreIndex(
            list(nodes),
            storage_context=storage,
            embed_model=embed_model,
            show_progress=show_progress,
        )
        return cls(index)

    @classmethod
    def load(cls, folder: Path, embed_model: BaseEmbedding) -> DenseDocuments:
        store = NumpyVectorStore.from_persist_path(str(folder / _VECTORS))
        storage = StorageContext.from_defaults(persist_dir=str(folder), vector_store=store)
        return cls(load_index_from_storage(storage, embed_model=embed_model))

    def persist(self, folder: Path) -> None:
        self.index.storage_context.persist(persist_dir=str(folder))

    def insert_nodes(self, nodes: Sequence[BaseNode]) -> None:
        self.index.insert_nodes(list(nodes))

    def delete_ref_doc(self, ref_doc_id: str) -> None:
        self.index.delete_ref_doc(ref_doc_id, delete_from_docstore=True)

    def chunk_count(self) -> int:
        return len(self.index.index_struct.nodes_dict)

    def retriever(self, top_k: int, options: dict[str, str]) -> DenseRetriever:
        return DenseRetriever(self.index, similarity_top_k=top_k)

    def sizes(self) -> dict[str, Any]:
        return {"chunks": self.chunk_count(), "vectors": len(self.index.vector_store)}


class BM25Documents:
    """``bm25``: chunks in a docstore (by document), BM25 fitted over them on demand."""

    kind = "bm25"
    _FILE = "docstore.json"

    def __init__(self, docstore: SimpleDocumentStore) -> None:
        self.docstore = docstore

    @classmethod
    def build(cls, nodes: Sequence[BaseNode]) -> BM25Documents:
        docstore = SimpleDocumentStore()
        docstore.add_documents(list(nodes))
        return cls(docstore)

    @classmethod
    def load(cls, folder: Path) -> BM25Documents:
        return cls(SimpleDocumentStore.from_persist_path(str(folder / cls._FILE)))

    def persist(self, folder: Path) -> None:
        self.docstore.persist(str(folder / self._FILE))

    def insert_nodes(self, nodes: Sequence[BaseNode]) -> None:
        self.docstore.add_documents(list(nodes))

    def delete_ref_doc(self, ref_doc_id: str) -> None:
        self.docstore.delete_ref_doc(ref_doc_id, raise_error=False)

    def chunk_count(self) -> int:
        return len(self.docstore.docs)

    def retriever(self, top_k: int, options: dict[str, str]) -> BM25Retriever:
        nodes = list(self.docstore.docs.values())
        if not nodes:
            raise ValueError("the bm25 index holds no chunk")
        return BM25Retriever(
            nodes,
            similarity_top_k=top_k,
            k1=float(options.get("k1", 1.5)),
            b=float(options.get("b", 0.75)),
        )

    def sizes(self) -> dict[str, Any]:
        return {"chunks": self.chunk_count()}


class HybridDocuments(DenseDocuments):
    """``li-hybrid``: the ``dense`` index, and at query time LlamaIndex's ``BM25Retriever``
    over its chunks fused with its vector retriever by ``QueryFusionRetriever`` (reciprocal
    rank, one query, no LLM), as :func:`~llama_index_graphrag_ext.baselines.hybrid.llama_index_hybrid`
    builds it for the benchmarks."""

    kind = "li-hybrid"

    def retriever(self, top_k: int, options: dict[str, str]):
        from llama_index.core.llms import MockLLM
        from llama_index.core.retrievers import QueryFusionRetriever
        from llama_index.retrievers.bm25 import BM25Retriever as LlamaIndexBM25

        nodes = list(self.index.docstore.docs.values())
        bm25 = LlamaIndexBM25(nodes=nodes, similarity_top_k=min(top_k, len(nodes)), language="en")
        fusion = QueryFusionRetriever(
            [self.index.as_retriever(similarity_top_k=top_k), bm25],
            llm=MockLLM(),  # num_queries=1 never asks it; it keeps Settings.llm unresolved
            mode="reciprocal_rerank",
            similarity_top_k=top_k,
            num_queries=1,
            use_async=False,
        )
        return _RankEvidence(fusion, "li-hybrid", "rrf")


class _RankEvidence(BaseRetriever):
    """A retriever whose results carry ``{"method", "rank", <score name>}`` as evidence."""

    def __init__(self, inner: BaseRetriever, method: str, score_name: str) -> None:
        self._inner, self._method, self._score_name = inner, method, score_name
        super().__init__()

    def _wrap(self, results: list[NodeWithScore]) -> list[NodeWithScore]:
        return [
            with_evidence(
                r.node, r.score, {"method": self._method, "rank": i + 1, self._score_name: r.score}
            )
            for i, r in enumerate(results)
        ]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._wrap(self._inner.retrieve(query_bundle))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._wrap(await self._inner.aretrieve(query_bundle))
