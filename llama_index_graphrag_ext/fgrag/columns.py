"""Flat storage for FG-RAG's graph: growable numpy columns, a string table, property tokens.

FG-RAG's co-occurrence graph has many small records: at 4,000 chunks about
24,000 entities and 68,000 relations, each with a short property dict whose
strings (sentences, chunk ids, names) repeat across records. Held as one
Python object per record (or one compressed pickle per record, plus its key
string, its triplet tuple and dict entries) they cost more than the entity
vectors, and, being small objects made while the build's temporaries were
alive, they kept much of the build's memory resident (``docs/scaling.md``).

Here a record is a few integers:

- :class:`StringTable` holds each distinct string once, UTF-8 in one buffer,
  and gives it an integer id;
- :class:`PropertyCodec` writes a property dict as ``int32`` tokens: the id of
  its *layout* (the keys and value kinds, shared by every record of that
  shape), then per value a string id, or a count and string ids for a list of
  strings, or the id of a pickled value for anything else;
- :class:`Growable` columns hold ids and token offsets.

None of it is a Python object per record, so nothing of it is left scattered
among the small-object allocator's arenas.
"""

from __future__ import annotations

import operator
import pickle
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

#: Property value kinds in a layout: one string, a list of strings, any other value.
STR, STRS, OBJ = 0, 1, 2


class Growable:
    """A numpy array filled from the front that doubles its capacity when full.

    ``view`` is the filled part. Appends never move what is already written
    except by copying into a new buffer, so a view handed out earlier keeps
    reading the values it saw.

    Args:
        dtype: Element type.
        tail: Shape of one element (``()`` for scalars, ``(d,)`` for matrix rows).
    """

    __slots__ = ("_data", "_n")

    def __init__(self, dtype: Any, tail: tuple[int, ...] = ()) -> None:
        self._data = np.empty((0, *tail), dtype=dtype)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    @property
    def view(self) -> np.ndarray:
        """The filled part (a view, not a copy)."""
        return self._data[: self._n]

    def reserve(self, extra: int) -> None:
        """Make room for ``extra`` more elements (exactly, when it is the first growth)."""
        need = self._n + int(extra)
        cap = self._data.shape[0]
        if need <= cap:
            return
        grown = np.empty((max(need, 2 * cap), *self._data.shape[1:]), dtype=self._data.dtype)
        grown[: self._n] = self._data[: self._n]
        self._data = grown

    def append(self, value: Any) -> int:
        """Add one element; return its index."""
        if self._n == self._data.shape[0]:
            self.reserve(max(16, self._n))
        self._data[self._n] = value
        self._n += 1
        return self._n - 1

    def extend(self, values: Any) -> int:
        """Add many elements; return the index of the first."""
        values = np.asarray(values, dtype=self._data.dtype)
        k = int(values.shape[0]) if values.ndim else 1
        self.reserve(k)
        start = self._n
        self._data[start : start + k] = values
        self._n += k
        return start

    def __getitem__(self, i: Any) -> Any:
        return self.view[i]

    def __setitem__(self, i: Any, value: Any) -> None:
        self.view[i] = value

    def fit(self) -> None:
        """Drop the spare capacity (a fresh buffer of exactly the filled part)."""
        if self._data.shape[0] > self._n:
            self.replace(self.view)

    def replace(self, values: np.ndarray) -> None:
        """Hold exactly ``values`` (a fresh buffer; earlier views keep the old one)."""
        self._data = np.array(values, dtype=self._data.dtype, copy=True)
        self._n = int(self._data.shape[0])


def hash32(text: str) -> int:
    """A 32-bit hash of ``text`` (this process's ``hash``, its low bits)."""
    return hash(text) & 0xFFFFFFFF


