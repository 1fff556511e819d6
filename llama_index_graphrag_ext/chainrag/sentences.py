"""The sentences of a sentence graph as columns (texts, chunk, position, entities).

Why columns and not one Python object per sentence (``docs/scaling.md``, "Memory"):
a ``SentenceRecord`` per sentence (its text, its tuple of entity keys, the keys
themselves) was about 7 MB of small objects at 4,000 chunks (15k sentences), and
as they were made while the corpus's spaCy analyses were alive, they kept much of
the analyses' memory resident after the build (CPython's small-object allocator
returns memory only in whole arenas). Here a table is a handful of large buffers:
the texts as one UTF-8 blob with offsets, chunk rows and positions as int32
arrays, and the entities as CSR rows over an entity vocabulary that is itself one
blob. Row views (:class:`~.sentence_graph.SentenceRecord`) are made on access.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np


@dataclass(frozen=True, eq=False)
class PackedStrings(Sequence[str]):
    """Strings kept as one UTF-8 ``bytes`` blob and ``n + 1`` offsets; item ``i`` is decoded on access.

    Attributes:
        blob: The strings' UTF-8 bytes, back to back.
        offsets: int64 ``(n + 1,)``: string ``i`` is ``blob[offsets[i]:offsets[i + 1]]``.
    """

    blob: bytes = b""
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))

    @classmethod
    def of(cls, strings: Iterable[str]) -> PackedStrings:
        """Pack strings (an iterable is consumed once)."""
        encoded = [s.encode("utf-8") for s in strings]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        return cls(b"".join(encoded), offsets)

    @classmethod
    def concat(cls, parts: Sequence[PackedStrings]) -> PackedStrings:
        """The strings of ``parts``, one after the other."""
        parts = [p for p in parts if len(p)]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls()
        bases = np.cumsum([0] + [len(p.blob) for p in parts[:-1]])
        offsets = np.concatenate(
            [np.zeros(1, np.int64)]
            + [p.offsets[1:] + base for p, base in zip(parts, bases, strict=True)]
        )
        return cls(b"".join(p.blob for p in parts), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"string {i} of {n}")
        i = int(i) % n
        return self.blob[self.offsets[i] : self.offsets[i + 1]].decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        return self.strings()

    def strings(self, first: int = 0) -> Iterator[str]:
        """The strings from position ``first`` on, decoded one at a time."""
        blob, offsets = self.blob, self.offsets[first:].tolist()
        for start, stop in zip(offsets[:-1], offsets[1:], strict=True):
            yield blob[start:stop].decode("utf-8")

    def take(self, rows: np.ndarray) -> PackedStrings:
        """The strings at ``rows`` (an int array), in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        starts = self.offsets[rows]
        lengths = self.offsets[rows + 1] - starts
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = np.frombuffer(self.blob, dtype=np.uint8)[spans(starts, lengths)]
        return PackedStrings(data.tobytes(), offsets)

    def numbering(self) -> dict[str, int]:
        """``{string: position}`` (the last position of a repeated string)."""
        return {s: i for i, s in enumerate(self)}


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


