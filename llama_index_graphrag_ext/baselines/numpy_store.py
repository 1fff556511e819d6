"""An in-memory LlamaIndex vector store on one float32 matrix (the dense baseline's default).

LlamaIndex's ``SimpleVectorStore`` keeps every vector as a Python list of
floats (several times the bytes of float32) and scores a query in a Python
loop over all rows, rebuilding a numpy array each time, so a query's cost grows
linearly in Python (105 ms at 1,000 chunks on the shared test machine, see
``docs/scaling.md``). This store keeps unit rows in one matrix and scores a
query with one matrix-vector product, with the same cosine scores and ranking.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from pydantic import PrivateAttr

from ..core.embeddings import normalize_rows


class NumpyVectorStore(BasePydanticVectorStore):
    """Exact cosine top-k over a float32 matrix; nodes live in the index's docstore.

    Supports the default query mode, ``node_ids`` restriction and
    ``delete(ref_doc_id)``; metadata filters are refused with a clear error (use
    ``SimpleVectorStore`` or an external store for those). Thread-safe.
    """

    stores_text: bool = False
    is_embedding_query: bool = True
    _ids: list = PrivateAttr(default_factory=list)
    _refs: list = PrivateAttr(default_factory=list)
    _rows: dict = PrivateAttr(default_factory=dict)
    _matrix: Any = PrivateAttr(default=None)
    _size: int = PrivateAttr(default=0)
    _lock: Any = PrivateAttr(default_factory=threading.RLock)
    _version: int = PrivateAttr(default=0)
    _restriction_cache: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "NumpyVectorStore"

    @property
    def client(self) -> None:
        """No client: the store is this object."""
        return None

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        # An empty store is still a store: LlamaIndex picks defaults with ``or``.
        return True

    def _append(self, ids: list[str], refs: list[str | None], vectors: np.ndarray) -> None:
        """Add rows (replacing rows with the same id), growing the matrix geometrically."""
        with self._lock:
            replaced = [i for i in ids if i in self._rows]
            if replaced:
                self._drop(set(replaced))
            n, dim = vectors.shape
            if self._matrix is None:
                self._matrix = np.empty((max(n, 16), dim), dtype=np.float32)
            elif self._matrix.shape[1] != dim:
                raise ValueError(f"vector dimension {dim} != the store's {self._matrix.shape[1]}")
            if self._size + n > len(self._matrix):
                grown = np.empty((max(2 * len(self._matrix), self._size + n), dim), np.float32)
                grown[: self._size] = self._matrix[: self._size]
                self._matrix = grown
            self._matrix[self._size : self._size + n] = vectors
            for offset, node_id in enumerate(ids):
                self._rows[node_id] = self._size + offset
            self._ids.extend(ids)
            self._refs.extend(refs)
            self._size += n
            self._version += 1

    def _drop(self, doomed: set[str]) -> None:
        keep = [r for r, node_id in enumerate(self._ids) if node_id not in doomed]
        self._matrix = self._matrix[keep].copy() if keep else None
        self._ids = [self._ids[r] for r in keep]
        self._refs = [self._refs[r] for r in keep]
        self._rows = {node_id: r for r, node_id in enumerate(self._ids)}
        self._size = len(keep)
        self._version += 1

    def _restriction(self, node_ids: list[str]) -> np.ndarray | None:
        """Rows of ``node_ids`` (None when they are every row).

        ``VectorStoreIndex.as_retriever`` passes the list of all its node ids
        with every query: the answer is cached for that list object, so a query
        costs one matrix-vector product, not a dictionary lookup per row.
        """
        cached = self._restriction_cache
        if cached is not None and cached[0] is node_ids and cached[1] == self._version:
            return cached[2]
        lookup = self._rows
        rows = np.asarray([lookup[i] for i in node_ids if i in lookup], dtype=np.int64)
        result = None if len(rows) == self._size else rows  # ids are unique: all rows
        self._restriction_cache = (node_ids, self._version, result)
        return result

    def add(self, nodes: list[BaseNode], **kwargs: Any) -> list[str]:
        """Add nodes that carry embeddings; returns their ids."""
        if not nodes:
            return []
        missing = [n.node_id for n in nodes if n.embedding is None]
        if missing:
            raise ValueError(
                f"NumpyVectorStore.add: nodes without an embedding, e.g. {missing[:3]}"
            )
        vectors = normalize_rows(np.asarray([n.embedding for n in nodes], dtype=np.float32))
        ids = [n.node_id for n in nodes]
        self._append(ids, [n.ref_doc_id for n in nodes], vectors)
        return ids

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Remove every row whose source document is ``ref_doc_id``."""
        with self._lock:
            doomed = {i for i, ref in zip(self._ids, self._refs, strict=True) if ref == ref_doc_id}
            if doomed:
                self._drop(doomed)

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Exact top-k by cosine similarity."""
        if query.filters is not None:
            raise ValueError(
                "NumpyVectorStore does not filter by metadata; pass vector_store=SimpleVectorStore() "
                "or an external store to build_dense_index for filtered search"
            )
        if query.mode != VectorStoreQueryMode.DEFAULT:
            raise ValueError(f"NumpyVectorStore supports the default query mode, not {query.mode}")
        if query.query_embedding is None:
            raise ValueError("NumpyVectorStore.query needs a query embedding")
        with self._lock:
            if not self._size:
                return VectorStoreQueryResult(ids=[], similarities=[], nodes=None)
            matrix, ids = self._matrix[: self._size], self._ids
            rows = None if query.node_ids is None else self._restriction(query.node_ids)
        vector = normalize_rows(np.asarray(query.query_embedding, dtype=np.float32))[0]
        scores = (matrix if rows is None else matrix[rows]) @ vector
        k = min(int(query.similarity_top_k or 1), len(scores))
        if k <= 0:
            return VectorStoreQueryResult(ids=[], similarities=[], nodes=None)
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        top = top[np.argsort(-scores[top], kind="stable")]
        picked = top if rows is None else rows[top]
        return VectorStoreQueryResult(
            ids=[ids[r] for r in picked],
            similarities=[float(s) for s in scores[top]],
            nodes=None,
        )

    def persist(self, persist_path: str, fs: Any = None) -> None:
        """Write the matrix and ids next to ``persist_path`` (``.npy`` and ``.json``)."""
        path = Path(persist_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            matrix = self._matrix[: self._size] if self._size else np.zeros((0, 0), np.float32)
            np.save(path.with_suffix(".npy"), matrix)
            path.write_text(json.dumps({"ids": self._ids, "refs": self._refs}), encoding="utf-8")

    @classmethod
    def from_persist_path(cls, persist_path: str, fs: Any = None) -> NumpyVectorStore:
        """Load a store written by :meth:`persist`."""
        path = Path(persist_path)
        meta = json.loads(path.read_text(encoding="utf-8"))
        store = cls()
        matrix = np.load(path.with_suffix(".npy"))
        if len(meta["ids"]):
            store._append(list(meta["ids"]), list(meta["refs"]), matrix)
        return store
