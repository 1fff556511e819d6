"""The suite's array toolkit: packed string tables and compressed sparse rows.

Methods keep their graphs as flat arrays rather than one Python object per node
or edge (``docs/scaling.md``, "Memory"). :class:`StringTable` holds strings as
one UTF-8 buffer and is both a sequence and an interner; :func:`csr` and its
helpers build the compressed-sparse-row layout of every adjacency list.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import numpy as np

_ENCODING, _ERRORS = "utf-8", "surrogatepass"
_MASK64 = 0xFFFFFFFFFFFFFFFF


def indptr_of(counts: Sequence[int] | np.ndarray) -> np.ndarray:
    """Row offsets of per-row counts: ``(n + 1,)`` int64, row ``i`` spans ``[ptr[i], ptr[i + 1])``."""
    counts = np.asarray(counts, dtype=np.int64)
    ptr = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr


def csr_order(
    rows: Sequence[int] | np.ndarray,
    n_rows: int,
    cols: Sequence[int] | np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Group entries by row: ``(indptr, order)``; ``values[order]`` is in CSR order.

    Args:
        rows: The row of each entry, each in ``[0, n_rows)``.
        n_rows: Number of rows (rows without entries are empty).
        cols: When given, entries of a row are sorted by it (ties keep input
            order); otherwise a row keeps its entries in input order.

    Returns:
        ``indptr`` int64 ``(n_rows + 1,)`` and ``order`` int64 (a permutation of the entries).
    """
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= n_rows):
        raise ValueError(f"row numbers must be in [0, {n_rows})")
    if cols is None:
        order = np.argsort(rows, kind="stable")
    else:
        cols = np.asarray(cols).reshape(-1)
        if cols.shape != rows.shape:
            raise ValueError(f"{rows.size} rows for {cols.size} columns")
        order = np.lexsort((cols, rows))
    return indptr_of(np.bincount(rows, minlength=n_rows)), order.astype(np.int64)


def csr(
    rows: Sequence[int] | np.ndarray,
    cols: Sequence[int] | np.ndarray,
    n_rows: int,
    *,
    sort: bool = True,
    dtype: Any = np.int32,
) -> tuple[np.ndarray, np.ndarray]:
    """Compressed sparse rows of ``(rows[i], cols[i])`` pairs (duplicates kept).

    Args:
        rows: The row of each pair, each in ``[0, n_rows)``.
        cols: The column of each pair.
        n_rows: Number of rows.
        sort: Sort each row's columns (else keep input order).
        dtype: Type of the returned columns.

    Returns:
        ``(indptr, columns)``: row ``r``'s columns are ``columns[indptr[r]:indptr[r + 1]]``;
        ``indptr`` is int64 ``(n_rows + 1,)``.
    """
    cols = np.asarray(cols).reshape(-1)
    indptr, order = csr_order(rows, n_rows, cols if sort else None)
    if cols.shape[0] != order.shape[0]:
        raise ValueError(f"{order.shape[0]} rows for {cols.shape[0]} columns")
    return indptr, cols[order].astype(dtype, copy=False)


