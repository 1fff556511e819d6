"""The index's query nodes (LP-RAG §3.2-3.3) as a few flat arrays (no object per query).

* ``digests``: the id (``"q:"`` + 16 hex digits of a SHA-1) as a ``uint64``;
* ``texts``: the texts, packed in a :class:`~..core.arrays.StringTable`;
* ``chunk_ptr`` / ``chunk_rows``: the linked chunks (its batch, §3.2), CSR style,
  as rows of the index's chunk table;
* ``origins``: an index into :data:`ORIGINS`;
* ``vectors``: the ``(m, d)`` unit query vectors.

Persisted indexes keep the record form (``queries.json``).
"""

from __future__ import annotations

import hashlib
import re
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.arrays import StringTable, indptr_of

#: Where a query node comes from.
ORIGINS: tuple[str, ...] = ("llm", "pseudo", "bridge")
_ORIGIN_CODE = {name: code for code, name in enumerate(ORIGINS)}
_ID = re.compile(r"q:([0-9a-f]{16})")


def query_digest(first_chunk_id: str, text: str) -> int:
    """The 64-bit digest behind a query's id: its batch's target chunk and its text."""
    return int(hashlib.sha1(f"{first_chunk_id}|{text}".encode()).hexdigest()[:16], 16)


def _id_of(digest: int) -> str:
    return f"q:{digest:016x}"


@dataclass(frozen=True, eq=False)
class QueryTable:
    """Query nodes in flat arrays (see the module docs); immutable, so readers never lock."""

    digests: np.ndarray
    texts: StringTable
    chunk_ptr: np.ndarray
    chunk_rows: np.ndarray
    origins: np.ndarray
    vectors: np.ndarray

    @classmethod
    def empty(cls) -> QueryTable:
        """No queries."""
        return QueryTableBuilder().build(np.zeros((0, 0), np.float32))

    @classmethod
    def from_records(
        cls,
        records: Iterable[Mapping[str, Any]],
        row_of: Mapping[str, int],
        vectors: np.ndarray,
    ) -> QueryTable:
        """The table of :meth:`records` (e.g. read back from ``queries.json``), with
        ``row_of`` each chunk id's row and ``vectors`` row-aligned with ``records``."""
        builder = QueryTableBuilder()
        for record in records:
            match = _ID.fullmatch(record["id"])
            if match is None:
                raise ValueError(f"query id {record['id']!r} is not 'q:' + 16 hex digits")
            builder.add(
                record["text"],
                [row_of[c] for c in record["chunks"]],
                record["origin"],
                digest=int(match.group(1), 16),
            )
        return builder.build(vectors)

    def __len__(self) -> int:
        return len(self.digests)

    @property
    def num_links(self) -> int:
        """Query-chunk links (the relation ``A`` of §3.2)."""
        return len(self.chunk_rows)

    def query_id(self, i: int) -> str:
        return _id_of(int(self.digests[i]))

    def text(self, i: int) -> str:
        return self.texts[i]

    def origin(self, i: int) -> str:
        return ORIGINS[int(self.origins[i])]

    def chunks_of(self, i: int) -> np.ndarray:
        """Chunk rows query ``i`` is linked to, its batch's target first."""
        return self.chunk_rows[self.chunk_ptr[i] : self.chunk_ptr[i + 1]]

    def links(self) -> tuple[np.ndarray, np.ndarray]:
        """The supervision links as ``(query rows, chunk rows)``, query by query."""
        per_query = np.diff(self.chunk_ptr)
        return np.repeat(np.arange(len(self), dtype=np.int64), per_query), self.chunk_rows

    def records(self, chunk_ids: Sequence[str]) -> list[dict[str, Any]]:
        """One ``{"id", "text", "chunks", "origin"}`` dict per query (the persisted form)."""
        return [
            {
                "id": self.query_id(i),
                "text": self.text(i),
                "chunks": [chunk_ids[r] for r in self.chunks_of(i).tolist()],
                "origin": self.origin(i),
            }
            for i in range(len(self))
        ]

    def concat(self, other: QueryTable) -> QueryTable:
        """This table's queries, then ``other``'s."""
        if not len(self):
            return other
        if not len(other):
            return self
        return QueryTable(
            digests=np.concatenate([self.digests, other.digests]),
            texts=StringTable.concat([self.texts, other.texts]),
            chunk_ptr=np.concatenate([self.chunk_ptr, other.chunk_ptr[1:] + self.num_links]),
            chunk_rows=np.concatenate([self.chunk_rows, other.chunk_rows]),
            origins=np.concatenate([self.origins, other.origins]),
            vectors=np.vstack([self.vectors, other.vectors]),
        )

    def remap_chunks(self, new_row: np.ndarray) -> QueryTable:
        """After chunks were deleted: links follow ``new_row`` (``new_row[old]``: the
        row after the deletion, ``-1`` if deleted); queries left without links go."""
        rows = np.asarray(new_row, np.int64)[self.chunk_rows]
        alive = rows >= 0
        left = np.bincount(self.links()[0][alive], minlength=len(self))
        keep = left > 0
        # A dropped query has no live link left, so ``rows[alive]`` holds exactly
        # the kept queries' links, in order.
        return QueryTable(
            digests=self.digests[keep],
            texts=self.texts.take(np.flatnonzero(keep)),
            chunk_ptr=indptr_of(left[keep]),
            chunk_rows=rows[alive],
            origins=self.origins[keep],
            vectors=self.vectors[keep],
        )


class QueryTableBuilder:
    """Collects queries one by one into flat buffers (no per-query object), then
    makes a :class:`QueryTable`."""

    def __init__(self) -> None:
        self._digests = array("Q")
        self._texts = StringTable()
        self._chunk_ptr = array("q", [0])
        self._chunk_rows = array("q")
        self._origins = array("B")

    def __len__(self) -> int:
        return len(self._digests)

    def add(
        self,
        text: str,
        chunk_rows: Sequence[int] | np.ndarray,
        origin: str,
        *,
        first_chunk_id: str | None = None,
        digest: int | None = None,
    ) -> None:
        """Add one query linked to ``chunk_rows`` (its batch, target first).

        Its id is made from ``first_chunk_id`` (the target's chunk id) and the
        text unless ``digest`` is given (a query read back from disk).
        """
        if digest is None:
            if first_chunk_id is None:
                raise ValueError("give first_chunk_id or digest")
            digest = query_digest(first_chunk_id, text)
        self._digests.append(digest)
        self._texts.append(text)
        self._chunk_rows.extend(int(r) for r in chunk_rows)
        self._chunk_ptr.append(len(self._chunk_rows))
        self._origins.append(_ORIGIN_CODE[origin])

    def texts(self) -> list[str]:
        """The texts added so far, in order."""
        return list(self._texts)

    def build(self, vectors: np.ndarray) -> QueryTable:
        """The table, with the queries' ``vectors`` (row-aligned with the additions)."""
        if len(vectors) != len(self):
            raise ValueError(f"{len(vectors)} vectors for {len(self)} queries")
        return QueryTable(
            digests=np.frombuffer(self._digests, np.uint64).copy(),
            texts=StringTable.concat([self._texts]),
            chunk_ptr=np.frombuffer(self._chunk_ptr, np.int64).copy(),
            chunk_rows=np.frombuffer(self._chunk_rows, np.int64).copy(),
            origins=np.frombuffer(self._origins, np.uint8).copy(),
            vectors=np.asarray(vectors, np.float32),
        )