class IntIndex:
    """32-bit key -> rows, for tables that mostly grow: sorted arrays plus recent keys.

    Keys are hashes: a caller checks each candidate row (equal keys may stand
    for different records, and rows may have died), so 32 bits suffice, at 8
    bytes an entry. Lookups are a binary search; keys added one at a time
    wait in a small dict until there are enough of them to merge. Entries are
    never removed; a caller rebuilds the index when it compacts its table.
    """

    __slots__ = ("_keys", "_rows", "_recent")

    def __init__(self) -> None:
        self._keys = np.empty(0, dtype=np.uint32)
        self._rows = np.empty(0, dtype=np.int32)
        self._recent: dict[int, list[int]] = {}

    def get(self, key: int) -> list[int]:
        """Candidate rows of ``key`` (oldest first)."""
        keys = self._keys
        lo = int(np.searchsorted(keys, key, "left"))
        out = []
        while lo < keys.shape[0] and keys[lo] == key:
            out.append(int(self._rows[lo]))
            lo += 1
        recent = self._recent.get(key)
        return out + recent if recent else out

    def add(self, key: int, row: int) -> None:
        """Add one entry (merged into the arrays later)."""
        self._recent.setdefault(key, []).append(row)
        if len(self._recent) > max(1024, self._keys.shape[0] >> 4):
            self._merge()

    def add_many(self, keys: np.ndarray, rows: np.ndarray) -> None:
        """Add many entries at once (one sorted merge)."""
        self._merge(np.asarray(keys, dtype=np.uint32), np.asarray(rows, dtype=np.int32))

    def lookup_many(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)``: the candidates of ``keys[i]`` are ``rows_at(lo[i]..hi[i])``.

        Entries added one at a time are merged first, so the arrays hold all.
        """
        self._merge()
        return (
            np.searchsorted(self._keys, keys, "left"),
            np.searchsorted(self._keys, keys, "right"),
        )

    def settle(self) -> None:
        """Merge the entries added one at a time into the arrays now."""
        self._merge()

    def rows_at(self, positions: np.ndarray) -> np.ndarray:
        """Rows at positions of the sorted arrays (see :meth:`lookup_many`)."""
        return self._rows[positions]

    def _merge(self, keys: np.ndarray | None = None, rows: np.ndarray | None = None) -> None:
        parts_k, parts_r = [], []
        if self._recent:
            for key, found in self._recent.items():
                parts_k.extend([key] * len(found))
                parts_r.extend(found)
            self._recent = {}
        new_k = np.asarray(parts_k, dtype=np.uint32)
        new_r = np.asarray(parts_r, dtype=np.int32)
        if keys is not None and rows is not None and keys.size:
            new_k = np.concatenate([new_k, keys])
            new_r = np.concatenate([new_r, rows])
        if not new_k.size:
            return
        # Stable on (key, row): candidates come back oldest row first.
        order = np.lexsort((new_r, new_k))
        new_k, new_r = new_k[order], new_r[order]
        at = np.searchsorted(self._keys, new_k, "right")
        self._keys = np.insert(self._keys, at, new_k)
        self._rows = np.insert(self._rows, at, new_r)

    def nbytes(self) -> int:
        return int(self._keys.nbytes + self._rows.nbytes)


class StringTable(Sequence):
    """Distinct strings in one UTF-8 buffer; ``table[i]`` decodes string ``i``.

    ``find`` and ``intern`` map a string to its id through its hash (checked
    against the stored text), so no Python string is kept per entry. Ids are
    dense and permanent: the table only grows.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._ends = Growable(np.int64)
        self._index = IntIndex()

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = operator.index(i)
        n = len(self._ends)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        ends = self._ends.view
        start = int(ends[i - 1]) if i else 0
        return self._buf[start : int(ends[i])].decode("utf-8", "surrogatepass")

    def _append(self, text: str) -> int:
        self._buf += text.encode("utf-8", "surrogatepass")
        return self._ends.append(len(self._buf))

    def settle(self) -> None:
        """Merge the lookup entries of strings added one at a time (see :class:`IntIndex`)."""
        self._index.settle()

    def find(self, text: str) -> int:
        """The id of ``text``, or -1."""
        for i in self._index.get(hash32(text)):
            if self[i] == text:
                return i
        return -1

    def intern(self, text: str) -> int:
        """The id of ``text``, added if new."""
        h = hash32(text)
        for i in self._index.get(h):
            if self[i] == text:
                return i
        i = self._append(text)
        self._index.add(h, i)
        return i

    def find_many(self, texts: Sequence[str]) -> np.ndarray:
        """Ids of ``texts`` (-1 where absent), with one binary search for all."""
        out = np.full(len(texts), -1, dtype=np.int32)
        if not len(texts) or not len(self):
            return out
        hashes = np.fromiter(map(hash32, texts), dtype=np.uint32, count=len(texts))
        lo, hi = self._index.lookup_many(hashes)
        for k in np.nonzero(hi > lo)[0].tolist():
            text = texts[k]
            for i in self._index.rows_at(np.arange(lo[k], hi[k])).tolist():
                if self[i] == text:
                    out[k] = i
                    break
        return out

    def intern_many(self, texts: Iterable[str]) -> np.ndarray:
        """Ids of ``texts``, the new ones added in one go."""
        texts = list(texts)
        unique = list(dict.fromkeys(texts))
        ids = self.find_many(unique)
        new = np.nonzero(ids < 0)[0]
        if new.size:
            fresh = [unique[k] for k in new.tolist()]
            encoded = [t.encode("utf-8", "surrogatepass") for t in fresh]
            lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
            start_id = len(self)
            self._ends.extend(len(self._buf) + np.cumsum(lengths))
            self._buf += b"".join(encoded)
            del encoded
            new_ids = np.arange(start_id, start_id + len(fresh), dtype=np.int32)
            ids[new] = new_ids
            hashes = np.fromiter(map(hash32, fresh), dtype=np.uint32, count=len(fresh))
            self._index.add_many(hashes, new_ids)
        if len(unique) == len(texts):
            return ids
        position = {t: k for k, t in enumerate(unique)}
        return ids[np.fromiter((position[t] for t in texts), dtype=np.int64, count=len(texts))]

    def lengths(self, ids: np.ndarray) -> np.ndarray:
        """UTF-8 byte length of each string in ``ids``."""
        ends = self._ends.view
        ids = np.asarray(ids, dtype=np.int64)
        starts = np.where(ids > 0, ends[np.maximum(ids - 1, 0)], 0)
        return ends[ids] - starts

    def containing(self, needle: bytes) -> np.ndarray:
        """Ids of the strings whose text contains ``needle`` (one scan of the buffer)."""
        buf, hits = self._buf, []
        at = buf.find(needle)
        while at >= 0:
            hits.append(at)
            at = buf.find(needle, at + 1)
        if not hits:
            return np.zeros(0, dtype=np.int64)
        ends = self._ends.view
        starts_of = np.searchsorted(ends, np.asarray(hits, dtype=np.int64), "right")
        # A match may straddle two strings; keep it only when it ends inside its own.
        inside = np.asarray(hits, dtype=np.int64) + len(needle) <= ends[starts_of]
        return np.unique(starts_of[inside])

    def fit(self) -> None:
        """Drop the spare capacity of the offsets (see :meth:`Growable.fit`)."""
        self._index.settle()
        self._ends.fit()

    def nbytes(self) -> int:
        return len(self._buf) + self._ends.view.nbytes + self._index.nbytes()