def spans(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``start, ..., start + length - 1`` of every span, concatenated (int64)."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(lengths)
    # each position minus the number of positions before its span, plus its span's start
    shift = np.repeat(starts - (ends - lengths), lengths)
    return np.arange(total, dtype=np.int64) + shift


def take_rows(
    indptr: np.ndarray, cols: np.ndarray, rows: Sequence[int] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The rows ``rows`` of a CSR ``(indptr, cols)``, in that order, as a new ``(indptr, cols)``."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = indptr[rows]
    counts = indptr[rows + 1] - starts
    return indptr_of(counts), cols[spans(starts, counts)]


def first_appearance_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Renumber ``values`` 0, 1, ... in order of first appearance.

    Returns:
        ``(codes, kept)``: ``codes[i]`` is the new number (int32) of ``values[i]``
        and ``kept[c]`` the value numbered ``c`` (so ``kept[codes] == values``).
    """
    values = np.asarray(values, dtype=np.int64)
    if not len(values):
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)
    uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), dtype=np.int32)
    rank[order] = np.arange(len(uniq), dtype=np.int32)
    return rank[inverse.ravel()], uniq[order]


def _hash(text: str) -> int:
    return hash(text) & _MASK64


class _HashIndex:
    """64-bit hash -> ids, as sorted arrays plus a small dict of recent entries.

    Equal hashes may stand for different strings: callers check each candidate.
    The two arrays are swapped in together (one tuple), so a reader never pairs
    the keys of one version with the ids of another.
    """

    __slots__ = ("arrays", "recent", "_pending")

    def __init__(self) -> None:
        self.arrays = (np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64))
        self.recent: dict[int, list[int]] = {}
        self._pending = 0

    def get(self, key: int) -> list[int]:
        # The recent entries first: ``settle`` merges them into the arrays before
        # it empties the dict, so one of the two reads holds every entry.
        recent = self.recent.get(key)
        recent = list(recent) if recent else []
        keys, ids = self.arrays
        lo = int(np.searchsorted(keys, np.uint64(key), "left"))
        hi = int(np.searchsorted(keys, np.uint64(key), "right"))
        out = ids[lo:hi].tolist() if hi > lo else []
        return out + [i for i in recent if i not in out] if recent else out

    def add(self, key: int, i: int) -> None:
        self.recent.setdefault(key, []).append(i)
        self._pending += 1
        if self._pending > max(1024, self.arrays[0].shape[0] // 8):
            self.settle()

    def add_many(self, keys: np.ndarray, ids: np.ndarray) -> None:
        self.settle()
        old_keys, old_ids = self.arrays
        keys = np.concatenate([old_keys, np.asarray(keys, dtype=np.uint64)])
        ids = np.concatenate([old_ids, np.asarray(ids, dtype=np.int64)])
        order = np.lexsort((ids, keys))
        self.arrays = (keys[order], ids[order])

    def settle(self) -> None:
        if not self.recent:
            return
        pairs = [(k, i) for k, ids in self.recent.items() for i in ids]
        keys = np.fromiter((k for k, _ in pairs), dtype=np.uint64, count=len(pairs))
        ids = np.fromiter((i for _, i in pairs), dtype=np.int64, count=len(pairs))
        old_keys, old_ids = self.arrays
        keys, ids = np.concatenate([old_keys, keys]), np.concatenate([old_ids, ids])
        order = np.lexsort((ids, keys))
        self.arrays = (keys[order], ids[order])  # merged before the dict is emptied
        self.recent, self._pending = {}, 0

    def nbytes(self) -> int:
        keys, ids = self.arrays
        return int(keys.nbytes + ids.nbytes) + 64 * self._pending


class StringTable(Sequence[str]):
    """Strings in one UTF-8 buffer with an end offset each; ``table[i]`` decodes string ``i``.

    Ids are dense and permanent: the table only grows, and appends never change
    what earlier ids read, so other threads may read and look up while one
    writer grows it. Any Python string round-trips (``surrogatepass``).
    """

    __slots__ = ("_buf", "_ends", "_n", "_index", "_lock")

    def __init__(self, strings: Iterable[str] = ()) -> None:
        self._buf = bytearray()
        self._ends = np.zeros(0, dtype=np.int64)
        self._n = 0
        self._index: _HashIndex | None = None
        self._lock = threading.Lock()
        self.extend(strings)

    @classmethod
    def from_arrays(cls, blob: bytes | bytearray, ends: np.ndarray) -> StringTable:
        """A table over ``blob`` whose string ``i`` ends at byte ``ends[i]`` (see :meth:`arrays`)."""
        table = cls()
        ends = np.asarray(ends, dtype=np.int64).reshape(-1)
        if ends.size and (int(ends[-1]) != len(blob) or bool((np.diff(ends) < 0).any())):
            raise ValueError("ends must be ascending and end at the blob's length")
        table._buf = bytearray(blob)
        table._ends = ends.copy()
        table._n = int(ends.size)
        return table

    def arrays(self) -> tuple[bytes, np.ndarray]:
        """``(blob, ends)``: the UTF-8 bytes and each string's end offset (for persistence)."""
        return bytes(self._buf), self.ends.copy()

    @property
    def ends(self) -> np.ndarray:
        """int64 ``(n,)``: string ``i`` is bytes ``ends[i - 1]`` (0 for the first) to ``ends[i]``."""
        return self._ends[: self._n]

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(self._n)
            if step == 1:
                return list(self.strings(start, stop))
            return [self[k] for k in range(start, stop, step)]
        i = operator.index(i)
        n = self._n
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"string {i} of {n}")
        ends = self._ends
        start = int(ends[i - 1]) if i else 0
        return self._buf[start : int(ends[i])].decode(_ENCODING, _ERRORS)

    def __iter__(self) -> Iterator[str]:
        return self.strings()

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and self.find(text) >= 0

    def __eq__(self, other: object) -> bool:
        """Tables are equal when they hold the same strings in the same order."""
        if not isinstance(other, StringTable):
            return NotImplemented
        n = self._n
        return (
            n == other._n
            and bool(np.array_equal(self._ends[:n], other._ends[:n]))
            and self._buf[: int(self._ends[n - 1]) if n else 0]
            == other._buf[: int(other._ends[n - 1]) if n else 0]
        )

    __hash__ = None  # type: ignore[assignment]  # mutable: appends change it

    def strings(self, first: int = 0, stop: int | None = None) -> Iterator[str]:
        """The strings ``first`` to ``stop`` (default: the end), decoded one at a time."""
        stop = self._n if stop is None else min(stop, self._n)
        if first >= stop:
            return
        buf = self._buf
        bounds = self._ends[max(first - 1, 0) : stop].tolist()
        if first == 0:
            bounds.insert(0, 0)
        for start, end in zip(bounds[:-1], bounds[1:], strict=True):
            yield buf[start:end].decode(_ENCODING, _ERRORS)

    def lengths(self, ids: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """UTF-8 byte length of the strings ``ids`` (all when ``None``)."""
        ends = self.ends
        if ids is None:
            return np.diff(ends, prepend=0)
        ids = np.asarray(ids, dtype=np.int64)
        starts = np.where(ids > 0, ends[np.maximum(ids - 1, 0)], 0)
        return ends[ids] - starts

    def nbytes(self) -> int:
        """Bytes held: the buffer, the offsets and the lookup index (once built)."""
        index = self._index.nbytes() if self._index is not None else 0
        return len(self._buf) + int(self._ends.nbytes) + index

    def _reserve(self, extra: int) -> None:
        need = self._n + extra
        if need > self._ends.shape[0]:
            grown = np.empty(max(need, 2 * self._ends.shape[0], 16), dtype=np.int64)
            grown[: self._n] = self._ends[: self._n]
            self._ends = grown

    def append(self, text: str) -> int:
        """Add ``text`` (even if present); return its id."""
        encoded = text.encode(_ENCODING, _ERRORS)
        with self._lock:
            self._buf += encoded
            self._reserve(1)
            self._ends[self._n] = len(self._buf)
            self._n += 1
            i = self._n - 1
            if self._index is not None:
                self._index.add(_hash(text), i)
        return i

    def extend(self, texts: Iterable[str]) -> np.ndarray:
        """Add every text (repeats kept); return their ids (int64)."""
        texts = texts if isinstance(texts, (list, tuple)) else list(texts)
        if not texts:
            return np.zeros(0, dtype=np.int64)
        encoded = [t.encode(_ENCODING, _ERRORS) for t in texts]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        with self._lock:
            first = self._n
            self._reserve(len(encoded))
            self._ends[first : first + len(encoded)] = len(self._buf) + np.cumsum(lengths)
            self._buf += b"".join(encoded)
            del encoded
            self._n += len(texts)
            ids = np.arange(first, self._n, dtype=np.int64)
            if self._index is not None:
                self._index.add_many(self._hashes(texts), ids)
        return ids

    @staticmethod
    def _hashes(texts: Sequence[str]) -> np.ndarray:
        return np.fromiter(map(_hash, texts), dtype=np.uint64, count=len(texts))

    def _lookup(self) -> _HashIndex:
        index = self._index
        if index is None:
            with self._lock:  # built once, with no write in between
                index = self._index
                if index is None:
                    index = _HashIndex()
                    if self._n:
                        ids = np.arange(self._n, dtype=np.int64)
                        index.add_many(self._hashes(list(self)), ids)
                    self._index = index
        return index

    def find(self, text: str) -> int:
        """The (first) id of ``text``, or -1."""
        for i in self._lookup().get(_hash(text)):
            if self[i] == text:
                return i
        return -1

    def find_many(self, texts: Sequence[str]) -> np.ndarray:
        """The (first) id of each text, -1 where absent (int64; one binary search for all)."""
        out = np.full(len(texts), -1, dtype=np.int64)
        if not len(texts) or not self._n:
            return out
        index = self._lookup()
        index.settle()
        keys, ids = index.arrays
        hashes = self._hashes(texts)
        lo = np.searchsorted(keys, hashes, "left")
        hi = np.searchsorted(keys, hashes, "right")
        for k in np.flatnonzero(hi > lo).tolist():
            text = texts[k]
            for i in ids[lo[k] : hi[k]].tolist():
                if self[i] == text:
                    out[k] = i
                    break
        return out

    def intern(self, text: str) -> int:
        """The id of ``text``, added if new."""
        i = self.find(text)
        return i if i >= 0 else self.append(text)

    def intern_many(self, texts: Iterable[str]) -> np.ndarray:
        """The id of each text (int64), the new ones added in one go in order of first appearance."""
        texts = texts if isinstance(texts, (list, tuple)) else list(texts)
        unique = list(dict.fromkeys(texts))
        ids = self.find_many(unique)
        new = np.flatnonzero(ids < 0)
        if new.size:
            self._lookup()  # so that extend indexes the new strings
            ids[new] = self.extend([unique[k] for k in new.tolist()])
        if len(unique) == len(texts):
            return ids
        position = {t: k for k, t in enumerate(unique)}
        return ids[np.fromiter((position[t] for t in texts), dtype=np.int64, count=len(texts))]

    def fit(self) -> None:
        """Drop spare capacity and merge pending lookup entries (after a build)."""
        with self._lock:
            if self._ends.shape[0] > self._n:
                self._ends = self._ends[: self._n].copy()
            if self._index is not None:
                self._index.settle()

    def take(self, ids: Sequence[int] | np.ndarray) -> StringTable:
        """A new table of the strings ``ids``, in that order."""
        ids = np.asarray(ids, dtype=np.int64)
        lengths = self.lengths(ids)
        starts = self.ends[ids] - lengths
        data = np.frombuffer(self._buf, dtype=np.uint8)[spans(starts, lengths)]
        return StringTable.from_arrays(data.tobytes(), np.cumsum(lengths, dtype=np.int64))

    @classmethod
    def concat(cls, parts: Sequence[StringTable]) -> StringTable:
        """A new table of the strings of ``parts``, one after the other."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls()
        bases = np.cumsum([0] + [len(p._buf) for p in parts[:-1]])
        ends = np.concatenate([p.ends + base for p, base in zip(parts, bases, strict=True)])
        return cls.from_arrays(b"".join(bytes(p._buf) for p in parts), ends)

    def __repr__(self) -> str:
        return f"StringTable({self._n} strings, {len(self._buf)} bytes)"


__all__ = [
    "StringTable",
    "csr",
    "csr_order",
    "first_appearance_codes",
    "indptr_of",
    "spans",
    "take_rows",
]
