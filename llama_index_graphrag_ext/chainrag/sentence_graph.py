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

import numpy as np
import scipy.sparse as sp

from ..core.embeddings import knn_graph, union_knn_edges

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
    n = counts.shape[0]
    if n == 0 or not vocab:
        return {}
    df = np.bincount(counts.indices, minlength=len(vocab)).astype(np.float64)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    avgdl = max(float(lengths.mean()), 1e-12)
    coo = counts.tocoo()
    tf = coo.data.astype(np.float64)
    norm = k1 * (1.0 - b + b * lengths[coo.row] / avgdl)
    weights = idf[coo.col] * tf * (k1 + 1.0) / (tf + norm)
    total = np.bincount(coo.col, weights=weights, minlength=len(vocab)) / n
    return {e: float(total[j]) for e, j in vocab.items()}


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


@dataclass(frozen=True)
class SentenceRecord:
    """One sentence as the index keeps it.

    Attributes:
        text: The sentence.
        chunk_id: The chunk (LlamaIndex node) it came from.
        position: Its index among the chunk's sentences.
        entities: Normalised entity keys (spaCy NER), in text order, distinct.
    """

    text: str
    chunk_id: str
    position: int
    entities: tuple[str, ...] = ()


@dataclass(frozen=True)
class SentenceGraph:
    """The read-only sentence graph: records, vectors and the three edge kinds.

    Build it with :meth:`build`; every array is indexed by sentence row.

    Attributes:
        records: The sentences.
        vectors: ``(n, d)`` unit float32 rows (embeddings of the sentences).
        key_entities: Each row's key entities (the α cut).
        entity_vocab: Entity key → column of ``key_matrix``.
        key_matrix: Binary CSR, rows × key entities (EC edges are its co-occurrences).
        ss: Symmetric CSR of SS edges, values = cosine.
        sa: Symmetric CSR of SA edges, values = sentence distance.
        params: The settings it was built with.
    """

    records: tuple[SentenceRecord, ...]
    vectors: np.ndarray
    key_entities: tuple[tuple[str, ...], ...]
    entity_vocab: dict[str, int]
    key_matrix: sp.csr_matrix
    ss: sp.csr_matrix
    sa: sp.csr_matrix
    params: dict = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        records: Sequence[SentenceRecord],
        vectors: np.ndarray,
        *,
        alpha: float = 0.6,
        m: int = 10,
        window: int = 3,
    ) -> SentenceGraph:
        """Build every edge kind for ``records`` (rows of one chunk contiguous, in order).

        Args:
            records: The sentences.
            vectors: Their unit embeddings, one row each.
            alpha: Share of each sentence's entities kept as key entities (§4.1: 0.6).
            m: SS neighbours per sentence (§4.1: 10).
            window: SA span in sentences (§3.1: 3).
        """
        n = len(records)
        if vectors.shape[0] != n:
            raise ValueError(f"{vectors.shape[0]} vectors for {n} sentences")
        keys = tuple(key_entities([r.entities for r in records], alpha)) if n else ()
        vocab, kmat = incidence(keys)
        s_rows, s_cols, s_sims = ss_edges(vectors, m)
        groups = np.asarray(_group_codes(records), dtype=np.int64)
        positions = np.asarray([r.position for r in records], dtype=np.int64)
        a_rows, a_cols, a_dist = sa_edges(groups, positions, window)
        return cls(
            records=tuple(records),
            vectors=vectors,
            key_entities=keys,
            entity_vocab=vocab,
            key_matrix=kmat,
            ss=_symmetric(n, s_rows, s_cols, s_sims),
            sa=_symmetric(n, a_rows, a_cols, a_dist.astype(np.float32)),
            params={"alpha": alpha, "m": m, "window": window},
        )

    def __len__(self) -> int:
        return len(self.records)

    def num_edges(self, kind: str) -> int:
        """Undirected edge count of one kind (EC counted from entity co-occurrence).

        The EC count materialises ``K @ K.T``: its cost grows with the square of the
        sentences that share a frequent entity. Use :meth:`ec_summary` on large graphs.
        """
        if kind == "SS":
            return self.ss.nnz // 2
        if kind == "SA":
            return self.sa.nnz // 2
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
            elif kind == "SS":
                reach = self.ss[rows]
            elif kind == "SA":
                reach = self.sa[rows]
            else:
                raise ValueError(f"unknown edge kind {kind!r}")
            for pos, src in enumerate(rows):
                start, stop = reach.indptr[pos], reach.indptr[pos + 1]
                for nb in reach.indices[start:stop].tolist():
                    if nb not in source:
                        out.setdefault(nb, {}).setdefault(kind, []).append(src)
        return out

    def shared_entities(self, a: int, b: int) -> list[str]:
        """Key entities two rows share (the labels of their EC edge)."""
        other = set(self.key_entities[b])
        return [e for e in self.key_entities[a] if e in other]


def _group_codes(records: Sequence[SentenceRecord]) -> list[int]:
    codes: dict[str, int] = {}
    return [codes.setdefault(r.chunk_id, len(codes)) for r in records]
