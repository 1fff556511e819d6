"""The chunk-unit-entity graph of a :class:`.MultiPartiteIndex` as compact, row-aligned arrays.

Not a :class:`~..core.graph.TypedGraph`: a networkx graph of every unit and entity
costs a large share of the index's memory (``docs/scaling.md``); here an edge is two
int32s, and the :class:`TypedGraph` is made only when asked for. Rows follow the
index's vector tables. A :class:`Layers` is never changed in place: inserts and
deletes make a new one, so a view built from an old one stays consistent.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..core.arrays import StringTable
from ..core.graph import TypedGraph
from .units import KnowledgeUnit, unit_id
from .view import entity_id, entity_key

CHUNK, UNIT, ENTITY = "chunk", "unit", "entity"
HAS_UNIT, MENTIONS = "has_unit", "mentions"
_LLM, _SENTENCE = "llm", "sentence"


def _pairs(rows: Sequence[tuple[int, int]] | np.ndarray) -> np.ndarray:
    """Distinct ``(a, b)`` row pairs as a sorted ``(m, 2)`` int32 array."""
    pairs = np.asarray(rows, dtype=np.int32).reshape(-1, 2)
    return np.unique(pairs, axis=0) if len(pairs) else pairs


@dataclass(frozen=True)
class Layers:
    """Units, entities and both edge kinds, as rows aligned with the vector tables.

    Attributes:
        unit_texts: Per unit row, its statement (packed).
        unit_from_llm: Per unit row, whether the LLM wrote it (else it is a sentence).
        entity_names: Per entity row, the surface form seen first, packed (the normalised
            key is in the entity's id, ``entity:<key>``).
        entity_labels: Per entity row, the spaCy label (or ``TITLE``), interned.
        unit_chunk: ``(m, 2)`` int32 ``(unit row, chunk row)`` pairs (E_c), sorted.
        unit_entity: ``(m, 2)`` int32 ``(unit row, entity row)`` pairs (E_e), sorted.
    """

    unit_texts: StringTable = field(default_factory=StringTable)
    unit_from_llm: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    entity_names: StringTable = field(default_factory=StringTable)
    entity_labels: list[str] = field(default_factory=list)
    unit_chunk: np.ndarray = field(default_factory=lambda: _pairs([]))
    unit_entity: np.ndarray = field(default_factory=lambda: _pairs([]))

    @property
    def num_units(self) -> int:
        return len(self.unit_texts)

    @property
    def num_entities(self) -> int:
        return len(self.entity_names)

    def extended(self, growth: LayerGrowth) -> Layers:
        """These layers plus what one insert found (new rows go last, as in the tables)."""
        return Layers(
            unit_texts=StringTable.concat([self.unit_texts, StringTable(growth.unit_texts)]),
            unit_from_llm=np.concatenate(
                [self.unit_from_llm, np.asarray(growth.unit_from_llm, dtype=bool)]
            ),
            entity_names=StringTable.concat([self.entity_names, StringTable(growth.entity_names)]),
            entity_labels=self.entity_labels + growth.entity_labels,
            unit_chunk=_pairs(np.concatenate([self.unit_chunk, *growth.unit_chunk])),
            unit_entity=_pairs(np.concatenate([self.unit_entity, *growth.unit_entity])),
        )

    def without_chunks(
        self, chunk_rows: Sequence[int], num_chunks: int
    ) -> tuple[Layers, np.ndarray, np.ndarray]:
        """Drop chunks, then the units left without a chunk, then the entities left without a unit.

        Rows of what stays are renumbered in order, as the vector tables do.

        Returns:
            ``(layers, dead unit rows, dead entity rows)``.
        """
        chunk_alive = np.ones(num_chunks, dtype=bool)
        chunk_alive[np.asarray(chunk_rows, dtype=np.int64)] = False
        unit_chunk = self.unit_chunk[chunk_alive[self.unit_chunk[:, 1]]]
        unit_alive = np.zeros(self.num_units, dtype=bool)
        unit_alive[unit_chunk[:, 0]] = True
        unit_entity = self.unit_entity[unit_alive[self.unit_entity[:, 0]]]
        entity_alive = np.zeros(self.num_entities, dtype=bool)
        entity_alive[unit_entity[:, 1]] = True

        def renumber(pairs: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
            new_first, new_second = np.cumsum(first) - 1, np.cumsum(second) - 1
            out = np.column_stack([new_first[pairs[:, 0]], new_second[pairs[:, 1]]])
            return out.astype(np.int32).reshape(-1, 2)

        entities = entity_alive.tolist()
        layers = Layers(
            unit_texts=self.unit_texts.take(np.flatnonzero(unit_alive)),
            unit_from_llm=self.unit_from_llm[unit_alive],
            entity_names=self.entity_names.take(np.flatnonzero(entity_alive)),
            entity_labels=[x for x, keep in zip(self.entity_labels, entities, strict=True) if keep],
            unit_chunk=renumber(unit_chunk, unit_alive, chunk_alive),
            unit_entity=renumber(unit_entity, unit_alive, entity_alive),
        )
        return layers, np.flatnonzero(~unit_alive), np.flatnonzero(~entity_alive)

    # ------------------------------------------------------------ TypedGraph

    def typed_graph(
        self, chunk_ids: Sequence[str], unit_ids: Sequence[str], entity_ids: Sequence[str]
    ) -> TypedGraph:
        """The graph as a :class:`TypedGraph` (``graphrag-ext viz``, persistence): unit nodes
        carry ``text`` and ``source``, entity nodes ``name``, ``key`` and ``label``."""
        graph = TypedGraph()
        graph.add_nodes(chunk_ids, CHUNK)
        sources = [_LLM if llm else _SENTENCE for llm in self.unit_from_llm.tolist()]
        graph.add_nodes(
            unit_ids,
            UNIT,
            [{"text": t, "source": s} for t, s in zip(self.unit_texts, sources, strict=True)],
        )
        graph.add_nodes(
            entity_ids,
            ENTITY,
            [
                {"name": n, "key": entity_key(e), "label": lab}
                for e, n, lab in zip(entity_ids, self.entity_names, self.entity_labels, strict=True)
            ],
        )
        graph.add_edges(
            ((chunk_ids[c], unit_ids[u]) for u, c in self.unit_chunk.tolist()), HAS_UNIT
        )
        graph.add_edges(
            ((unit_ids[u], entity_ids[e]) for u, e in self.unit_entity.tolist()), MENTIONS
        )
        return graph

    @classmethod
    def from_typed_graph(
        cls,
        graph: TypedGraph,
        chunk_ids: Sequence[str],
        unit_ids: Sequence[str],
        entity_ids: Sequence[str],
    ) -> Layers:
        """Read back what :meth:`typed_graph` wrote (a persisted index's ``graph.json.gz``)."""
        chunk_row = {c: i for i, c in enumerate(chunk_ids)}
        entity_row = {e: j for j, e in enumerate(entity_ids)}
        texts, from_llm = [], []
        unit_chunk: list[tuple[int, int]] = []
        unit_entity: list[tuple[int, int]] = []
        for i, uid in enumerate(unit_ids):
            attrs = graph.node_attrs(uid)
            texts.append(attrs["text"])
            from_llm.append(attrs.get("source") == _LLM)
            unit_chunk.extend((i, chunk_row[c]) for c in graph.neighbors(uid, HAS_UNIT))
            unit_entity.extend((i, entity_row[e]) for e in graph.neighbors(uid, MENTIONS))
        names, labels = [], []
        for eid in entity_ids:
            attrs = graph.node_attrs(eid)
            names.append(attrs["name"])
            labels.append(sys.intern(attrs["label"]))
        return cls(
            unit_texts=StringTable(texts),
            unit_from_llm=np.asarray(from_llm, dtype=bool),
            entity_names=StringTable(names),
            entity_labels=labels,
            unit_chunk=_pairs(unit_chunk),
            unit_entity=_pairs(unit_entity),
        )


class LayerGrowth:
    """What one insert adds: new units and entities (in order of first mention) and edges.

    Args:
        unit_row: Row of a unit id already in the index, or ``None``.
        entity_row: Row of an entity id already in the index, or ``None``.
        num_units: Units already in the index (the first new unit's row).
        num_entities: Entities already in the index.
    """

    def __init__(self, unit_row, entity_row, num_units: int, num_entities: int) -> None:
        self._known_unit = unit_row
        self._known_entity = entity_row
        self._first_unit, self._first_entity = num_units, num_entities
        self.unit_rows: dict[str, int] = {}  # new unit id -> row
        self.unit_texts: list[str] = []
        self.unit_from_llm: list[bool] = []
        self.entity_rows: dict[str, int] = {}  # new entity id -> row
        self.entity_names: list[str] = []
        self.entity_labels: list[str] = []
        self.unit_chunk: list[np.ndarray] = []
        self.unit_entity: list[np.ndarray] = []

    def add(self, first_chunk_row: int, units_per_chunk: Sequence[Sequence[KnowledgeUnit]]) -> None:
        """Record the units of consecutive chunks, the first of them at ``first_chunk_row``."""
        unit_chunk: list[int] = []
        unit_entity: list[int] = []
        for offset, units in enumerate(units_per_chunk):
            for unit in units:
                row = self._unit(unit)
                unit_chunk += (row, first_chunk_row + offset)
                for ent in unit.entities:
                    unit_entity += (row, self._entity(ent.key, ent.name, ent.label))
        self.unit_chunk.append(np.asarray(unit_chunk, dtype=np.int32).reshape(-1, 2))
        self.unit_entity.append(np.asarray(unit_entity, dtype=np.int32).reshape(-1, 2))

    def _unit(self, unit: KnowledgeUnit) -> int:
        uid = unit_id(unit.text)
        row = self.unit_rows.get(uid)
        if row is None:
            row = self._known_unit(uid)
        if row is None:
            row = self.unit_rows[uid] = self._first_unit + len(self.unit_texts)
            self.unit_texts.append(unit.text)
            self.unit_from_llm.append(unit.source == _LLM)
        return row

    def _entity(self, key: str, name: str, label: str) -> int:
        eid = entity_id(key)
        row = self.entity_rows.get(eid)
        if row is None:
            row = self._known_entity(eid)
        if row is None:
            row = self.entity_rows[eid] = self._first_entity + len(self.entity_names)
            self.entity_names.append(name)
            self.entity_labels.append(sys.intern(label))
        return row

    def last_batch(self, units_before: int, entities_before: int) -> GrowthBatch:
        """What the last :meth:`add` brought, given the new units and entities counted
        before it: units and entities first met in an earlier batch are old to this one."""
        return GrowthBatch(
            first_unit_row=self._first_unit + units_before,
            unit_texts=self.unit_texts[units_before:],
            unit_chunk=self.unit_chunk[-1:],
            first_entity_row=self._first_entity + entities_before,
            entity_names=self.entity_names[entities_before:],
            unit_entity=self.unit_entity[-1:],
        )


@dataclass(frozen=True)
class GrowthBatch:
    """One batch of a :class:`LayerGrowth`, as :func:`~.vectors.index_vectors` reads it."""

    first_unit_row: int
    unit_texts: list[str]
    unit_chunk: list[np.ndarray]
    first_entity_row: int
    entity_names: list[str]
    unit_entity: list[np.ndarray]
