"""ChainRAG's sentence graph (paper §3.1) as immutable numpy / scipy structures.

One row per sentence; three edge kinds:

* **EC**: two sentences share a *key* entity (the top-α % cut, :mod:`.key_entities`).
  The pairs are never materialised: the key-entity incidence ``K`` (sentences ×
  entities) gives the EC neighbours of rows as ``K[rows] @ K.T`` (the paper's
  "mappings of entities to all sentences"), avoiding the cliques of frequent entities.
* **SS**: each sentence's top-m neighbours by cosine, kept if either end lists the other.
* **SA**: sentences at most ``window`` apart in the same chunk. The paper's window runs
  over one question's concatenated context; over corpus order it would link passages
  by where a benchmark file lists them, so SA stays inside a chunk.

A graph is built once per index change and then only read (no locks).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from ..core.arrays import csr, indptr_of, take_rows
from ..core.embeddings import knn_graph, union_knn_edges
from .config import EDGE_KINDS
from .key_entities import KeyCut, key_entity_rows, key_incidence
from .sentences import SentenceRecord, SentenceRecords, SentenceTable, row_index


def ss_edges(vectors: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SS edges ``i < j`` where either sentence lists the other in its top-m (§3.1)."""
    if m <= 0 or vectors.shape[0] < 2:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float32)
    idx, sims = knn_graph(vectors, m)
    return union_knn_edges(idx, sims)


def sa_edges(groups: np.ndarray, positions: np.ndarray, window: int) -> tuple[np.ndarray, ...]:
    """SA edges ``(rows, cols, distances)``, ``i < j``, between sentences of one group at most
    ``window`` apart (§3.1); a group's (chunk's) rows must be contiguous, in text order."""
    n = groups.shape[0]
    rows, cols, dist = [], [], []
    for offset in range(1, max(0, window) + 1):
        if offset >= n:
            break
        same = groups[:-offset] == groups[offset:]
        close = np.abs(positions[offset:] - positions[:-offset]) <= window
        hit = np.flatnonzero(same & close)
        rows.append(hit)
        cols.append(hit + offset)
        dist.append(np.full(hit.shape[0], offset, dtype=np.int64))
    if not rows:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(dist)


