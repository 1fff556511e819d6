"""Vector tables: named rows of unit vectors, searchable by exact or store-side top-k.

Methods keep each kind of vector (chunks, queries, units, entities, ...) in a
:class:`VectorTable`. The default, :class:`InMemoryVectorTable`, is a numpy
matrix: exact search by one matrix-vector product. :class:`VectorStoreTable`
keeps the vectors in any LlamaIndex vector store instead (Milvus, Qdrant,
pgvector, ...) for corpora beyond one machine; its search is the store's own,
so approximate stores may return slightly different neighbours.
"""

from __future__ import annotations

import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from .embeddings import normalize_rows, top_k
from .persist import read_arrays, read_json, write_arrays, write_json

logger = logging.getLogger(__name__)


class VectorTable(ABC):
    """Named unit vectors with top-k search by cosine similarity."""

    @abstractmethod
    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add (or replace) rows; vectors are normalised on the way in."""

    @abstractmethod
    def delete(self, ids: Sequence[str]) -> None:
        """Remove rows; unknown ids are ignored."""

    @abstractmethod
    def query(
        self, vector: np.ndarray, k: int, *, allowed: Sequence[str] | None = None
    ) -> tuple[list[str], np.ndarray]:
        """Return the ``k`` ids nearest ``vector`` and their cosine scores, best first.

        Args:
            vector: The query vector.
            k: How many.
            allowed: Optional ids to restrict the search to.
        """

    @abstractmethod
    def __len__(self) -> int: ...

    @abstractmethod
    def __contains__(self, node_id: object) -> bool: ...


class InMemoryVectorTable(VectorTable):
    """A numpy matrix of unit rows with an id index. Exact search.

    Reads are safe from several threads; writes take a lock and swap in new
    arrays, so a reader always sees a consistent table.
    """

    def __init__(self, dim: int | None = None) -> None:
        self._ids: list[str] = []
        self._row: dict[str, int] = {}
        self._matrix = np.zeros((0, dim or 0), dtype=np.float32)
        self._lock = threading.Lock()

    @property
    def ids(self) -> list[str]:
        """Row ids in row order."""
        return list(self._ids)

    @property
    def matrix(self) -> np.ndarray:
        """The ``(n, d)`` float32 matrix (do not modify in place)."""
        return self._matrix

    @property
    def dim(self) -> int:
        """Vector dimension (0 while empty and unset)."""
        return int(self._matrix.shape[1])

    def row_of(self, node_id: str) -> int:
        """Row index of an id (KeyError if absent)."""
        return self._row[node_id]

    def get(self, ids: Sequence[str]) -> np.ndarray:
        """The vectors of ``ids`` as a ``(len(ids), d)`` matrix."""
        return self._matrix[[self._row[i] for i in ids]]

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        if len(ids) == 0:
            return
        vectors = normalize_rows(vectors)
        if len(ids) != vectors.shape[0]:
            raise ValueError(f"{len(ids)} ids for {vectors.shape[0]} vectors")
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate ids in one add()")
        with self._lock:
            matrix = self._matrix
            if matrix.shape[0] and matrix.shape[1] != vectors.shape[1]:
                raise ValueError(f"dimension {vectors.shape[1]} != table's {matrix.shape[1]}")
            new_rows = [i for i, node_id in enumerate(ids) if node_id not in self._row]
            if len(new_rows) < len(ids):  # replacements are written in place on a copy
                matrix = matrix.copy()
                for i, node_id in enumerate(ids):
                    if node_id in self._row:
                        matrix[self._row[node_id]] = vectors[i]
            if matrix.shape[0] == 0:
                matrix = np.zeros((0, vectors.shape[1]), dtype=np.float32)
            ids_new = self._ids + [ids[i] for i in new_rows]
            matrix = np.vstack([matrix, vectors[new_rows]]) if new_rows else matrix
            self._row = {node_id: r for r, node_id in enumerate(ids_new)}
            self._ids, self._matrix = ids_new, matrix

    def delete(self, ids: Sequence[str]) -> None:
        drop = {i for i in ids if i in self._row}
        if not drop:
            return
        with self._lock:
            keep = [r for r, node_id in enumerate(self._ids) if node_id not in drop]
            ids_new = [self._ids[r] for r in keep]
            self._matrix = self._matrix[keep]
            self._row = {node_id: r for r, node_id in enumerate(ids_new)}
            self._ids = ids_new

    def query(
        self, vector: np.ndarray, k: int, *, allowed: Sequence[str] | None = None
    ) -> tuple[list[str], np.ndarray]:
        ids, matrix = self._ids, self._matrix  # one consistent snapshot
        mask = None
        if allowed is not None:
            row = self._row
            mask = np.zeros(len(ids), dtype=bool)
            mask[[row[i] for i in allowed if i in row]] = True
        rows, scores = top_k(matrix, normalize_rows(vector)[0], k, mask=mask)
        return [ids[r] for r in rows], scores

    def scores(self, vector: np.ndarray) -> np.ndarray:
        """Cosine of every row with ``vector``, in row order."""
        return self._matrix @ normalize_rows(vector)[0]

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._row

    def persist(self, folder: str | os.PathLike, name: str) -> None:
        """Write ``name.npz`` (the matrix) and ``name.ids.json`` into ``folder``."""
        folder = Path(folder)
        write_arrays(folder / f"{name}.npz", matrix=self._matrix)
        write_json(folder / f"{name}.ids.json", self._ids)

    @classmethod
    def load(cls, folder: str | os.PathLike, name: str) -> InMemoryVectorTable:
        """Read a table written by :meth:`persist`."""
        folder = Path(folder)
        table = cls()
        matrix = read_arrays(folder / f"{name}.npz")["matrix"].astype(np.float32)
        ids = read_json(folder / f"{name}.ids.json")
        table._ids, table._matrix = list(ids), matrix
        table._row = {node_id: r for r, node_id in enumerate(ids)}
        return table


class VectorStoreTable(VectorTable):
    """A table whose vectors live in a LlamaIndex vector store.

    Rows are stored as text-less ``TextNode`` s with a ``graphrag_table`` metadata
    field, so several tables (and other data) can share one collection. Search
    is the store's own top-k with a metadata filter on the table name.

    Args:
        vector_store: Any LlamaIndex ``BasePydanticVectorStore`` with metadata filters.
        name: The table's name inside the store.
    """

    def __init__(self, vector_store: BasePydanticVectorStore, name: str) -> None:
        self.vector_store = vector_store
        self.name = name
        self._ids: set[str] = set()
        self._lock = threading.Lock()

    def _node_id(self, node_id: str) -> str:
        return f"{self.name}::{node_id}"

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        from llama_index.core.schema import TextNode

        if len(ids) == 0:
            return
        vectors = normalize_rows(vectors)
        with self._lock:
            self.delete([i for i in ids if i in self._ids])
            nodes = [
                TextNode(
                    id_=self._node_id(node_id),
                    text="",
                    embedding=vectors[i].tolist(),
                    metadata={"graphrag_table": self.name, "graphrag_id": node_id},
                )
                for i, node_id in enumerate(ids)
            ]
            self.vector_store.add(nodes)
            self._ids.update(ids)

    def delete(self, ids: Sequence[str]) -> None:
        present = [i for i in ids if i in self._ids]
        if not present:
            return
        self.vector_store.delete_nodes(node_ids=[self._node_id(i) for i in present])
        self._ids.difference_update(present)

    def query(
        self, vector: np.ndarray, k: int, *, allowed: Sequence[str] | None = None
    ) -> tuple[list[str], np.ndarray]:
        from llama_index.core.vector_stores.types import (
            FilterOperator,
            MetadataFilter,
            MetadataFilters,
            VectorStoreQuery,
        )

        if k <= 0 or not self._ids:
            return [], np.zeros(0, dtype=np.float32)
        filters = [MetadataFilter(key="graphrag_table", value=self.name)]
        if allowed is not None:
            filters.append(
                MetadataFilter(key="graphrag_id", value=list(allowed), operator=FilterOperator.IN)
            )
        result = self.vector_store.query(
            VectorStoreQuery(
                query_embedding=normalize_rows(vector)[0].tolist(),
                similarity_top_k=min(k, len(self._ids)),
                filters=MetadataFilters(filters=filters),
            )
        )
        prefix = f"{self.name}::"
        ids = [i[len(prefix) :] if i.startswith(prefix) else i for i in result.ids or []]
        scores = np.asarray(result.similarities or [0.0] * len(ids), dtype=np.float32)
        return ids, scores

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._ids
