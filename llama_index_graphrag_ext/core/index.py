"""The base class of the suite's indexes: a LlamaIndex ``BaseIndex`` with graph-method plumbing.

A method's index subclasses :class:`GraphIndexBase`, names its
:class:`~.config.MethodConfig` class (``config_class``) and implements the hooks
``_add_chunks(nodes)``, ``_remove_chunks(ids)``, ``_persist_state(folder)`` and
``_load_state(folder, manifest)``, and, when its retrievers search vectors,
``_searchable()`` (name -> ids and matrix). Every index takes ``config=`` (a
preset name or a config; fields can also be given by name) and keeps it as
``index.config``; its manifest stores it. Retrievers search those through
:meth:`GraphIndexBase.searcher`: in memory, or in the ``vector_store=`` the
index mirrors them into; both answer alike.

Everything else is shared: ``from_documents`` (with input hygiene), insert and
delete on LlamaIndex's docstore bookkeeping (async twins off the caller's
loop), atomic versioned ``persist`` and ``load``, the LLM picked once by the
suite's rule with a persisted step ledger (``llm_steps``), ``as_query_engine``,
and a lock that serialises writers while readers use consistent snapshots.
LlamaIndex's ``load_index_from_storage`` raises an error naming
``Class.load(dir)`` for a suite index instead of returning a ``SummaryIndex``.
"""

from __future__ import annotations

import inspect
import logging
import threading
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from llama_index.core import StorageContext
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.data_structs.data_structs import IndexList
from llama_index.core.indices.base import BaseIndex
from llama_index.core.llms import LLM
from llama_index.core.schema import BaseNode, Document, TransformComponent
from llama_index.core.storage.docstore.types import RefDocInfo
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from .aio import OffLoopWrites
from .compact_store import compact_storage_context
from .config import MethodConfig
from .defaults import resolve_embed_model
from .graph import TypedGraph
from .index_persist import PersistedIndex, SuiteIndexList
from .lexical import LexicalTable, fuse_ids
from .llm import LLMChoice, LLMSteps, choose_llm
from .nodes import prepare_documents
from .rwlock import ReadWriteLock
from .vectors import MatrixSearch, RowSearcher, StoreTables

logger = logging.getLogger(__name__)