def first_appearance_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Renumber ``values`` 0, 1, ... in order of first appearance.

    Returns:
        ``(codes, kept)``: ``codes[i]`` is the new number of ``values[i]`` and
        ``kept[c]`` the value numbered ``c`` (so ``kept[codes] == values``).
    """
    values = np.asarray(values, dtype=np.int64)
    if not len(values):
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)
    uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), dtype=np.int32)
    rank[order] = np.arange(len(uniq), dtype=np.int32)
    return rank[inverse.ravel()], uniq[order]


@dataclass(frozen=True, eq=False)
class SentenceTable:
    """Sentences in row order (rows of one chunk contiguous, in text order), as columns.

    Attributes:
        texts: The sentences.
        chunk_ids: The chunks the rows come from, in order of first appearance.
        chunk_rows: int32 ``(n,)``: row ``i`` comes from ``chunk_ids[chunk_rows[i]]``.
        positions: int32 ``(n,)``: each row's index among its chunk's sentences.
        entity_names: The normalised entity keys, numbered by first appearance.
        entity_ptr: int64 ``(n + 1,)``: row ``i``'s entities are
            ``entity_ids[entity_ptr[i]:entity_ptr[i + 1]]``.
        entity_ids: int32: each row's distinct entities in text order (numbers in
            ``entity_names``).
    """

    texts: PackedStrings
    chunk_ids: tuple[str, ...]
    chunk_rows: np.ndarray
    positions: np.ndarray
    entity_names: PackedStrings
    entity_ptr: np.ndarray
    entity_ids: np.ndarray

    @classmethod
    def empty(cls) -> SentenceTable:
        """A table with no rows."""
        no_rows = np.zeros(0, dtype=np.int32)
        return cls(
            PackedStrings(), (), no_rows, no_rows, PackedStrings(), np.zeros(1, np.int64), no_rows
        )

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, str, int, Sequence[str]]]) -> SentenceTable:
        """A table of ``(text, chunk id, position, entity keys)`` rows (keys made distinct)."""
        builder = SentenceTableBuilder()
        for text, chunk_id, position, entities in rows:
            builder.add(text, chunk_id, int(position), entities)
        return builder.finish()

    def __len__(self) -> int:
        return len(self.chunk_rows)

    def text(self, row: int) -> str:
        """The sentence of ``row``."""
        return self.texts[row]

    def chunk_id(self, row: int) -> str:
        """The chunk ``row`` comes from."""
        return self.chunk_ids[self.chunk_rows[row]]

    def position(self, row: int) -> int:
        """``row``'s index among its chunk's sentences."""
        return int(self.positions[row])

    def entity_row(self, row: int) -> np.ndarray:
        """The entity numbers of ``row`` (text order)."""
        return self.entity_ids[self.entity_ptr[row] : self.entity_ptr[row + 1]]

    def entities(self, row: int) -> tuple[str, ...]:
        """The entity keys of ``row`` (text order)."""
        names = self.entity_names
        return tuple(names[e] for e in self.entity_row(row).tolist())

    def take(self, rows: np.ndarray) -> SentenceTable:
        """The table of ``rows`` (in that order), chunk ids and entity names renumbered."""
        rows = np.asarray(rows, dtype=np.int64)
        chunk_codes, chunks = first_appearance_codes(self.chunk_rows[rows])
        starts = self.entity_ptr[rows]
        counts = self.entity_ptr[rows + 1] - starts
        ptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        entity_codes, names = first_appearance_codes(self.entity_ids[spans(starts, counts)])
        return SentenceTable(
            texts=self.texts.take(rows),
            chunk_ids=tuple(self.chunk_ids[c] for c in chunks.tolist()),
            chunk_rows=chunk_codes,
            positions=self.positions[rows],
            entity_names=self.entity_names.take(names),
            entity_ptr=ptr,
            entity_ids=entity_codes,
        )

    def rows_of_chunks(self, chunk_ids: Iterable[str]) -> np.ndarray:
        """Boolean ``(n,)``: which rows come from one of ``chunk_ids``."""
        wanted = set(chunk_ids)
        hit = np.fromiter(
            (c in wanted for c in self.chunk_ids), dtype=bool, count=len(self.chunk_ids)
        )
        return hit[self.chunk_rows] if len(hit) else np.zeros(len(self), dtype=bool)


class SentenceTableBuilder:
    """Appends sentences to a table a batch at a time, keeping only packed columns between batches.

    Each :meth:`pack` turns the sentences added since the last one into arrays and
    blobs, so the Python objects they came from can be freed: the build's working
    set is one batch (``docs/scaling.md``, "Memory"). Entity keys are numbered only
    in :meth:`finish`, after the batches: numbered on the fly, the growing
    dictionary of key strings was allocated amid every batch's temporaries, and
    the few objects spaCy keeps from each batch then pinned that memory
    (16,000 chunks: 10 more arenas than the index's other structures).

    Args:
        base: The table to extend (none: start empty).
    """

    def __init__(self, base: SentenceTable | None = None) -> None:
        self._base = base if base is not None else SentenceTable.empty()
        self._chunk_ids: list[str] = list(self._base.chunk_ids)
        self._chunk_code: dict[str, int] = {c: i for i, c in enumerate(self._chunk_ids)}
        self._parts: list[tuple[PackedStrings, np.ndarray, np.ndarray, np.ndarray, PackedStrings]]
        self._parts = []
        self._pending: tuple[list[str], list[int], list[int], list[int], list[str]]
        self._pending = ([], [], [], [], [])

    def add(self, text: str, chunk_id: str, position: int, entities: Iterable[str]) -> None:
        """Append one sentence (its entity keys are made distinct, text order kept)."""
        texts, chunks, positions, counts, keys = self._pending
        code = self._chunk_code.get(chunk_id)
        if code is None:
            code = self._chunk_code[chunk_id] = len(self._chunk_ids)
            self._chunk_ids.append(chunk_id)
        texts.append(text)
        chunks.append(code)
        positions.append(position)
        distinct = dict.fromkeys(entities)
        counts.append(len(distinct))
        keys.extend(distinct)

    def pack(self) -> None:
        """Turn the sentences added since the last call into columns."""
        texts, chunks, positions, counts, keys = self._pending
        if texts:
            self._parts.append(
                (
                    PackedStrings.of(texts),
                    np.asarray(chunks, dtype=np.int32),
                    np.asarray(positions, dtype=np.int32),
                    np.asarray(counts, dtype=np.int64),
                    PackedStrings.of(keys),
                )
            )
        self._pending = ([], [], [], [], [])

    def finish(self) -> SentenceTable:
        """The base table followed by every sentence added."""
        self.pack()
        base = self._base
        if not self._parts:
            return base
        texts, chunks, positions, counts, keys = zip(*self._parts, strict=True)
        self._parts.clear()
        added = np.concatenate(counts)
        ptr = np.concatenate([base.entity_ptr, base.entity_ptr[-1] + np.cumsum(added)])
        ids, names = _number_keys(base.entity_names, PackedStrings.concat(keys))
        return SentenceTable(
            texts=PackedStrings.concat([base.texts, *texts]),
            chunk_ids=tuple(self._chunk_ids),
            chunk_rows=np.concatenate([base.chunk_rows, *chunks]),
            positions=np.concatenate([base.positions, *positions]),
            entity_names=names,
            entity_ptr=ptr,
            entity_ids=np.concatenate([base.entity_ids, ids]),
        )


def _number_keys(names: PackedStrings, keys: PackedStrings) -> tuple[np.ndarray, PackedStrings]:
    """Number ``keys`` by first appearance, continuing the numbering of the distinct ``names``.

    Returns:
        ``(ids, names)``: int32 numbers of the keys and the extended names.
    """
    vocab = names.numbering()
    known = len(vocab)
    ids = np.fromiter(
        (vocab.setdefault(k, len(vocab)) for k in keys), dtype=np.int32, count=len(keys)
    )
    fresh = PackedStrings.of(list(vocab)[known:])
    return ids, PackedStrings.concat([names, fresh])