def _symmetric(n: int, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> sp.csr_matrix:
    data = np.concatenate([values, values]).astype(np.float32)
    mat = sp.csr_matrix(
        (data, (np.concatenate([rows, cols]), np.concatenate([cols, rows]))), shape=(n, n)
    )
    mat.sum_duplicates()
    return mat


class KeyEntities(Sequence[tuple[str, ...]]):
    """Each row's key entities as a tuple of keys (most important first), made when read."""

    def __init__(self, graph: SentenceGraph) -> None:
        self._graph = graph

    def __len__(self) -> int:
        return len(self._graph)

    def __getitem__(self, row):  # type: ignore[override]
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        g = self._graph
        names = g.sentences.entity_names
        return tuple(names[e] for e in g.key_row(row_index(row, len(g))).tolist())


@dataclass(frozen=True)
class SentenceGraph:
    """The read-only sentence graph (made by :meth:`build`); arrays are indexed by row.

    Attributes:
        vectors: ``(n, d)`` unit float32 sentence embeddings.
        key_matrix: Binary CSR, rows × key entities (EC edges are its co-occurrences).
        key_order: int32, each row's key-entity columns most important first (row
            ``i`` is ``key_order[key_matrix.indptr[i]:key_matrix.indptr[i + 1]]``).
        key_columns: int32, the entity number (in ``sentences.entity_names``) of each
            column of ``key_matrix``.
        ss_ptr: int64 ``(n + 1,)`` and ``ss_cols`` int32: row ``i``'s SS neighbours
            are ``ss_cols[ss_ptr[i]:ss_ptr[i + 1]]`` (ascending, without cosines).

    The ``ss`` and ``sa`` matrices (cosines, distances) are made when read: retrieval
    needs only which rows are linked.
    """

    sentences: SentenceTable
    vectors: np.ndarray
    key_matrix: sp.csr_matrix
    key_order: np.ndarray
    key_columns: np.ndarray
    ss_ptr: np.ndarray
    ss_cols: np.ndarray
    params: dict = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        sentences: SentenceTable | Sequence[SentenceRecord],
        vectors: np.ndarray,
        *,
        alpha: float = 0.6,
        m: int = 10,
        window: int = 3,
        key_cut: KeyCut | None = None,
    ) -> SentenceGraph:
        """Build every edge kind for ``sentences`` (rows of one chunk contiguous, in order).

        ``alpha``, ``m`` and ``window`` are the config's fields (§4.1: 0.6, 10, 3);
        ``key_cut``, the whole key-entity cut, wins over ``alpha``.
        """
        table = sentences if isinstance(sentences, SentenceTable) else _table_of(sentences)
        n = len(table)
        if vectors.shape[0] != n:
            raise ValueError(f"{vectors.shape[0]} vectors for {n} sentences")
        cut = key_cut if key_cut is not None else KeyCut(alpha=alpha)
        key_ptr, key_ids = key_entity_rows(table, cut)
        key_columns, kmat = key_incidence(key_ptr, key_ids)
        s_rows, s_cols, _ = ss_edges(vectors, m)  # distinct pairs i < j
        ss_ptr, ss_cols = csr(np.concatenate([s_rows, s_cols]), np.concatenate([s_cols, s_rows]), n)
        return cls(
            sentences=table,
            vectors=vectors,
            key_matrix=kmat,
            key_order=_columns_in_key_order(key_ids, key_columns),
            key_columns=key_columns,
            ss_ptr=ss_ptr,
            ss_cols=ss_cols,
            params={**cut.to_dict(), "m": m, "window": window},
        )

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def records(self) -> SentenceRecords:
        """The sentences as :class:`SentenceRecord` row views."""
        return SentenceRecords(self.sentences)

    @property
    def key_entities(self) -> KeyEntities:
        """Each row's key entities (the α cut), most important first."""
        return KeyEntities(self)

    @cached_property
    def entity_vocab(self) -> dict[str, int]:
        """Key entity → column of ``key_matrix`` (made on first use)."""
        names = self.sentences.entity_names
        return {names[e]: c for c, e in enumerate(self.key_columns.tolist())}

    def text(self, row: int) -> str:
        """The sentence of ``row``."""
        return self.sentences.text(row)

    def chunk_id(self, row: int) -> str:
        """The chunk ``row`` comes from."""
        return self.sentences.chunk_id(row)

    @property
    def ss(self) -> sp.csr_matrix:
        """Symmetric CSR of SS edges, values = cosine of the two rows (made on each read)."""
        n = len(self)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.ss_ptr))
        sims = np.empty(len(rows), dtype=np.float32)
        for start in range(0, len(rows), _DOT_BLOCK):
            r = rows[start : start + _DOT_BLOCK]
            c = self.ss_cols[start : start + _DOT_BLOCK]
            sims[start : start + _DOT_BLOCK] = np.einsum(
                "ij,ij->i", self.vectors[r], self.vectors[c]
            )
        return sp.csr_matrix((sims, self.ss_cols.copy(), self.ss_ptr.copy()), shape=(n, n))

    @property
    def sa(self) -> sp.csr_matrix:
        """Symmetric CSR of SA edges, values = sentence distance (made on each read)."""
        rows, cols, dist = self._sa_pairs()
        return _symmetric(len(self), rows, cols, dist.astype(np.float32))

    def _sa_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        table = self.sentences
        return sa_edges(
            table.chunk_rows.astype(np.int64),
            table.positions.astype(np.int64),
            int(self.params.get("window", 3)),
        )

    def key_row(self, row: int) -> np.ndarray:
        """``row``'s key entities as entity numbers, most important first."""
        ptr = self.key_matrix.indptr
        return self.key_columns[self.key_order[ptr[row] : ptr[row + 1]]]

    def num_edges(self, kind: str) -> int:
        """Undirected edge count of one kind. The EC count materialises ``K @ K.T``
        (quadratic in a hub's sentences): use :meth:`ec_summary` on large graphs."""
        if kind == "SS":
            return len(self.ss_cols) // 2
        if kind == "SA":
            return len(self._sa_pairs()[0])
        if kind == "EC":
            co = (self.key_matrix @ self.key_matrix.T).tocsr()
            co.setdiag(0)
            co.eliminate_zeros()
            return co.nnz // 2
        raise ValueError(f"unknown edge kind {kind!r}")

    def ec_summary(self) -> dict[str, int]:
        """EC structure in linear time: ``key_entities``, ``links`` (``K.nnz``),
        ``pairs_upper_bound`` (sum over entities of ``C(sentences, 2)``) and
        ``largest_entity`` (most sentences on one entity)."""
        kmat = self.key_matrix
        if kmat.shape[1] == 0:
            return {"key_entities": 0, "links": 0, "pairs_upper_bound": 0, "largest_entity": 0}
        per_entity = np.bincount(kmat.indices, minlength=kmat.shape[1]).astype(np.int64)
        return {
            "key_entities": int(kmat.shape[1]),
            "links": int(kmat.nnz),
            "pairs_upper_bound": int((per_entity * (per_entity - 1) // 2).sum()),
            "largest_entity": int(per_entity.max()),
        }

    def neighbors(
        self, rows: Sequence[int], kinds: Sequence[str] = EDGE_KINDS
    ) -> dict[int, dict[str, list[int]]]:
        """1-hop neighbours of ``rows`` (not themselves): ``{neighbour: {kind: [sources]}}``."""
        rows = [int(r) for r in rows]
        source = set(rows)
        out: dict[int, dict[str, list[int]]] = {}
        if not rows:
            return out
        for kind in kinds:
            if kind == "EC":
                if self.key_matrix.shape[1] == 0:
                    continue
                reach = (self.key_matrix[rows] @ self.key_matrix.T).tocsr()
                ptr, found = reach.indptr, reach.indices
            elif kind == "SS":
                ptr, found = take_rows(self.ss_ptr, self.ss_cols, rows)
            elif kind == "SA":
                ptr, found = self._sa_neighbors(rows)
            else:
                raise ValueError(f"unknown edge kind {kind!r}")
            for pos, src in enumerate(rows):
                for nb in found[ptr[pos] : ptr[pos + 1]].tolist():
                    if nb not in source:
                        out.setdefault(nb, {}).setdefault(kind, []).append(src)
        return out

    def _sa_neighbors(self, rows: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """SA neighbours of ``rows`` (ascending) as ``(ptr, rows)``: :func:`sa_edges`' pairs."""
        window = int(self.params.get("window", 3))
        table, n = self.sentences, len(self)
        src = np.asarray(rows, dtype=np.int64)[:, None]
        offsets = np.concatenate([np.arange(-window, 0), np.arange(1, window + 1)])
        cand = src + offsets[None, :]
        inside = (cand >= 0) & (cand < n)
        safe = np.where(inside, cand, src)
        chunks, positions = table.chunk_rows, table.positions
        linked = (
            inside
            & (chunks[safe] == chunks[src])
            & (np.abs(positions[safe].astype(np.int64) - positions[src]) <= window)
        )
        return indptr_of(linked.sum(axis=1)), cand[linked]

    def shared_entities(self, a: int, b: int) -> list[str]:
        """Key entities two rows share (the labels of their EC edge)."""
        other = set(self.key_row(b).tolist())
        names = self.sentences.entity_names
        return [names[e] for e in self.key_row(a).tolist() if e in other]


#: Edges whose cosines are computed at a time when ``SentenceGraph.ss`` is read.
_DOT_BLOCK = 65536


def _columns_in_key_order(key_ids: np.ndarray, key_columns: np.ndarray) -> np.ndarray:
    """Each key entity's ``key_matrix`` column, in :func:`key_entity_rows`' order."""
    if not len(key_ids):
        return np.zeros(0, dtype=np.int32)
    column_of = np.empty(int(key_columns.max()) + 1, dtype=np.int32)
    column_of[key_columns] = np.arange(len(key_columns), dtype=np.int32)
    return column_of[key_ids]


def _table_of(records: Sequence[SentenceRecord]) -> SentenceTable:
    return SentenceTable.from_rows((r.text, r.chunk_id, r.position, r.entities) for r in records)


def sentence_ids(sg: SentenceGraph) -> list[str]:
    """The sentence ids of a graph snapshot in row order (``<chunk id>::s<position>``)."""
    table = sg.sentences
    chunks, positions = table.chunk_ids, table.positions.tolist()
    return [f"{chunks[c]}::s{p}" for c, p in zip(table.chunk_rows.tolist(), positions, strict=True)]
