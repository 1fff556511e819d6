"""Vector tables: named rows of unit vectors, searchable by exact or store-side top-k.

:class:`InMemoryVectorTable` is a numpy matrix with exact search;
:class:`VectorStoreTable` keeps the vectors in any LlamaIndex vector store, and
:class:`StoreTables` holds an index's searchable tables in one store. Retrievers
search through a :class:`~.search.RowSearcher`, so none branches on where the
vectors live.
"""

from __future__ import annotations

import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.vector_stores.types import BasePydanticVectorStore

from .embeddings import normalize_rows, top_k
from .persist import read_arrays, read_json, write_arrays, write_json
from .search import Hits, MatrixSearch, RowSearch, RowSearcher, products

__all__ = [
    "Hits",
    "InMemoryVectorTable",
    "MatrixSearch",
    "RowSearch",
    "RowSearcher",
    "StoreTables",
    "VectorStoreTable",
    "VectorTable",
    "products",
    "store_identity",
]

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
        """Return the ``k`` ids nearest ``vector`` (among ``allowed``) and their cosines, best first."""

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

    def searcher(self) -> MatrixSearch:
        """A :class:`MatrixSearch` of the current rows (a snapshot: later writes swap arrays)."""
        return MatrixSearch(self._matrix)

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
    """A table whose vectors live in a LlamaIndex vector store (with metadata filters).

    Rows are text-less ``TextNode`` s tagged ``graphrag_table``, so several
    tables can share one collection; search is the store's filtered top-k.
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

    @property
    def ids(self) -> set[str]:
        """The ids this table holds (a copy)."""
        return set(self._ids)

    def _table_filter(self):
        from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

        return MetadataFilters(filters=[MetadataFilter(key="graphrag_table", value=self.name)])

    def clear(self) -> None:
        """Remove every row of this table from the store, known to this object or not."""
        with self._lock:
            try:
                self.vector_store.delete_nodes(filters=self._table_filter())
            except (NotImplementedError, TypeError, ValueError):
                # A store without filtered deletes: remove the rows we know of.
                if self._ids:
                    self.vector_store.delete_nodes(node_ids=[self._node_id(i) for i in self._ids])
            self._ids = set()

    def attach(self, ids: Sequence[str], vectors: np.ndarray) -> bool:
        """Take over rows an earlier process wrote, or write them when the store lacks them.

        A store already holding the table (the first and last rows' own vectors
        come back first) is reused; otherwise it is cleared and rewritten.
        Returns whether the vectors were (re)written.
        """
        ids = list(ids)
        if not ids:
            self.clear()
            return False
        vectors = normalize_rows(vectors)
        self._ids = set(ids)
        probes = sorted({0, len(ids) - 1})
        present = True
        for row in probes:
            found, scores = self.query(vectors[row], 1)
            # A duplicate vector under another id may legitimately come first.
            if not found or (found[0] != ids[row] and float(scores[0]) < 1.0 - 1e-4):
                present = False
                break
        if present:
            return False
        logger.info("vector store table %s: absent or stale, writing %d rows", self.name, len(ids))
        self.clear()
        self.add(ids, vectors)
        return True


def store_identity(vector_store: Any) -> dict[str, Any]:
    """What identifies a vector store in a manifest: its class and, when it has them,
    its collection and its address (never a token or a password)."""
    out: dict[str, Any] = {
        "class": f"{type(vector_store).__module__}.{type(vector_store).__name__}"
    }
    for key in ("collection_name", "uri", "index_name", "table_name"):
        value = getattr(vector_store, key, None)
        if isinstance(value, str) and value:
            if "://" in value and "@" in value.split("://", 1)[1].split("/", 1)[0]:
                scheme, rest = value.split("://", 1)
                value = f"{scheme}://{rest.split('@', 1)[1]}"  # drop user:password@
            out[key] = value
    return out


class StoreTables:
    """An index's searchable tables in one external vector store.

    Each table is a :class:`VectorStoreTable` named ``<namespace>/<table>``. The
    index keeps its in-memory matrices and mirrors the searched rows into the
    store with :meth:`sync`.
    """

    def __init__(self, vector_store: BasePydanticVectorStore, namespace: str) -> None:
        self.vector_store = vector_store
        self.namespace = namespace
        self._tables: dict[str, VectorStoreTable] = {}
        self._searches: dict[str, tuple[object, RowSearch]] = {}
        self._lock = threading.Lock()

    def table(self, name: str) -> VectorStoreTable:
        """The store-backed table ``name`` (made on first use)."""
        with self._lock:
            table = self._tables.get(name)
            if table is None:
                table = VectorStoreTable(self.vector_store, f"{self.namespace}/{name}")
                self._tables[name] = table
            return table

    def sync(self, name: str, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Make table ``name`` hold exactly ``ids``: write the new rows, delete the gone ones.

        Rows are keyed by id: the suite's ids are content-derived, so a changed
        vector always comes with a changed id.
        """
        table = self.table(name)
        have = table.ids
        want = {i: r for r, i in enumerate(ids)}
        gone = [i for i in have if i not in want]
        if gone:
            table.delete(gone)
        new = [r for i, r in want.items() if i not in have]
        if new:
            table.add([ids[r] for r in new], np.asarray(vectors)[new])

    def attach(self, name: str, ids: Sequence[str], vectors: np.ndarray) -> bool:
        """After a load: reuse the store's rows of table ``name`` or write them (see
        :meth:`VectorStoreTable.attach`)."""
        return self.table(name).attach(ids, vectors)

    def row_search(
        self,
        name: str,
        snapshot: object,
        ids: Sequence[str] | Callable[[], Sequence[str]],
        matrix: np.ndarray | None = None,
    ) -> RowSearch:
        """A :class:`RowSearch` of table ``name`` over one snapshot's rows.

        Cached per table while ``snapshot`` (compared by identity) stays current.
        """
        cached = self._searches.get(name)
        if cached is not None and cached[0] is snapshot:
            return cached[1]
        search = RowSearch(self.table(name), ids() if callable(ids) else ids, matrix)
        self._searches[name] = (snapshot, search)
        return search

    def describe(self) -> dict[str, Any]:
        """The manifest record: the store's identity, the namespace and each table's size."""
        return {
            **store_identity(self.vector_store),
            "namespace": self.namespace,
            "tables": {name: len(t) for name, t in sorted(self._tables.items())},
        }
