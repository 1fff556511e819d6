"""Atomic, versioned ``persist`` and ``load`` of the suite's indexes (`PersistedIndex`).

A folder holds the manifest (kind, format version, settings, chunk ids, the LLM
step ledger, the vector store's identity), LlamaIndex's index store, the chunks'
docstore, the graph view when the index has one, and the method's own state
(its ``_persist_state`` / ``_load_state`` hooks). It is written into a temporary
folder that replaces the old one only once complete.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core import StorageContext
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks import CallbackManager
from llama_index.core.data_structs.data_structs import IndexList
from llama_index.core.data_structs.registry import INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS
from llama_index.core.indices.registry import INDEX_STRUCT_TYPE_TO_INDEX_CLASS
from llama_index.core.llms import LLM
from llama_index.core.storage.index_store import SimpleIndexStore
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from .compact_store import (
    CompactDocumentStore,
    CompactKVStore,
    compact_docstore,
    compact_storage_context,
)
from .graph import TypedGraph
from .persist import MANIFEST, IndexFormatError, atomic_dir, read_manifest, write_manifest

logger = logging.getLogger(__name__)

#: LlamaIndex's index-store file name, written so its loader finds the suite's struct.
INDEX_STORE_FILE = "index_store.json"
#: Type key of the suite's index structs in LlamaIndex's index store.
SUITE_STRUCT_TYPE = "graphrag_ext_index"


@dataclass
class SuiteIndexList(IndexList):
    """LlamaIndex's ``IndexList``, tagged with the suite index class that owns it."""

    index_class: str = ""

    @classmethod
    def get_type(cls) -> str:  # type: ignore[override]
        return SUITE_STRUCT_TYPE


def _refuse_generic_load(index_struct: SuiteIndexList, **kwargs: Any) -> None:
    """What ``load_index_from_storage`` meets for a suite index: an error that says how to load it."""
    dotted = index_struct.index_class or "a llama-index-graphrag-ext index"
    name = dotted.rsplit(".", 1)[-1]
    raise IndexFormatError(
        f"This storage holds {dotted}, which LlamaIndex's load_index_from_storage cannot "
        f"rebuild (its graph and vectors live in files of its own). Persist it with "
        f"index.persist(dir) and load it with {name}.load(dir)."
    )


# LlamaIndex's ``load_index_from_storage`` meets a tagged struct and says how to load it.
INDEX_STRUCT_TYPE_TO_INDEX_STRUCT_CLASS[SUITE_STRUCT_TYPE] = SuiteIndexList  # type: ignore[index]
INDEX_STRUCT_TYPE_TO_INDEX_CLASS[SUITE_STRUCT_TYPE] = _refuse_generic_load  # type: ignore[index]

#: File names every persisted graph index uses (``graphrag-ext viz`` reads ``GRAPH_FILE``).
DOCSTORE_FILE = "docstore.json"
GRAPH_FILE = "graph.json.gz"
#: Chunks decoded at a time while persisting.
_PERSIST_SLICE = 1024