class GraphIndexBase(OffLoopWrites, PersistedIndex, BaseIndex[IndexList]):
    """Shared plumbing of the suite's indexes (subclass it; see the module docs).

    Args:
        nodes: Chunk nodes to index (``from_documents`` makes them from documents).
        config: The method's settings: a preset name (``"default"``, the measured
            setting, when omitted; ``"paper"``: the paper's) or a config object.
        embed_model: Embedder; falls back to ``Settings`` then the embedded MiniLM.
        llm: LLM for LLM-backed steps and ``as_query_engine``; without one the
            suite's rule picks it once (``Settings.llm``, the environment, the
            embedded SmolLM2; see :mod:`.llm.resolve`).
        callback_manager: LlamaIndex callbacks; falls back to ``Settings``.
        storage_context: Where the docstore lives. By default a fresh in-memory one
            that keeps each node as compressed JSON (:mod:`.compact_store`): a
            third of the memory of LlamaIndex's dict-per-node default.
        vector_store: A LlamaIndex vector store (Milvus, Qdrant, ...) that holds the
            vectors the retrievers search; ``None`` keeps them in memory (the
            default, exact). The index still keeps its own matrices for graph
            construction and scoring; see ``docs/vector-stores.md``.
        vector_namespace: Prefix of this index's table names in the store (default:
            the index kind); give two indexes sharing one collection distinct ones.
        show_progress: Show progress bars while building.
        **options: Config fields by name (over ``config``), and the subclass's own
            component objects (taken by :meth:`_configure`).
    """

    #: Manifest kind; each subclass sets its own.
    index_kind: ClassVar[str] = "graph-index"
    #: Format version written by this release; bump when the files change.
    format_version: ClassVar[int] = 2
    #: The method's settings (each subclass sets its own).
    config_class: ClassVar[type[MethodConfig]] = MethodConfig

    def __init__(
        self,
        nodes: Sequence[BaseNode] | None = None,
        config: str | MethodConfig | None = None,
        *,
        embed_model: BaseEmbedding | None = None,
        llm: LLM | None = None,
        callback_manager: CallbackManager | None = None,
        storage_context: StorageContext | None = None,
        vector_store: BasePydanticVectorStore | None = None,
        vector_namespace: str | None = None,
        show_progress: bool = False,
        index_struct: IndexList | None = None,
        transformations: list[TransformComponent] | None = None,
        llm_steps: LLMSteps | None = None,
        **options: Any,
    ) -> None:
        fields = self.config_class.field_sections()
        overrides = {k: options.pop(k) for k in list(options) if k in fields}
        #: The method's settings (a frozen :class:`~.config.MethodConfig`).
        self.config = self.config_class.resolve(config, **overrides)
        self._embed_model = resolve_embed_model(embed_model)
        self._llm_arg = llm
        self._llm_choice: LLMChoice | None = None
        #: Which LLM and tier each LLM step used, and its fallbacks (persisted).
        self.llm_steps = llm_steps if llm_steps is not None else LLMSteps(type(self).__name__)
        self._lock = threading.RLock()
        self._rw = ReadWriteLock()  # insert/delete against retrievals (core/rwlock.py)
        # BM25 tables derived from the index's texts (core/lexical.py): name -> (key, table).
        self._lexical: dict[str, tuple[Any, LexicalTable]] = {}
        self._lexical_lock = threading.Lock()
        self._passages_version = object()  # replaced by every write
        self._store_tables = (
            StoreTables(vector_store, vector_namespace or self.index_kind)
            if vector_store is not None
            else None
        )
        self._check_options(options)
        self._configure(**options)
        if storage_context is None:
            storage_context = compact_storage_context()
        super().__init__(
            nodes=nodes if index_struct is None else None,
            index_struct=index_struct,
            storage_context=storage_context,
            callback_manager=callback_manager,
            show_progress=show_progress,
            transformations=transformations,
        )

    # ------------------------------------------------------------------ hooks

    def _configure(self, **objects: Any) -> None:
        """Set up from :attr:`config` before anything is built; take the subclass's own
        component objects (its keyword arguments)."""

    def _check_options(self, options: dict[str, Any]) -> None:
        taken = inspect.signature(self._configure).parameters
        unknown = sorted(set(options) - set(taken))
        if unknown:
            settings = ", ".join(sorted(self.config_class.field_sections()))
            raise TypeError(
                f"{type(self).__name__} got unknown settings {unknown}; its settings: "
                f"{settings}; its objects: {', '.join(taken) or 'none'}"
            )

    def stats(self) -> dict[str, Any]:
        """Sizes and counts for reports and ``graphrag-ext info`` (subclasses add theirs)."""
        return {"chunks": len(self)}

    @abstractmethod
    def _add_chunks(self, nodes: Sequence[BaseNode]) -> None:
        """Add new chunks (never already present) to the method's structures."""

    @abstractmethod
    def _remove_chunks(self, node_ids: Sequence[str]) -> None:
        """Remove chunks (all present) from the method's structures."""

    @abstractmethod
    def _persist_state(self, folder: Path) -> None:
        """Write the method's own files into ``folder``."""

    @abstractmethod
    def _load_state(self, folder: Path, manifest: dict[str, Any]) -> None:
        """Read what :meth:`_persist_state` wrote."""

    def _searchable(self) -> dict[str, tuple[Sequence[str], Any]]:
        """The tables retrievers search first: name -> (ids, ``(n, d)`` matrix), row-aligned.

        Only consulted when the index has a ``vector_store``; the default has none.
        """
        return {}

    # ---------------------------------------------------------- vector store

    @property
    def vector_store(self) -> BasePydanticVectorStore | None:
        """The external vector store holding the searched tables (``None``: in memory)."""
        return self._store_tables.vector_store if self._store_tables is not None else None

    def searcher(self, name: str, snapshot: object, ids: Any, matrix: Any) -> RowSearcher:
        """The first-hop search of table ``name`` over one snapshot's rows.

        Without a vector store: an exact :class:`~.vectors.MatrixSearch` of
        ``matrix``. With one: a :class:`~.vectors.RowSearch` of the store's table,
        its candidates mapped to the snapshot's rows and re-scored on ``matrix``.

        Args:
            name: A table of :meth:`_searchable`.
            snapshot: The retriever's snapshot (the store's id-to-row map is cached per snapshot).
            ids: The snapshot's ids in row order, or a function returning them
                (called only with a store).
            matrix: The snapshot's unit rows, row-aligned with ``ids``.
        """
        if self._store_tables is None:
            return MatrixSearch(matrix)
        return self._store_tables.row_search(name, snapshot, ids, matrix)

    def _sync_store(self) -> None:
        """Mirror the searched tables into the vector store (no-op without one)."""
        if self._store_tables is None:
            return
        for name, (ids, matrix) in self._searchable().items():
            self._store_tables.sync(name, ids, matrix)

    def _attach_store(self) -> None:
        """After a load: reuse the store's rows when it holds them, else write them."""
        if self._store_tables is None:
            return
        for name, (ids, matrix) in self._searchable().items():
            written = self._store_tables.attach(name, ids, matrix)
            logger.info(
                "%s: table %s %s the vector store (%d rows)",
                self.index_kind,
                name,
                "written to" if written else "found in",
                len(ids),
            )

    # ------------------------------------------------------------- lexical

    def lexical(self, name: str, snapshot: object, texts: Any) -> LexicalTable:
        """BM25 over table ``name`` of one snapshot (:mod:`.lexical`), built on first use.

        Args:
            name: The table (``"passages"``, ``"sentences"``, ...).
            snapshot: What the rows belong to; a new snapshot (after a write) rebuilds.
            texts: A function returning the rows' texts in row order.
        """
        with self._lexical_lock:
            held = self._lexical.get(name)
            if held is not None and held[0] is snapshot:
                return held[1]
            table = LexicalTable(texts())
            self._lexical[name] = (snapshot, table)
            return table

    def fuse_passages(
        self, query: str, ranked: Sequence[str], weight: float, depth: int
    ) -> tuple[list[str], list[float] | None, dict[str, int]]:
        """A method's passage order fused with BM25 over every indexed passage (:func:`.fuse`).

        Args:
            ranked: The method's chunk ids, best first (every candidate it scored).
            weight: The method's ``bm25_weight`` (0: ``ranked`` unchanged).
            depth: BM25's best passages taken into the fusion.

        Returns:
            The fused ids, best first, their fused scores (``None`` when ``weight`` is 0),
            and each BM25-ranked id's rank (from 1).
        """
        if weight <= 0:
            return list(ranked), None, {}
        bm25_ids = self.bm25_passages(query, depth)
        ids, fused = fuse_ids(ranked, bm25_ids, weight)
        return ids, fused, {c: i + 1 for i, c in enumerate(bm25_ids)}

    def bm25_passages(self, query: str, depth: int) -> list[str]:
        """The ids of BM25's ``depth`` best passages for ``query`` (a positive score), best first."""
        ids = list(self._index_struct.nodes)
        table = self.lexical("passages", self._passages_version, lambda: self.passage_texts(ids))
        top, _ = table.top(query, depth)
        return [ids[r] for r in top.tolist()]

    def passage_texts(self, ids: Sequence[str]) -> list[str]:
        """The chunks' texts as BM25 reads them (with their embedded metadata, e.g. titles)."""
        from llama_index.core.schema import MetadataMode

        out: list[str] = []
        for start in range(0, len(ids), 1024):  # decoded a batch at a time
            nodes = self.get_chunks(ids[start : start + 1024])
            out.extend(n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes)
        return out

    # ------------------------------------------------------------- properties

    @property
    def embed_model(self) -> BaseEmbedding:
        """The embedder."""
        return self._embed_model

    @property
    def llm_choice(self) -> LLMChoice:
        """The index's LLM as the suite's rule picked it, once (and where it came from)."""
        if self._llm_choice is None:
            self._llm_choice = choose_llm(self._llm_arg)
        return self._llm_choice

    @property
    def llm(self) -> LLM | None:
        """The index's LLM (``None``: LLM-free); see :attr:`llm_choice`."""
        return self.llm_choice.llm

    @property
    def graph(self) -> TypedGraph | None:
        """The method's graph, if it has one (``graphrag-ext viz`` draws it)."""
        return getattr(self, "_graph", None)

    def chunk_ids(self) -> list[str]:
        """Ids of the indexed chunks, in insertion order."""
        return list(self._index_struct.nodes)

    def get_chunks(self, node_ids: Sequence[str]) -> list[BaseNode]:
        """Chunk nodes by id, from the docstore."""
        return self.docstore.get_nodes(list(node_ids))

    def __len__(self) -> int:
        return len(self._index_struct.nodes)

    # ---------------------------------------------------------- construction

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        storage_context: StorageContext | None = None,
        show_progress: bool = False,
        callback_manager: CallbackManager | None = None,
        transformations: list[TransformComponent] | None = None,
        **kwargs: Any,
    ):
        """Build from documents: empty and duplicate ones are skipped and counted first.

        ``transformations`` default to ``Settings.transformations`` (LlamaIndex's
        sentence splitter); pass ``[PassageParser()]`` for one chunk per document.
        """
        documents, report = prepare_documents(documents)
        from llama_index.core import Settings

        transformations = transformations or Settings.transformations
        # LLM node parsers (LP-RAG's atomic chunker) record their step in the
        # index's ledger, so the manifest says how its chunks were made.
        steps = kwargs.pop("llm_steps", None) or LLMSteps(cls.__name__)
        for transform in transformations:
            if hasattr(transform, "attach_steps"):
                transform.attach_steps(steps)
        index = super().from_documents(
            documents,
            storage_context=storage_context or compact_storage_context(),
            show_progress=show_progress,
            callback_manager=callback_manager,
            transformations=transformations,
            llm_steps=steps,
            **kwargs,
        )
        index.input_report = report
        return index

    def _new_struct(self, nodes: Sequence[str] = ()) -> SuiteIndexList:
        cls = type(self)
        return SuiteIndexList(nodes=list(nodes), index_class=f"{cls.__module__}.{cls.__qualname__}")

    def _build_index_from_nodes(self, nodes: Sequence[BaseNode], **kwargs: Any) -> IndexList:
        struct = self._new_struct()
        unique = _unique(nodes)
        self._index_struct = struct  # hooks may look at it while building
        with self._lock:
            self._add_chunks(unique)
            for node in unique:
                struct.add_node(node)
            self._sync_store()
        return struct

    def reading(self):
        """Hold for one retrieval: no insert or delete runs until it ends (many readers may)."""
        return self._rw.reading()

    def _insert(self, nodes: Sequence[BaseNode], **kwargs: Any) -> None:
        with self._rw.writing(), self._lock:
            present = set(self._index_struct.nodes)
            new = [n for n in _unique(nodes) if n.node_id not in present]
            if len(new) < len(nodes):
                logger.info("insert: %d node(s) already indexed, skipped", len(nodes) - len(new))
            if not new:
                return
            self._add_chunks(new)
            for node in new:
                self._index_struct.add_node(node)
            self._passages_version = object()
            self._sync_store()

    def delete_nodes(
        self, node_ids: list[str], delete_from_docstore: bool = False, **kwargs: Any
    ) -> None:
        """Remove chunks (unknown ids are ignored) in one batch."""
        with self._rw.writing(), self._lock:
            present = set(self._index_struct.nodes)
            gone = [i for i in dict.fromkeys(node_ids) if i in present]
            if gone:
                self._remove_chunks(gone)
                drop = set(gone)
                self._index_struct.nodes = [i for i in self._index_struct.nodes if i not in drop]
                self._passages_version = object()
                self._sync_store()
            if delete_from_docstore:
                for node_id in gone:
                    self.docstore.delete_document(node_id, raise_error=False)
            self._storage_context.index_store.add_index_struct(self._index_struct)

    def _delete_node(self, node_id: str, **kwargs: Any) -> None:
        self.delete_nodes([node_id])

    def delete_ref_doc(
        self, ref_doc_id: str, delete_from_docstore: bool = True, **kwargs: Any
    ) -> None:
        """Remove a document's chunks (and, by default, the docstore's copy)."""
        with self._rw.writing():
            super().delete_ref_doc(ref_doc_id, delete_from_docstore=delete_from_docstore, **kwargs)

    @property
    def ref_doc_info(self) -> dict[str, RefDocInfo]:
        """Documents indexed and the chunk ids each became."""
        ref_ids = {n.ref_doc_id for n in self.get_chunks(self.chunk_ids()) if n.ref_doc_id}
        out = {}
        for ref_id in ref_ids:
            info = self.docstore.get_ref_doc_info(ref_id)
            if info is not None:
                out[ref_id] = info
        return out

    # --------------------------------------------------------------- engines

    def as_query_engine(self, llm: LLM | None = None, **kwargs: Any):
        """A ``RetrieverQueryEngine`` over :meth:`as_retriever` answering with this index's
        LLM through the suite's caller (see :mod:`.llm.answering`: no reasoning in the
        answer, a cut one flagged in ``response.metadata["answer_cut"]``)."""
        from .llm.answering import answer_engine

        retriever_keys = set(kwargs) - _SYNTHESIS_KEYS
        retriever = self.as_retriever(**{k: kwargs[k] for k in retriever_keys})
        return answer_engine(
            retriever,
            llm or self.llm,
            getattr(self.config, "llm", None),
            callback_manager=self._callback_manager,
            **{k: v for k, v in kwargs.items() if k in _SYNTHESIS_KEYS},
        )


_SYNTHESIS_KEYS = frozenset(
    {
        "response_synthesizer",
        "node_postprocessors",
        "response_mode",
        "text_qa_template",
        "refine_template",
        "summary_template",
        "simple_template",
        "streaming",
        "use_async",
        "output_cls",
        "verbose",
    }
)


def _unique(nodes: Sequence[BaseNode]) -> list[BaseNode]:
    seen: dict[str, BaseNode] = {}
    for node in nodes:
        seen.setdefault(node.node_id, node)
    return list(seen.values())
