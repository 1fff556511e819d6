"""ChainRAG's sentence graph (paper §3.1) as immutable numpy / scipy structures.

One row per sentence. Three labelled edge kinds join the rows:

* **EC** (entity co-occurrence): two sentences share a *key* entity, i.e. one of
  the top-α % of their spaCy entities ranked by BM25 importance (α = 60 in §4.1).
  The pairwise edges are never materialised: a key-entity incidence matrix ``K``
  (sentences × entities) answers "EC neighbours of these rows" as ``K[rows] @ K.T``,
  which is the paper's "mappings of entities to all sentences" and avoids the
  quadratic cliques that frequent entities would create.
* **SS** (semantic similarity): each sentence's top-m (m = 10) neighbours by cosine,
  kept if either end lists the other (blocked kNN, :func:`~..core.embeddings.knn_graph`).
* **SA** (structural adjacency): sentences at most ``window`` (3) apart in the same chunk.

A :class:`SentenceGraph` is built once per index change and then only read, so
retrieval threads share it without locks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.sparse as sp

from ..core.arrays import csr, first_appearance_codes, indptr_of, take_rows
from ..core.embeddings import knn_graph, union_knn_edges
from .sentences import SentenceRecord, SentenceRecords, SentenceTable, row_index

#: The three edge kinds of the paper (§3.1), in the order the paper lists them.
EDGE_KINDS: tuple[str, ...] = ("EC", "SS", "SA")


def check_edge_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    """Validate a selection of edge kinds (for ablations); returns it in canonical order."""
    chosen = {str(k).upper() for k in kinds}
    unknown = chosen - set(EDGE_KINDS)
    if unknown:
        raise ValueError(f"unknown edge kind(s) {sorted(unknown)}; choose from {EDGE_KINDS}")
    return tuple(k for k in EDGE_KINDS if k in chosen)


def entity_importance(
    entity_lists: Sequence[Sequence[str]], *, k1: float = 1.5, b: float = 0.75
) -> dict[str, float]:
    """Corpus-level BM25 importance of each entity (§3.1 "importance score, i.e., BM25").

    The sentences' entity lists are the BM25 documents; an entity's importance is
    its mean BM25 score over all sentences (what the authors' code computes), i.e.
    the total of its BM25 term weights divided by the number of sentences. Entities
    that recur across sentences but are not everywhere score highest, so the key
    entities are the ones able to link sentences.
    """
    vocab, counts = incidence(entity_lists, binary=False)
    if counts.shape[0] == 0 or not vocab:
        return {}
    total = _importance_of_counts(counts, k1, b)
    return {e: float(total[j]) for e, j in vocab.items()}


def _importance_of_counts(counts: sp.csr_matrix, k1: float, b: float) -> np.ndarray:
    """Mean BM25 weight of each column of a sentences x entities count matrix.

    Each column's weights are summed in row order whatever the column numbering,
    so any numbering of the same entities gives the same floats.
    """
    n = counts.shape[0]
    df = np.bincount(counts.indices, minlength=counts.shape[1]).astype(np.float64)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    avgdl = max(float(lengths.mean()), 1e-12)
    coo = counts.tocoo()
    tf = coo.data.astype(np.float64)
    norm = k1 * (1.0 - b + b * lengths[coo.row] / avgdl)
    weights = idf[coo.col] * tf * (k1 + 1.0) / (tf + norm)
    return np.bincount(coo.col, weights=weights, minlength=counts.shape[1]) / n


def key_entities(
    entity_lists: Sequence[Sequence[str]], alpha: float, *, k1: float = 1.5, b: float = 0.75
) -> list[tuple[str, ...]]:
    """Each sentence's key entities: its top-α share by BM25 importance (§3.1, α = 0.6).

    A sentence with ``n`` distinct entities keeps ``max(1, round(alpha * n))`` of
    them (at least one, so no sentence with entities is cut off from EC edges),
    ranked by :func:`entity_importance`; ties keep text order.

    Args:
        entity_lists: Normalised entity keys per sentence (duplicates allowed).
        alpha: The kept share, in (0, 1].
        k1: BM25 term-frequency saturation.
        b: BM25 length normalisation.

    Returns:
        The key entities of each sentence, distinct, most important first.
    """
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    importance = entity_importance(entity_lists, k1=k1, b=b)
    out: list[tuple[str, ...]] = []
    for ents in entity_lists:
        distinct = list(dict.fromkeys(ents))
        keep = max(1, math.floor(alpha * len(distinct) + 0.5)) if distinct else 0
        order = sorted(range(len(distinct)), key=lambda j: (-importance[distinct[j]], j))
        out.append(tuple(distinct[j] for j in order[:keep]))
    return out


def incidence(
    entity_lists: Sequence[Sequence[str]], *, binary: bool = True
) -> tuple[dict[str, int], sp.csr_matrix]:
    """A sentences × entities CSR matrix (1s, or mention counts) and its entity vocabulary."""
    vocab: dict[str, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for i, ents in enumerate(entity_lists):
        for e in dict.fromkeys(ents) if binary else ents:
            rows.append(i)
            cols.append(vocab.setdefault(e, len(vocab)))
    data = np.ones(len(rows), dtype=np.float32)
    mat = sp.csr_matrix((data, (rows, cols)), shape=(len(entity_lists), len(vocab)))
    mat.sum_duplicates()
    return vocab, mat


def key_entity_rows(
    table: SentenceTable, alpha: float, *, k1: float = 1.5, b: float = 0.75
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`key_entities` on a table's entity columns, with arrays instead of Python lists.

    Same selection (top-α share by BM25 importance, at least one, ties in text
    order) and the same importance floats, without a tuple per sentence.

    Returns:
        ``(ptr, ids)``: row ``i``'s key entities are ``ids[ptr[i]:ptr[i + 1]]``
        (entity numbers of ``table.entity_names``), most important first.
    """
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    n, ptr, ids = len(table), table.entity_ptr, table.entity_ids
    if n == 0 or not len(ids):
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int32)
    counts = sp.csr_matrix(
        (np.ones(len(ids), dtype=np.float32), ids, ptr), shape=(n, len(table.entity_names))
    )
    counts.sum_duplicates()  # sorted columns, as incidence() gives
    importance = _importance_of_counts(counts, k1, b)
    lengths = np.diff(ptr)
    row = np.repeat(np.arange(n, dtype=np.int64), lengths)
    place = np.arange(len(ids), dtype=np.int64) - ptr[row]  # text order within the row
    order = np.lexsort((place, -importance[ids], row))  # by row, importance, text order
    keep = np.where(lengths > 0, np.maximum(1, np.floor(alpha * lengths + 0.5)), 0)
    chosen = order[place < keep[row]]  # rank within the row (rows stay in blocks)
    return indptr_of(np.minimum(keep, lengths)), ids[chosen]


