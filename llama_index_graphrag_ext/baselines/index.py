"""The references as persistent, updatable indexes with the suite's index protocol.

``dense`` is LlamaIndex's ``VectorStoreIndex`` over the suite's
:class:`~.numpy_store.NumpyVectorStore` (or one node per sentence, ``dense:sentences``);
``bm25`` keeps its chunks in a docstore and fits BM25 over them when a retriever
is asked for (BM25's statistics are corpus-wide, so a fit over the current
chunks is what an update needs); ``li-hybrid`` is the ``dense`` index with, at
query time, LlamaIndex's own BM25 fused by ``QueryFusionRetriever``. Each is
persisted with LlamaIndex's storage and a ``baseline.json`` holding its config.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
)
from llama_index.core.storage.docstore import SimpleDocumentStore

from ..core.compact_store import compact_storage_context
from ..core.config import MethodConfig, top_k_of
from ..core.defaults import resolve_embed_model
from ..core.embeddings import embed_texts
from ..core.nodes import require_query, with_evidence
from ..core.persist import IndexFormatError, check_sealed, read_json, seal, write_json
from .bm25 import BM25Retriever
from .config import BM25Config, DenseConfig, HybridConfig
from .dense import DenseRetriever
from .numpy_store import NumpyVectorStore

_VECTORS = "default__vector_store.json"
#: Nodes inserted at a time while building.
_INSERT_BATCH = 256
_CONFIG = "baseline.json"


class _Baseline:
    """Shared plumbing: config, persistence of the config, sizes."""

    config_class: ClassVar[type[MethodConfig]]
    llm_steps = None

    def _set_config(self, config: Any, overrides: dict[str, Any]) -> None:
        self.config = self.config_class.resolve(config, **overrides)

    def _write_config(self, folder: Path) -> None:
        """Write the config last, sealing the folder (every file's checksum beside it)."""
        write_json(folder / _CONFIG, {"config": self.config.model_dump(mode="json")})
        seal(folder, _CONFIG)

    @classmethod
    def _read_config(cls, folder: Path) -> MethodConfig:
        """The stored config, once every file matches the seal (read before any file).

        Raises:
            IndexFormatError: ``baseline.json`` or a file it seals is missing or damaged.
        """
        path = Path(folder) / _CONFIG
        if not path.is_file():
            raise IndexFormatError(f"{path} is missing")
        data = read_json(path)
        if not isinstance(data, dict):
            raise IndexFormatError(f"{path} is damaged (not a JSON object)")
        check_sealed(folder, data, _CONFIG)
        return cls.config_class.model_validate(data.get("config") or {})

    def as_query_engine(self, llm: Any = None, **kwargs: Any):
        """A ``RetrieverQueryEngine`` over :meth:`as_retriever`, answering through the suite's
        caller (see :mod:`..core.llm.answering`)."""
        from ..core.llm import choose_llm
        from ..core.llm.answering import answer_engine

        top_k = top_k_of(kwargs.pop("similarity_top_k", None), 5)
        return answer_engine(self.as_retriever(top_k), choose_llm(llm).llm, **kwargs)


class DenseIndex(_Baseline):
    """``dense``: a ``VectorStoreIndex`` that builds, persists, loads, inserts and deletes."""

    config_class = DenseConfig

    def __init__(
        self,
        nodes: Sequence[BaseNode] | None = None,
        config: str | DenseConfig | None = None,
        *,
        embed_model: BaseEmbedding | None = None,
        show_progress: bool = False,
        index: VectorStoreIndex | None = None,
        llm: Any = None,
        **overrides: Any,
    ) -> None:
        self._set_config(config, overrides)
        self.embed_model = resolve_embed_model(embed_model)
        if index is None:
            storage = compact_storage_context(vector_store=NumpyVectorStore())
            index = VectorStoreIndex([], embed_model=self.embed_model, storage_context=storage)
            embedded = self._embedded(nodes or [], show_progress)
            # A batch at a time through the ``_insert`` hook, the struct written once
            # at the end (as LlamaIndex's constructor does): LlamaIndex holds vectors
            # as Python floats, and a whole corpus at once was the build's peak memory.
            for start in range(0, len(embedded), _INSERT_BATCH):
                index._insert(embedded[start : start + _INSERT_BATCH])
            index.storage_context.index_store.add_index_struct(index.index_struct)
        self.index = index

    def _embedded(self, nodes: Sequence[BaseNode], show_progress: bool) -> list[BaseNode]:
        """The nodes to store, with their vectors (sentences split out first if so configured)."""
        nodes = list(nodes)
        if self.config.retrieval.nodes == "sentences":
            from llama_index.core.node_parser import SentenceWindowNodeParser

            parser = SentenceWindowNodeParser.from_defaults(
                window_size=self.config.retrieval.window_size
            )
            sentences = []
            for chunk in nodes:
                source = chunk.source_node  # each sentence points at the chunk's document
                for node in parser.get_nodes_from_documents([chunk]):
                    if node.get_content().strip():
                        if source is not None:
                            node.relationships[NodeRelationship.SOURCE] = source
                        sentences.append(node)
            nodes = sentences
        texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        vectors = embed_texts(self.embed_model, texts, show_progress=show_progress)
        for node, vector in zip(nodes, vectors, strict=True):
            node.embedding = vector.tolist()
        return nodes

    @classmethod
    def load(cls, folder: Path, embed_model: BaseEmbedding | None = None, **_: Any) -> DenseIndex:
        config = cls._read_config(folder)
        store = NumpyVectorStore.from_persist_path(str(Path(folder) / _VECTORS))
        storage = StorageContext.from_defaults(persist_dir=str(folder), vector_store=store)
        embed_model = resolve_embed_model(embed_model)
        index = load_index_from_storage(storage, embed_model=embed_model)
        return cls(config=config, embed_model=embed_model, index=index)

    def persist(self, folder: Path) -> None:
        self.index.storage_context.persist(persist_dir=str(folder))
        self._write_config(Path(folder))

    def insert_nodes(self, nodes: Sequence[BaseNode]) -> None:
        self.index.insert_nodes(self._embedded(nodes, False))

    def delete_ref_doc(self, ref_doc_id: str) -> None:
        self.index.delete_ref_doc(ref_doc_id, delete_from_docstore=True)

    def __len__(self) -> int:
        return len(self.index.index_struct.nodes_dict)

    def as_retriever(self, similarity_top_k: int = 5, **_: Any) -> DenseRetriever:
        similarity_top_k = top_k_of(similarity_top_k, 5)
        if self.config.retrieval.nodes == "sentences":
            # A passage's sentences come in runs: ask for several per passage wanted.
            similarity_top_k *= self.config.retrieval.sentences_per_passage
        return DenseRetriever(self.index, similarity_top_k=similarity_top_k)

    def stats(self) -> dict[str, Any]:
        return {"vectors": len(self), "nodes": self.config.retrieval.nodes}


class BM25Index(_Baseline):
    """``bm25``: chunks in a docstore (by document), BM25 fitted over them on demand."""

    config_class = BM25Config

    def __init__(
        self,
        nodes: Sequence[BaseNode] | None = None,
        config: str | BM25Config | None = None,
        *,
        docstore: SimpleDocumentStore | None = None,
        embed_model: Any = None,
        llm: Any = None,
        show_progress: bool = False,
        **overrides: Any,
    ) -> None:
        self._set_config(config, overrides)
        if docstore is None:
            docstore = SimpleDocumentStore()
            docstore.add_documents(list(nodes or []))
        self.docstore = docstore

    @classmethod
    def load(cls, folder: Path, **_: Any) -> BM25Index:
        config = cls._read_config(folder)
        docstore = SimpleDocumentStore.from_persist_path(str(Path(folder) / "docstore.json"))
        return cls(config=config, docstore=docstore)

    def persist(self, folder: Path) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        self.docstore.persist(str(Path(folder) / "docstore.json"))
        self._write_config(Path(folder))

    def insert_nodes(self, nodes: Sequence[BaseNode]) -> None:
        self.docstore.add_documents(list(nodes))

    def delete_ref_doc(self, ref_doc_id: str) -> None:
        self.docstore.delete_ref_doc(ref_doc_id, raise_error=False)

    def __len__(self) -> int:
        return len(self.docstore.docs)

    def as_retriever(self, similarity_top_k: int = 5, **_: Any) -> BM25Retriever:
        similarity_top_k = top_k_of(similarity_top_k, 5)
        nodes = list(self.docstore.docs.values())
        if not nodes:
            raise ValueError("the bm25 index holds no chunk")
        bm25 = self.config.bm25
        return BM25Retriever(nodes, similarity_top_k=similarity_top_k, k1=bm25.k1, b=bm25.b)

    def stats(self) -> dict[str, Any]:
        return {"chunks": len(self)}


class HybridIndex(DenseIndex):
    """``li-hybrid``: the ``dense`` index, and at query time LlamaIndex's ``BM25Retriever``
    over its chunks fused with its vector retriever by ``QueryFusionRetriever``
    (reciprocal rank, one query, no LLM)."""

    config_class = HybridConfig  # type: ignore[assignment]

    def _embedded(self, nodes: Sequence[BaseNode], show_progress: bool) -> list[BaseNode]:
        nodes = list(nodes)
        texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        vectors = embed_texts(self.embed_model, texts, show_progress=show_progress)
        for node, vector in zip(nodes, vectors, strict=True):
            node.embedding = vector.tolist()
        return nodes

    def as_retriever(self, similarity_top_k: int = 5, **_: Any):
        similarity_top_k = top_k_of(similarity_top_k, 5)
        from llama_index.core.llms import MockLLM
        from llama_index.core.retrievers import QueryFusionRetriever
        from llama_index.retrievers.bm25 import BM25Retriever as LlamaIndexBM25

        nodes = list(self.index.docstore.docs.values())
        bm25 = LlamaIndexBM25(
            nodes=nodes, similarity_top_k=min(similarity_top_k, len(nodes)), language="en"
        )
        fusion = QueryFusionRetriever(
            [self.index.as_retriever(similarity_top_k=similarity_top_k), bm25],
            llm=MockLLM(),  # num_queries=1 never asks it; it keeps Settings.llm unresolved
            mode="reciprocal_rerank",
            similarity_top_k=similarity_top_k,
            num_queries=1,
            use_async=False,
        )
        return _RankEvidence(fusion, "li-hybrid", "rrf")

    def stats(self) -> dict[str, Any]:
        return {"vectors": len(self)}


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
        require_query(query_bundle.query_str, query_bundle.embedding)  # as every retriever
        return self._wrap(self._inner.retrieve(query_bundle))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        require_query(query_bundle.query_str, query_bundle.embedding)
        return self._wrap(await self._inner.aretrieve(query_bundle))