class PropertyCodec:
    """Property dicts as ``int32`` tokens over a :class:`StringTable`.

    A dict is written as its layout id (the tuple of ``(key, kind)``, stored
    once per shape), then each value: ``STR`` one string id; ``STRS`` a count
    and that many string ids; ``OBJ`` the id of the value's pickle (stored once
    per distinct pickle). Decoding gives an equal dict, keys in the same order.
    """

    def __init__(self, strings: StringTable) -> None:
        self.strings = strings
        self.layouts: list[tuple[tuple[str, int], ...]] = []
        self._layout_ids: dict[tuple[tuple[str, int], ...], int] = {}
        self.objects: list[bytes] = []
        self._object_ids: dict[bytes, int] = {}

    def layout_id(self, layout: tuple[tuple[str, int], ...]) -> int:
        """The id of a layout, added if new."""
        lid = self._layout_ids.get(layout)
        if lid is None:
            lid = self._layout_ids[layout] = len(self.layouts)
            self.layouts.append(layout)
        return lid

    def object_id(self, value: Any) -> int:
        """The id of a value stored by its pickle, added if new."""
        blob = pickle.dumps(value, protocol=5)
        oid = self._object_ids.get(blob)
        if oid is None:
            oid = self._object_ids[blob] = len(self.objects)
            self.objects.append(blob)
        return oid

    @staticmethod
    def kind_of(value: Any) -> int:
        """How a value is written: ``STR``, ``STRS`` or ``OBJ``."""
        if type(value) is str:
            return STR
        if type(value) is list and all(type(v) is str for v in value):
            return STRS
        return OBJ

    def encode(
        self, props: dict[str, Any], out: Any, intern: Callable[[str], int] | None = None
    ) -> None:
        """Append the tokens of ``props`` to ``out`` (a list or an ``array``).

        ``intern`` replaces the table's own (e.g. one with a cache in front).
        """
        kinds = [self.kind_of(v) for v in props.values()]
        out.append(self.layout_id(tuple(zip(props.keys(), kinds, strict=True))))
        intern = intern or self.strings.intern
        for value, kind in zip(props.values(), kinds, strict=True):
            if kind == STR:
                out.append(intern(value))
            elif kind == STRS:
                out.append(len(value))
                out.extend(intern(v) for v in value)
            else:
                out.append(self.object_id(value))

    def decode(self, tokens: Sequence[int], pos: int = 0) -> tuple[dict[str, Any], int]:
        """The dict written at ``tokens[pos]`` and the position after it."""
        strings = self.strings
        layout = self.layouts[tokens[pos]]
        pos += 1
        props: dict[str, Any] = {}
        for key, kind in layout:
            if kind == STR:
                props[key] = strings[tokens[pos]]
                pos += 1
            elif kind == STRS:
                count = tokens[pos]
                props[key] = [strings[i] for i in tokens[pos + 1 : pos + 1 + count]]
                pos += 1 + count
            else:
                props[key] = pickle.loads(self.objects[tokens[pos]])
                pos += 1
        return props, pos

    def lengths(self, tokens: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Token length of each record starting at ``starts`` (one walk per layout)."""
        starts = np.asarray(starts, dtype=np.int64)
        ends = starts.copy()
        if not starts.size:
            return ends
        layout_of = tokens[starts]
        for lid in np.unique(layout_of).tolist():
            sel = np.nonzero(layout_of == lid)[0]
            at = starts[sel] + 1
            for _, k in self.layouts[lid]:
                at = at + (1 + tokens[at].astype(np.int64) if k == STRS else 1)
            ends[sel] = at
        return ends - starts

    def locate(
        self, tokens: np.ndarray, starts: np.ndarray, key: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """Where property ``key`` is in each record starting at ``starts``.

        Returns ``(kind, pos)`` per record: the value's kind (-1 when the record
        has no such key) and the token position of its value (of the count,
        for ``STRS``). One vectorised walk per layout, not a loop per record.
        """
        starts = np.asarray(starts, dtype=np.int64)
        kind = np.full(starts.shape[0], -1, dtype=np.int8)
        pos = np.zeros(starts.shape[0], dtype=np.int64)
        if not starts.size:
            return kind, pos
        layout_of = tokens[starts]
        for lid in np.unique(layout_of).tolist():
            sel = np.nonzero(layout_of == lid)[0]
            at = starts[sel] + 1
            for name, k in self.layouts[lid]:
                if name == key:
                    kind[sel] = k
                    pos[sel] = at
                    break
                at = at + (1 + tokens[at].astype(np.int64) if k == STRS else 1)
        return kind, pos


def ragged_gather(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([values[s:s+c] for s, c in zip(starts, counts)])`` without the loop."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if not total:
        return values[:0]
    offsets = np.repeat(np.asarray(starts, dtype=np.int64) - np.cumsum(counts) + counts, counts)
    return values[offsets + np.arange(total, dtype=np.int64)]


__all__ = [
    "OBJ",
    "STR",
    "STRS",
    "hash32",
    "Growable",
    "IntIndex",
    "PropertyCodec",
    "StringTable",
    "ragged_gather",
]
