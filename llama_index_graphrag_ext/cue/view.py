"""An immutable, array-backed snapshot of the multi-partite graph, for fast retrieval.

Q-Iter (Alg. 3 and 4) needs the unit and entity vectors, the units of each entity
(line 9), the entities of each unit (line 14) and the chunks of each unit (line 22).
The index builds a view after each change; queries read the current one, lock-free.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..core.arrays import csr
from ..core.windows import ChunkWindows

_ENTITY_PREFIX = "entity:"


def entity_id(key: str) -> str:
    """The node id of the entity with this normalised key."""
    return _ENTITY_PREFIX + key


def entity_key(node_id: str) -> str:
    """The normalised key of an entity node id (the inverse of :func:`entity_id`)."""
    return node_id[len(_ENTITY_PREFIX) :]


class Adjacency(Sequence[np.ndarray]):
    """Per row, its neighbour rows as a sorted ``int32`` array (CSR storage: two flat arrays,
    not an object per row). ``adjacency[i]`` is a read-only slice; nothing is copied.

    Attributes:
        offsets: ``(n + 1,)`` int64: row ``i``'s neighbours are
            ``targets[offsets[i]:offsets[i + 1]]``.
        targets: The neighbour rows, grouped by row and sorted within each row.
    """

    __slots__ = ("offsets", "targets")

    def __init__(self, offsets: np.ndarray, targets: np.ndarray) -> None:
        self.offsets = offsets
        self.targets = targets

    @classmethod
    def from_pairs(cls, sources: np.ndarray, targets: np.ndarray, n: int) -> Adjacency:
        """Group ``targets`` by ``sources`` into ``n`` sorted rows."""
        offsets, grouped = csr(sources, np.asarray(targets, dtype=np.int64), n, dtype=np.int32)
        grouped.flags.writeable = False
        return cls(offsets, grouped)

    def __len__(self) -> int:
        return self.offsets.size - 1

    def __getitem__(self, row):  # type: ignore[override]
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        n = len(self)
        if row < 0:
            row += n
        if not 0 <= row < n:
            raise IndexError(f"row {row} out of range for {n} rows")
        return self.targets[self.offsets[row] : self.offsets[row + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        targets, offsets = self.targets, self.offsets.tolist()
        for start, end in zip(offsets, offsets[1:]):  # noqa: B905 - offsets[1:] is shorter
            yield targets[start:end]

    def num_edges(self) -> int:
        """The number of (row, neighbour) pairs."""
        return int(self.targets.size)


@dataclass(frozen=True)
class CueGraphView:
    """Rows and adjacency of the chunk-unit-entity graph.

    Attributes:
        unit_ids: Unit node ids; row ``i`` of ``unit_matrix``.
        unit_texts: Their statements.
        unit_matrix: ``(n_units, d)`` unit-norm unit embeddings.
        entity_ids: Entity node ids; row ``j`` of ``entity_matrix``.
        entity_names: Their surface forms.
        entity_matrix: ``(n_entities, d)`` unit-norm entity embeddings.
        entity_units: Per entity row, the unit rows it is linked to (E_e).
        unit_entities: Per unit row, the entity rows linked to it (E_e).
        unit_chunks: Per unit row, the rows of the chunks containing it (E_c).
        chunk_ids: Chunk ids; row ``c`` of ``chunk_matrix``.
        chunk_matrix: ``(n_chunks, d)`` unit-norm chunk embeddings.
        entity_row: Entity node id to entity row (see :meth:`entity_of`).
        max_entity_words: Longest entity key in words (bounds the query n-grams
            matched against the entity vocabulary).
        chunk_windows: The windows of the chunks longer than the embedder's window.
    """

    unit_ids: Sequence[str]
    unit_texts: Sequence[str]
    unit_matrix: np.ndarray
    entity_ids: Sequence[str]
    entity_names: Sequence[str]
    entity_matrix: np.ndarray
    entity_units: Adjacency
    unit_entities: Adjacency
    unit_chunks: Adjacency
    chunk_ids: Sequence[str]
    chunk_matrix: np.ndarray
    entity_row: dict[str, int] = field(default_factory=dict)
    max_entity_words: int = 0
    chunk_windows: ChunkWindows | None = None

    def entity_of(self, key: str) -> int | None:
        """The row of the entity with this normalised name (``None`` if there is none)."""
        return self.entity_row.get(entity_id(key))


def view_from_pairs(
    *,
    unit_ids: Sequence[str],
    unit_texts: Sequence[str],
    unit_matrix: np.ndarray,
    entity_ids: Sequence[str],
    entity_names: Sequence[str],
    entity_matrix: np.ndarray,
    unit_entity: np.ndarray,
    unit_chunk: np.ndarray,
    chunk_ids: Sequence[str],
    chunk_matrix: np.ndarray,
    chunk_windows: ChunkWindows | None = None,
) -> CueGraphView:
    """Assemble a view from row-aligned sequences and ``(m, 2)`` row-pair arrays.

    Args:
        unit_entity: ``(unit row, entity row)`` pairs (E_e).
        unit_chunk: ``(unit row, chunk row)`` pairs (E_c).
        (the rest): As the :class:`CueGraphView` attributes; entity ids are
            ``entity:<normalised name>`` (:func:`entity_id`).
    """
    n_units, n_entities = len(unit_ids), len(entity_ids)
    unit_entity = np.asarray(unit_entity, dtype=np.int64).reshape(-1, 2)
    unit_chunk = np.asarray(unit_chunk, dtype=np.int64).reshape(-1, 2)
    return CueGraphView(
        unit_ids=unit_ids,
        unit_texts=unit_texts,
        unit_matrix=unit_matrix,
        entity_ids=entity_ids,
        entity_names=entity_names,
        entity_matrix=entity_matrix,
        entity_units=Adjacency.from_pairs(unit_entity[:, 1], unit_entity[:, 0], n_entities),
        unit_entities=Adjacency.from_pairs(unit_entity[:, 0], unit_entity[:, 1], n_units),
        unit_chunks=Adjacency.from_pairs(unit_chunk[:, 0], unit_chunk[:, 1], n_units),
        chunk_ids=chunk_ids,
        chunk_matrix=chunk_matrix,
        entity_row={e: j for j, e in enumerate(entity_ids)},
        max_entity_words=max((e.count(" ") + 1 for e in entity_ids), default=0),
        chunk_windows=chunk_windows,
    )


def build_view(
    unit_ids: list[str],
    unit_texts: list[str],
    unit_matrix: np.ndarray,
    entity_ids: list[str],
    entity_names: list[str],
    entity_matrix: np.ndarray,
    edges_unit_entity: list[tuple[int, int]],
    unit_chunks: list[tuple[str, ...]],
    chunk_ids: list[str],
    chunk_matrix: np.ndarray,
) -> CueGraphView:
    """Assemble a view from row-aligned lists, (unit row, entity row) edges and chunk ids per
    unit (a unit's chunks end up in chunk row order)."""
    chunk_row = {c: i for i, c in enumerate(chunk_ids)}
    unit_chunk = [(u, chunk_row[c]) for u, cids in enumerate(unit_chunks) for c in cids]
    return view_from_pairs(
        unit_ids=unit_ids,
        unit_texts=unit_texts,
        unit_matrix=unit_matrix,
        entity_ids=entity_ids,
        entity_names=entity_names,
        entity_matrix=entity_matrix,
        unit_entity=np.asarray(edges_unit_entity, dtype=np.int64),
        unit_chunk=np.asarray(unit_chunk, dtype=np.int64),
        chunk_ids=chunk_ids,
        chunk_matrix=chunk_matrix,
    )