def key_incidence(key_ptr: np.ndarray, key_ids: np.ndarray) -> tuple[np.ndarray, sp.csr_matrix]:
    """The binary key-entity matrix of :func:`key_entity_rows`' output, as :func:`incidence`.

    Columns are numbered by first appearance in the key lists (what
    :func:`incidence` does with the lists), so the matrix, and with it the order
    in which EC neighbours are found, is the list-based build's.

    Returns:
        ``(columns, matrix)``: ``columns[c]`` is the entity number of column ``c``.
    """
    n = len(key_ptr) - 1
    cols, entities = first_appearance_codes(key_ids)
    mat = sp.csr_matrix(
        (np.ones(len(cols), dtype=np.float32), cols, key_ptr), shape=(n, len(entities))
    )
    mat.sum_duplicates()
    return entities.astype(np.int32), mat


def ss_edges(vectors: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SS edges ``i < j`` where either sentence lists the other in its top-m (§3.1)."""
    if m <= 0 or vectors.shape[0] < 2:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float32)
    idx, sims = knn_graph(vectors, m)
    return union_knn_edges(idx, sims)


def sa_edges(groups: np.ndarray, positions: np.ndarray, window: int) -> tuple[np.ndarray, ...]:
    """SA edges ``i < j`` between sentences of one group at most ``window`` apart (§3.1).

    Rows of a group (chunk) must be contiguous and in text order, as the index
    stores them; the pairs are found with ``window`` vectorised shifts.

    Returns:
        ``(rows, cols, distances)``.
    """
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
    """The read-only sentence graph: sentences, vectors and the three edge kinds.

    Build it with :meth:`build`; every array is indexed by sentence row.

    Attributes:
        sentences: The sentences as columns (texts, chunks, positions, entities).
        vectors: ``(n, d)`` unit float32 rows (embeddings of the sentences).
        key_matrix: Binary CSR, rows × key entities (EC edges are its co-occurrences).
        key_order: int32, each row's key-entity columns most important first (row
            ``i`` is ``key_order[key_matrix.indptr[i]:key_matrix.indptr[i + 1]]``).
        key_columns: int32, the entity number (in ``sentences.entity_names``) of each
            column of ``key_matrix``.
        ss_ptr: int64 ``(n + 1,)`` and ``ss_cols`` int32: row ``i``'s SS neighbours
            are ``ss_cols[ss_ptr[i]:ss_ptr[i + 1]]`` (ascending; the symmetric
            pattern of the SS edges, without values).
        params: The settings it was built with.

    The ``ss`` and ``sa`` matrices (with cosines and sentence distances) are made
    when read: retrieval needs only which rows are linked, the SS links are
    kept without their cosines, and the SA links follow from the chunks and
    positions (a value array for 57k sentences' SS edges was 4 MB at 16,000
    chunks, the SA matrix 1.6 MB).
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
    ) -> SentenceGraph:
        """Build every edge kind for ``sentences`` (rows of one chunk contiguous, in order).

        Args:
            sentences: The sentences, as a table or as records.
            vectors: Their unit embeddings, one row each.
            alpha: Share of each sentence's entities kept as key entities (§4.1: 0.6).
            m: SS neighbours per sentence (§4.1: 10).
            window: SA span in sentences (§3.1: 3).
        """
        table = sentences if isinstance(sentences, SentenceTable) else _table_of(sentences)
        n = len(table)
        if vectors.shape[0] != n:
            raise ValueError(f"{vectors.shape[0]} vectors for {n} sentences")
        key_ptr, key_ids = key_entity_rows(table, alpha)
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
            params={"alpha": alpha, "m": m, "window": window},
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
        """Undirected edge count of one kind (EC counted from entity co-occurrence).

        The EC count materialises ``K @ K.T``: its cost grows with the square of the
        sentences that share a frequent entity. Use :meth:`ec_summary` on large graphs.
        """
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
        """EC structure in time linear in the stored links (no pair materialised).

        Returns:
            ``key_entities`` (columns of ``K``), ``links`` (sentence-entity
            incidences, ``K.nnz``), ``pairs_upper_bound`` (the sum over entities of
            ``C(sentences, 2)``: the EC pair count if no two sentences shared two
            key entities) and ``largest_entity`` (most sentences on one entity).
        """
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
        """1-hop neighbours of ``rows``: ``{neighbour: {kind: [source rows]}}``.

        Sources are rows in ``rows``; a neighbour that is itself in ``rows`` is left
        out. Work is proportional to the edges touched (sparse row slices).
        """
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
        """SA neighbours of ``rows`` (ascending per row) as ``(ptr, rows)``, from chunks and positions.

        The same pairs as :func:`sa_edges`: rows at most ``window`` apart in the
        table, from one chunk, at most ``window`` apart in position.
        """
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


__all__ = [
    "EDGE_KINDS",
    "KeyEntities",
    "SentenceGraph",
    "SentenceRecord",
    "SentenceRecords",
    "check_edge_kinds",
    "entity_importance",
    "incidence",
    "key_entities",
    "key_entity_rows",
    "key_incidence",
    "sa_edges",
    "ss_edges",
]
