"""The sentences of a sentence graph as columns (texts, chunk, position, entities).

Columns, not one Python object per sentence (``docs/scaling.md``, "Memory"); row
views (:class:`SentenceRecord`) are made on access. A table is never changed in
place, so a graph built from an old one stays consistent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..core.arrays import StringTable, first_appearance_codes, indptr_of, spans


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

    texts: StringTable
    chunk_ids: tuple[str, ...]
    chunk_rows: np.ndarray
    positions: np.ndarray
    entity_names: StringTable
    entity_ptr: np.ndarray
    entity_ids: np.ndarray

    @classmethod
    def empty(cls) -> SentenceTable:
        """A table with no rows."""
        no_rows = np.zeros(0, dtype=np.int32)
        return cls(
            StringTable(), (), no_rows, no_rows, StringTable(), np.zeros(1, np.int64), no_rows
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
        ptr = indptr_of(counts)
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

    Entity keys are numbered only in :meth:`finish`, so no growing dictionary of key
    strings is allocated amid the batches' temporaries (``docs/scaling.md``, "Memory").
    """

    def __init__(self, base: SentenceTable | None = None) -> None:
        self._base = base if base is not None else SentenceTable.empty()
        self._chunk_ids: list[str] = list(self._base.chunk_ids)
        self._chunk_code: dict[str, int] = {c: i for i, c in enumerate(self._chunk_ids)}
        self._parts: list[tuple[StringTable, np.ndarray, np.ndarray, np.ndarray, StringTable]]
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
                    StringTable(texts),
                    np.asarray(chunks, dtype=np.int32),
                    np.asarray(positions, dtype=np.int32),
                    np.asarray(counts, dtype=np.int64),
                    StringTable(keys),
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
        # Copied, not extended: a graph built on the base reads them.
        names = StringTable.concat([base.entity_names])
        ids = names.intern_many(StringTable.concat(keys)).astype(np.int32)
        names.fit()
        return SentenceTable(
            texts=StringTable.concat([base.texts, *texts]),
            chunk_ids=tuple(self._chunk_ids),
            chunk_rows=np.concatenate([base.chunk_rows, *chunks]),
            positions=np.concatenate([base.positions, *positions]),
            entity_names=names,
            entity_ptr=ptr,
            entity_ids=np.concatenate([base.entity_ids, ids]),
        )


@dataclass(frozen=True)
class SentenceRecord:
    """One sentence of the graph, as a row view of a :class:`SentenceTable`.

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


class SentenceRecords(Sequence[SentenceRecord]):
    """A table's rows as :class:`SentenceRecord` objects, each made when it is read."""

    def __init__(self, table: SentenceTable) -> None:
        self._table = table

    def __len__(self) -> int:
        return len(self._table)

    def __getitem__(self, row):  # type: ignore[override]
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        t = self._table
        row = row_index(row, len(t))
        return SentenceRecord(t.text(row), t.chunk_id(row), t.position(row), t.entities(row))


def row_index(row: int, n: int) -> int:
    """``row`` as a position in ``n`` rows (negative counts from the end; IndexError outside)."""
    if not -n <= row < n:
        raise IndexError(f"row {row} of {n}")
    return int(row) % n
