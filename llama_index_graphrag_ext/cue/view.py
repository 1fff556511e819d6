"""An immutable, array-backed snapshot of the multi-partite graph, for fast retrieval.

Q-Iter (Alg. 3 and 4) only needs: unit and entity vectors, the units of each
entity (line 9), the entities of each unit (line 14) and the chunks of each
unit (line 22). The index builds this view once after each change; retrievers
read whichever view is current, so queries never see a half-applied update and
need no lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
        unit_chunks: Per unit row, the chunk ids containing it (E_c).
        chunk_ids: Chunk ids; row ``c`` of ``chunk_matrix``.
        chunk_matrix: ``(n_chunks, d)`` unit-norm chunk embeddings.
        entity_row: Entity key (normalised name) to entity row.
        chunk_row: Chunk id to chunk row.
        max_entity_words: Longest entity key in words (bounds the query n-grams
            matched against the entity vocabulary).
    """

    unit_ids: list[str]
    unit_texts: list[str]
    unit_matrix: np.ndarray
    entity_ids: list[str]
    entity_names: list[str]
    entity_matrix: np.ndarray
    entity_units: list[np.ndarray]
    unit_entities: list[np.ndarray]
    unit_chunks: list[tuple[str, ...]]
    chunk_ids: list[str]
    chunk_matrix: np.ndarray
    entity_row: dict[str, int] = field(default_factory=dict)
    chunk_row: dict[str, int] = field(default_factory=dict)
    max_entity_words: int = 0


def build_view(
    unit_ids: list[str],
    unit_texts: list[str],
    unit_matrix: np.ndarray,
    entity_ids: list[str],
    entity_names: list[str],
    entity_keys: list[str],
    entity_matrix: np.ndarray,
    edges_unit_entity: list[tuple[int, int]],
    unit_chunks: list[tuple[str, ...]],
    chunk_ids: list[str],
    chunk_matrix: np.ndarray,
) -> CueGraphView:
    """Assemble a view from row-aligned lists and (unit row, entity row) edges."""
    n_units, n_entities = len(unit_ids), len(entity_ids)
    if edges_unit_entity:
        pairs = np.asarray(edges_unit_entity, dtype=np.int64)
    else:
        pairs = np.zeros((0, 2), dtype=np.int64)
    entity_units = _group(pairs[:, 1], pairs[:, 0], n_entities)
    unit_entities = _group(pairs[:, 0], pairs[:, 1], n_units)
    return CueGraphView(
        unit_ids=unit_ids,
        unit_texts=unit_texts,
        unit_matrix=unit_matrix,
        entity_ids=entity_ids,
        entity_names=entity_names,
        entity_matrix=entity_matrix,
        entity_units=entity_units,
        unit_entities=unit_entities,
        unit_chunks=unit_chunks,
        chunk_ids=chunk_ids,
        chunk_matrix=chunk_matrix,
        entity_row={k: j for j, k in enumerate(entity_keys)},
        chunk_row={c: i for i, c in enumerate(chunk_ids)},
        max_entity_words=max((k.count(" ") + 1 for k in entity_keys), default=0),
    )


def _group(keys: np.ndarray, values: np.ndarray, n: int) -> list[np.ndarray]:
    """``values`` grouped by ``keys`` into ``n`` sorted arrays (one sort, no Python scan)."""
    order = np.lexsort((values, keys))
    keys, values = keys[order], values[order]
    bounds = np.searchsorted(keys, np.arange(n + 1))
    return [values[bounds[i] : bounds[i + 1]] for i in range(n)]
