"""ChainRAG's key entities (paper §3.1): which of a sentence's entities may form EC edges.

§3.1 keeps "the top-α % entities" by "an importance score, i.e., BM25". :class:`KeyCut`
says how the cut is made; :func:`key_entities` applies it to lists and
:func:`key_entity_rows` to a :class:`~.sentences.SentenceTable`'s arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..core.arrays import first_appearance_codes, indptr_of
from .sentences import SentenceTable


def _importance_of_counts(counts: sp.csr_matrix, k1: float, b: float) -> np.ndarray:
    """Mean BM25 weight over all sentences of each entity column (the authors' importance).

    The sentences' entity lists are the BM25 documents. Weights are summed in row
    order, so any column numbering of the same entities gives the same floats.
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


#: How an entity's importance is measured for the key-entity cut (§3.1).
IMPORTANCE_KINDS: tuple[str, ...] = ("idf", "bm25")
#: Where the α share is taken: within each sentence (``K_i ⊆ E_i``) or over all entities.
CUT_KINDS: tuple[str, ...] = ("sentence", "global")


@dataclass(frozen=True)
class KeyCut:
    """Settings of the key-entity cut of §3.1 ("top-α % by importance, i.e., BM25").

    The authors' mean BM25 *grows* with how many sentences name an entity, so hubs
    are key everywhere and a sentence's rarest entity (often the bridge to the next
    hop) is the one cut; ``idf``, ``max_df`` and ``keep_rarest`` counter that. The
    fields are the config's ``alpha``, ``key_importance``, ``key_cut``, ``max_df``
    and ``keep_rarest`` (see :class:`~.config.ChainRAGConfig`); the defaults are the
    ``default`` preset's, :data:`PAPER_BM25_CUT` the ``paper`` preset's. Only
    *linking* entities (named by two sentences or more, at most ``max_df``) take part.
    """

    alpha: float = 0.6
    importance: str = "idf"
    cut: str = "global"
    max_df: int | None = 20
    keep_rarest: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < float(self.alpha) <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {self.alpha}")
        if self.importance not in IMPORTANCE_KINDS:
            raise ValueError(f"importance must be one of {IMPORTANCE_KINDS}")
        if self.cut not in CUT_KINDS:
            raise ValueError(f"cut must be one of {CUT_KINDS}")
        if self.max_df is not None and int(self.max_df) < 0:
            raise ValueError("max_df must be >= 0 (0 or None: no cap)")

    def to_dict(self) -> dict:
        return {
            "alpha": float(self.alpha),
            "importance": self.importance,
            "cut": self.cut,
            "max_df": int(self.max_df) if self.max_df else None,
            "keep_rarest": bool(self.keep_rarest),
        }


#: The cut as the authors' code computes importance, per sentence, no cap (the ``paper`` preset).
PAPER_BM25_CUT = KeyCut(importance="bm25", cut="sentence", max_df=None, keep_rarest=False)


def _as_cut(alpha: float | KeyCut, overrides: dict) -> KeyCut:
    if isinstance(alpha, KeyCut):
        return alpha
    return KeyCut(alpha=alpha, **overrides)


def key_entities(
    entity_lists: Sequence[Sequence[str]],
    alpha: float | KeyCut,
    *,
    k1: float = 1.5,
    b: float = 0.75,
    **cut: object,
) -> list[tuple[str, ...]]:
    """Each sentence's key entities (§3.1), as lists; see :class:`KeyCut` for the cut.

    Args:
        entity_lists: Normalised entity keys per sentence (duplicates count as term
            frequency for ``bm25``).
        alpha: The kept share, in (0, 1], or a whole :class:`KeyCut`.
        k1: BM25 term-frequency saturation; ``b`` its length normalisation.
        **cut: The other :class:`KeyCut` fields.

    Returns:
        The key entities of each sentence, distinct, most important first
        (ties in text order).
    """
    spec = _as_cut(alpha, cut)
    vocab, counts = incidence(entity_lists, binary=False)
    n = len(entity_lists)
    distinct = [[vocab[e] for e in dict.fromkeys(ents)] for ents in entity_lists]
    ptr = indptr_of(np.asarray([len(d) for d in distinct], dtype=np.int64))
    ids = np.asarray([e for d in distinct for e in d], dtype=np.int64)
    if not len(ids):
        return [() for _ in range(n)]
    importance, df = _importance(counts, spec, k1, b)
    kptr, kids = _select_keys(ptr, ids, importance, df, spec)
    names = list(vocab)
    return [tuple(names[e] for e in kids[kptr[i] : kptr[i + 1]].tolist()) for i in range(n)]


def _importance(
    counts: sp.csr_matrix, spec: KeyCut, k1: float, b: float
) -> tuple[np.ndarray, np.ndarray]:
    """(importance, sentence frequency) of each entity column."""
    df = np.bincount(counts.indices, minlength=counts.shape[1]).astype(np.int64)
    if spec.importance == "bm25":
        return _importance_of_counts(counts, k1, b), df
    n = counts.shape[0]
    return np.log1p((n - df + 0.5) / (df + 0.5)), df


def _select_keys(
    ptr: np.ndarray, ids: np.ndarray, importance: np.ndarray, df: np.ndarray, spec: KeyCut
) -> tuple[np.ndarray, np.ndarray]:
    """The cut on flat per-row entity lists (distinct within a row, text order).

    Returns ``(ptr, ids)`` of the kept entities, each row most important first.
    """
    n = len(ptr) - 1
    lengths = np.diff(ptr)
    row = np.repeat(np.arange(n, dtype=np.int64), lengths)
    place = np.arange(len(ids), dtype=np.int64) - ptr[row]
    linking = df >= 2
    if spec.max_df:
        linking &= df <= int(spec.max_df)
    if spec.importance == "bm25" and not spec.max_df and not spec.keep_rarest:
        linking = np.ones_like(linking)  # the authors' cut: every entity competes
    ok = linking[ids]
    imp = importance[ids]
    keep = np.zeros(len(ids), dtype=bool)
    if spec.cut == "sentence":
        # rank of each usable entry in its row, by importance then text order
        order = np.lexsort((place, -imp, ~ok, row))
        n_ok = np.bincount(row[ok], minlength=n)
        quota = np.where(n_ok > 0, np.maximum(1, np.floor(spec.alpha * n_ok + 0.5)), 0)
        rank = np.empty(len(ids), dtype=np.int64)
        rank[order] = np.arange(len(ids)) - ptr[row[order]]
        keep = ok & (rank < quota[row])
    else:
        usable = np.unique(ids[ok])
        if len(usable):
            threshold = np.quantile(importance[usable], 1.0 - spec.alpha)
            keep = ok & (imp >= threshold)
    if spec.keep_rarest and ok.any():
        # the usable entry of each row named by the fewest sentences (first in text order)
        order = np.lexsort((place, df[ids], ~ok, row))
        first = order[np.r_[True, row[order][1:] != row[order][:-1]]]
        keep[first[ok[first]]] = True
    chosen = np.flatnonzero(keep)
    chosen = chosen[np.lexsort((place[chosen], -imp[chosen], row[chosen]))]
    counts = np.bincount(row[chosen], minlength=n)
    return indptr_of(counts), ids[chosen]


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
    table: SentenceTable,
    alpha: float | KeyCut,
    *,
    k1: float = 1.5,
    b: float = 0.75,
    **cut: object,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`key_entities` on a table's entity columns, with arrays instead of Python lists.

    Returns:
        ``(ptr, ids)``: row ``i``'s key entities are ``ids[ptr[i]:ptr[i + 1]]``
        (entity numbers of ``table.entity_names``), most important first.
    """
    spec = _as_cut(alpha, cut)
    n, ptr, ids = len(table), table.entity_ptr, table.entity_ids
    if n == 0 or not len(ids):
        return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int32)
    # copies: sum_duplicates sorts them in place (text order matters for ties)
    counts = sp.csr_matrix(
        (np.ones(len(ids), dtype=np.float32), ids.copy(), ptr.copy()),
        shape=(n, len(table.entity_names)),
    )
    counts.sum_duplicates()  # sorted columns, as incidence() gives
    importance, df = _importance(counts, spec, k1, b)
    kptr, kids = _select_keys(np.asarray(ptr, dtype=np.int64), ids, importance, df, spec)
    return kptr, kids.astype(ids.dtype, copy=False)


def key_incidence(key_ptr: np.ndarray, key_ids: np.ndarray) -> tuple[np.ndarray, sp.csr_matrix]:
    """The binary key-entity matrix of :func:`key_entity_rows`' output, as :func:`incidence`.

    Columns are numbered by first appearance, as :func:`incidence` numbers them, so
    the order in which EC neighbours are found is the list-based build's.

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