class PersistedIndex:
    """``persist`` and ``load`` of :class:`~.index.GraphIndexBase` (mixed into it)."""

    def persist(self, persist_dir: str | os.PathLike) -> None:
        """Write the index to ``persist_dir`` atomically (the old copy survives a failure).

        With a ``vector_store`` the manifest also records the store's identity
        (class, collection, address; never a token), the namespace and each
        table's row count; the folder keeps the index's own matrices as well, so
        it loads with or without the store.
        """
        extra = {}
        if self._store_tables is not None:
            extra["vector_store"] = self._store_tables.describe()
        with self._lock, atomic_dir(persist_dir) as tmp:
            write_manifest(
                tmp,
                self.index_kind,
                self.format_version,
                config=_portable(self.config),
                config_origin=self.config.origin,
                chunk_ids=self.chunk_ids(),
                index_class=f"{type(self).__module__}.{type(self).__qualname__}",
                llm_steps=self.llm_steps.to_dict(),
                **extra,
            )
            store = SimpleIndexStore()
            store.add_index_struct(self._new_struct(self.chunk_ids()))
            store.persist(str(tmp / INDEX_STORE_FILE))
            docstore = compact_docstore()  # persists the plain layout
            ids = self.chunk_ids()
            for start in range(0, len(ids), _PERSIST_SLICE):  # decoded nodes: a slice at a time
                docstore.add_documents(self.get_chunks(ids[start : start + _PERSIST_SLICE]))
            docstore.persist(str(tmp / DOCSTORE_FILE))
            graph = self.graph  # once: a subclass may build it on demand
            if graph is not None:
                graph.save(tmp / GRAPH_FILE)
            self._persist_state(tmp)

    @classmethod
    def load(
        cls,
        persist_dir: str | os.PathLike,
        *,
        embed_model: BaseEmbedding | None = None,
        llm: LLM | None = None,
        callback_manager: CallbackManager | None = None,
        vector_store: BasePydanticVectorStore | None = None,
        vector_namespace: str | None = None,
        storage_context: StorageContext | None = None,
        **settings: Any,
    ):
        """Load an index written by :meth:`persist` (format version checked).

        The embedder must be the one the index was built with; the manifest
        records its name, and a mismatch in dimension is an error.

        Pass ``vector_store`` (connected to the same collection) to search the
        external store again: rows it already holds are reused, missing or
        stale tables are written from the folder. Without it the index searches
        in memory, whatever it was built with.

        Pass ``storage_context`` to keep the chunks in its docstore (any
        LlamaIndex docstore: a ``SimpleDocumentStore`` persisted to a path,
        DuckDB, Redis, MongoDB, Postgres, ...) instead of a fresh in-memory one;
        chunks it lacks are copied into it from the folder.

        ``settings`` are the method's own component objects (e.g. FG-RAG's
        ``property_graph_store``); the config is the one stored with the index.
        """
        folder = Path(persist_dir)
        manifest = read_manifest(folder, cls.index_kind, cls.format_version)
        recorded = manifest.get("vector_store") or {}
        if vector_namespace is None:
            vector_namespace = recorded.get("namespace")
        if recorded and vector_store is None:
            logger.info(
                "%s was built on %s; loading it without a vector store searches in memory",
                folder,
                recorded.get("class"),
            )
        saved = CompactDocumentStore(
            simple_kvstore=CompactKVStore.from_persist_path(str(folder / DOCSTORE_FILE))
        )
        struct = SuiteIndexList(
            nodes=list(manifest["chunk_ids"]), index_class=f"{cls.__module__}.{cls.__qualname__}"
        )
        if storage_context is None:
            storage_context = compact_storage_context(docstore=saved)
        else:
            missing = [i for i in struct.nodes if not storage_context.docstore.document_exists(i)]
            if missing:
                logger.info("load: copying %d chunk(s) into the given docstore", len(missing))
                storage_context.docstore.add_documents(saved.get_nodes(missing))
        index = cls(
            index_struct=struct,
            storage_context=storage_context,
            embed_model=embed_model,
            llm=llm,
            callback_manager=callback_manager,
            vector_store=vector_store,
            vector_namespace=vector_namespace,
            config=_stored_config(cls, manifest, folder, settings),
            **settings,
        )
        with index._lock:
            if (folder / GRAPH_FILE).is_file():
                index._graph = TypedGraph.load(folder / GRAPH_FILE)
            index._load_state(folder, manifest)
            index.llm_steps.load(manifest.get("llm_steps"))
            index._attach_store()
        return index


#: Config fields that name files. A manifest is data anyone may hand over, so it may not
#: choose files on the loader's machine: a spaCy pipeline from elsewhere would be loaded,
#: a cache elsewhere written. The LLM cache is where this process keeps replies, not part
#: of the index: it is never persisted. A loader passes either itself (``load(dir,
#: spacy_model=...)``); a pipeline named as an installed package is fine.
_PATH_FIELDS = ("cache_path", "spacy_model")


def _portable(config: Any) -> dict[str, Any]:
    data = config.model_dump(mode="json")
    section = config.field_sections().get("cache_path")
    if section is not None:
        data[section]["cache_path"] = None
    return data


def _stored_config(cls: Any, manifest: dict[str, Any], folder: Path, given: dict) -> Any:
    config = cls.config_class.model_validate(manifest.get("config") or {})
    config._origin = manifest.get("config_origin") or ""
    flat = config.flat()
    for name in _PATH_FIELDS:
        value = flat.get(name)
        if name not in given and isinstance(value, str) and _is_path(name, value):
            raise IndexFormatError(
                f"{folder / MANIFEST} names a file, {name}={value!r}; a persisted index "
                f"may not choose files on this machine: pass {name}=... to load()"
            )
    return config


def _is_path(name: str, value: str) -> bool:
    """A spaCy model is a package name unless it looks like a path; a cache is a path."""
    return name != "spacy_model" or any(c in value for c in "/\\") or value[:1] in ".~"
