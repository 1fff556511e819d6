"""FG-RAG's entity graph: merged entities and relations as arrays [P §3.1, Eqs. 1-3].

[`EntityGraph`][llama_index_graphrag_ext.fgrag.graph.EntityGraph] is immutable;
a change builds a new one (:class:`GraphBuilder`) and swaps it in, so readers
never see half a change.

Merging is the paper's Eq. 2: same-name entities (one normalised key) become
one node, same ``(source, label, target)`` relations one relation; the first
occurrence gives the name and label, and descriptions are appended in chunk
order, each text once, up to a cap (the authors keep 50 and write no LLM
summary of them). Records without descriptions (LlamaIndex's path extractors)
get the entity's name, or ``"A LABEL B"``, as their description.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.graph_stores.types import EntityNode, LabelledNode, Relation

from ..core.arrays import StringTable, csr_order
from ..core.embeddings import normalize_rows
from ..core.persist import read_arrays
from .records import BUILT_BY, DESCRIPTIONS, DISPLAY_NAME

logger = logging.getLogger(__name__)

#: Characters of an entity's name + descriptions that are embedded (MiniLM reads ~256 tokens).
EMBED_CHARS = 2000
#: Source id of a description whose chunk is unknown.
NO_SOURCE = -1
GRAPH_FILE = "fgrag_graph.npz"


def entity_text(name: str, descriptions: Sequence[str]) -> str:
    """What is embedded for an entity: its name, then its descriptions.

    The authors embed the descriptions alone; the name makes a short query
    entity ("honey") match its own node first.
    """
    return (f"{name}: " + " ".join(descriptions))[:EMBED_CHARS]


def _rows(lists: Sequence[Sequence[tuple[int, int]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR form of per-record ``(text id, source id)`` lists: ``(ptr, texts, sources)``."""
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(row) for row in lists])
    flat = [pair for row in lists for pair in row]
    pairs = np.asarray(flat, dtype=np.int32).reshape(-1, 2)
    return ptr, np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])


class EntityGraph:
    """Merged entities and relations as arrays over one string table (immutable).

    Attributes:
        strings: Every string of the graph.
        ent_key, ent_display, ent_label: ``(n,)`` string ids per entity.
        ent_built: ``(n,)`` string ids: the extractor that made each entity
            (its first occurrence's ``built_by``: ``llm``, ``cooccurrence``, or "").
        vectors: ``(n, d)`` unit rows, one per entity.
        ent_ptr, ent_text, ent_src: Entity ``i``'s descriptions are
            ``ent_text[ent_ptr[i]:ent_ptr[i+1]]``, from chunks ``ent_src[...]``
            (``NO_SOURCE``: unknown).
        rel_ends: ``(m, 2)`` entity rows of each relation (source, target).
        rel_label: ``(m,)`` string ids.
        rel_ptr, rel_text, rel_src: Each relation's descriptions, as for entities.
    """

    ARRAYS = (
        "ent_key", "ent_display", "ent_label", "ent_built", "vectors", "ent_ptr", "ent_text", "ent_src",
        "rel_ends", "rel_label", "rel_ptr", "rel_text", "rel_src",
    )  # fmt: skip

    def __init__(self, strings: StringTable, **arrays: np.ndarray) -> None:
        self.strings = strings
        for name in self.ARRAYS:
            setattr(self, name, arrays[name])
        self.rel_ends = self.rel_ends.reshape(-1, 2)
        n, m = len(self.ent_key), len(self.rel_label)
        if self.vectors.shape[0] != n or len(self.ent_ptr) != n + 1 or len(self.rel_ptr) != m + 1:
            raise ValueError("EntityGraph: arrays disagree on the numbers of entities/relations")
        # Relations are undirected for expansion: each entity's relations, by relation row.
        rels = np.repeat(np.arange(m, dtype=np.int32), 2)
        self.indptr, order = csr_order(self.rel_ends.reshape(-1), n, rels)
        self.adj_nbr = self.rel_ends[:, ::-1].reshape(-1)[order]
        self.adj_rel = rels[order]
        self._row_of: dict[str, int] | None = None
        self._rel_row_of: dict[tuple[str, str, str], int] | None = None

    @classmethod
    def empty(cls, dim: int = 0) -> EntityGraph:
        """A graph with no entities."""
        ptr = np.zeros(1, dtype=np.int64)
        none = np.zeros(0, dtype=np.int32)
        return cls(
            StringTable(),
            ent_key=none, ent_display=none, ent_label=none, ent_built=none,
            vectors=np.zeros((0, dim), dtype=np.float32),
            ent_ptr=ptr, ent_text=none, ent_src=none,
            rel_ends=np.zeros((0, 2), dtype=np.int32), rel_label=none,
            rel_ptr=ptr, rel_text=none, rel_src=none,
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self.ent_key)

    @property
    def num_relations(self) -> int:
        return len(self.rel_label)

    def name(self, i: int) -> str:
        """Entity ``i``'s key (its node id in a property graph store)."""
        return self.strings[int(self.ent_key[i])]

    def display(self, i: int) -> str:
        """Entity ``i``'s name as written."""
        return self.strings[int(self.ent_display[i])]

    @property
    def names(self) -> list[str]:
        """Every entity key, by row."""
        return [self.strings[int(k)] for k in self.ent_key]

    def row_of(self, key: str) -> int | None:
        """The row of entity ``key`` (``None``: not in the graph)."""
        if self._row_of is None:
            self._row_of = {self.name(i): i for i in range(len(self))}
        return self._row_of.get(key)

    def relation_key(self, r: int) -> tuple[str, str, str]:
        """``(source key, label, target key)`` of relation ``r``."""
        a, b = self.rel_ends[r]
        return self.name(a), self.strings[int(self.rel_label[r])], self.name(b)

    def relation_row(self, source: str, label: str, target: str) -> int | None:
        """The row of a relation (``None``: not in the graph)."""
        if self._rel_row_of is None:
            self._rel_row_of = {self.relation_key(r): r for r in range(self.num_relations)}
        return self._rel_row_of.get((source, label, target))

    def descriptions(self, i: int) -> list[tuple[str, str]]:
        """Entity ``i``'s ``(description, source chunk id)`` pairs ("" when unknown)."""
        return self._pairs(self.ent_ptr, self.ent_text, self.ent_src, i)

    def rel_descriptions(self, r: int) -> list[tuple[str, str]]:
        """Relation ``r``'s ``(description, source chunk id)`` pairs."""
        return self._pairs(self.rel_ptr, self.rel_text, self.rel_src, r)

    def _pairs(self, ptr: np.ndarray, text: np.ndarray, src: np.ndarray, i: int) -> list:
        lo, hi = int(ptr[i]), int(ptr[i + 1])
        s = self.strings
        return [
            (s[t], s[c] if c != NO_SOURCE else "")
            for t, c in zip(text[lo:hi].tolist(), src[lo:hi].tolist(), strict=True)
        ]

    def degree(self, i: int) -> int:
        """Number of relations touching entity ``i``."""
        return int(self.indptr[i + 1] - self.indptr[i])

    def typed_graph(self) -> Any:
        """The graph as a :class:`~..core.graph.TypedGraph` to draw (``graphrag-ext viz``):
        entities by name and type, relations with their label, and each entity linked to
        the chunks its descriptions came from."""
        from ..core.graph import TypedGraph

        graph = TypedGraph({"method": "fgrag"})
        for i in range(len(self)):
            graph.add_node(
                f"entity:{self.name(i)}",
                "entity",
                name=self.display(i),
                type=self.strings[int(self.ent_label[i])],
            )
            for _, chunk in self.descriptions(i):
                if chunk:
                    graph.add_node(chunk, "chunk")
                    graph.add_edge(f"entity:{self.name(i)}", chunk, "described_in")
        for r in range(self.num_relations):
            source, label, target = self.relation_key(r)
            graph.add_edge(f"entity:{source}", f"entity:{target}", "relation", label=label)
        return graph

    def entity_nodes(self, rows: Iterable[int] | None = None) -> list[EntityNode]:
        """Entities as LlamaIndex ``EntityNode`` objects (for property graph stores)."""
        out = []
        for i in range(len(self)) if rows is None else rows:
            pairs = self.descriptions(i)
            node = EntityNode(
                name=self.name(i),
                label=self.strings[int(self.ent_label[i])],
                properties={
                    DISPLAY_NAME: self.display(i),
                    BUILT_BY: self.strings[int(self.ent_built[i])],
                    DESCRIPTIONS: [t for t, _ in pairs],
                    "source_chunks": [c for _, c in pairs],
                },
            )
            node.embedding = self.vectors[i].tolist()
            out.append(node)
        return out

    def relations(self, rows: Iterable[int] | None = None) -> list[Relation]:
        """Relations as LlamaIndex ``Relation`` objects."""
        out = []
        for r in range(self.num_relations) if rows is None else rows:
            source, label, target = self.relation_key(r)
            pairs = self.rel_descriptions(r)
            props = {DESCRIPTIONS: [t for t, _ in pairs], "source_chunks": [c for _, c in pairs]}
            out.append(Relation(label=label, source_id=source, target_id=target, properties=props))
        return out

    def save(self, folder: Path) -> None:
        """Write the arrays and the string table to ``folder / GRAPH_FILE``."""
        blob, ends = self.strings.arrays()
        with open(folder / GRAPH_FILE, "wb") as fh:
            np.savez(
                fh,
                strings=np.frombuffer(blob, dtype=np.uint8),
                string_ends=ends,
                **{a: getattr(self, a) for a in self.ARRAYS},
            )

    @classmethod
    def load(cls, folder: Path) -> EntityGraph:
        """Read what :meth:`save` wrote."""
        data = read_arrays(folder / GRAPH_FILE)
        strings = StringTable.from_arrays(data["strings"].tobytes(), data["string_ends"])
        return cls(strings, **{a: data[a] for a in cls.ARRAYS})


class GraphBuilder:
    """Eq. 2 across chunks and inserts: merge extracted records into a new graph.

    Start from the current graph (or none), :meth:`add` each extracted chunk,
    :meth:`drop_chunks` for deletions, then :meth:`finish`. Only entities whose
    descriptions changed are embedded again.

    Args:
        cap: Most descriptions kept per entity or relation (authors: 50).
    """

    def __init__(self, graph: EntityGraph | None, cap: int) -> None:
        self.cap = int(cap)
        self._old = graph
        # key -> [display, label, texts, sources, old row or None (None: embed), built_by]
        self.entities: dict[str, list[Any]] = {}
        # (source, label, target) -> [texts, sources, changed]
        self.relations: dict[tuple[str, str, str], list[Any]] = {}
        self.chunks = 0
        self.no_entity: list[str] = []
        if graph is not None:
            for i in range(len(graph)):
                pairs = graph.descriptions(i)
                label = graph.strings[int(graph.ent_label[i])]
                texts, srcs = [t for t, _ in pairs], [c for _, c in pairs]
                built = graph.strings[int(graph.ent_built[i])]
                self.entities[graph.name(i)] = [graph.display(i), label, texts, srcs, i, built]
            for r in range(graph.num_relations):
                pairs = graph.rel_descriptions(r)
                self.relations[graph.relation_key(r)] = [
                    [t for t, _ in pairs],
                    [c for _, c in pairs],
                    False,
                ]

    def _append(self, texts: list[str], srcs: list[str], new: Sequence[str], src: str) -> bool:
        changed = False
        for text in new:
            if len(texts) >= self.cap:
                break
            if text and text not in texts:
                texts.append(text)
                srcs.append(src)
                changed = True
        return changed

    def add(
        self, chunk_id: str, kg_nodes: Sequence[LabelledNode], kg_relations: Sequence[Relation]
    ) -> None:
        """Merge one chunk's extracted entities and relations (Eq. 2)."""
        self.chunks += 1
        entities = [n for n in kg_nodes if isinstance(n, EntityNode)]
        if not entities:
            self.no_entity.append(chunk_id)
        for node in entities:
            props = node.properties or {}
            record = self.entities.get(node.id)
            if record is None:
                display = str(props.get(DISPLAY_NAME) or node.name)
                built = str(props.get(BUILT_BY) or "")
                record = self.entities[node.id] = [display, node.label, [], [], None, built]
            descs = [str(d) for d in props.get(DESCRIPTIONS) or [] if d]
            if not descs and not record[2]:
                descs = [record[0]]  # LlamaIndex's extractors write no description
            if self._append(record[2], record[3], descs, chunk_id):
                record[4] = None
        # A relation names its ends by entity name; an entity's node id is that
        # name as LlamaIndex writes ids (a '"' becomes a space), so map names to ids.
        ids = {node.name: node.id for node in entities}
        for rel in kg_relations:
            source = ids.get(rel.source_id, rel.source_id)
            target = ids.get(rel.target_id, rel.target_id)
            key = (source, rel.label, target)
            record = self.relations.get(key)
            if record is None:
                record = self.relations[key] = [[], [], True]
            descs = [str(d) for d in (rel.properties or {}).get(DESCRIPTIONS) or [] if d]
            if not descs and not record[0]:
                descs = [self._triple_text(*key)]
            if self._append(record[0], record[1], descs, chunk_id):
                record[2] = True

    def _triple_text(self, source: str, label: str, target: str) -> str:
        name = {k: self.entities[k][0] for k in (source, target) if k in self.entities}
        return f"{name.get(source, source)} {label} {name.get(target, target)}"

    def drop_chunks(self, chunk_ids: set[str]) -> list[str]:
        """Remove descriptions that came from ``chunk_ids``; return the entity keys emptied."""
        emptied = []
        for key, record in list(self.entities.items()):
            if _drop(record[2], record[3], chunk_ids):
                record[4] = None
                if not record[2]:
                    del self.entities[key]
                    emptied.append(key)
        for key, record in list(self.relations.items()):
            if _drop(record[0], record[1], chunk_ids):
                record[2] = True
                if not record[0]:
                    del self.relations[key]
        return emptied

    def changed_relations(self, graph: EntityGraph) -> list[int]:
        """Rows in ``graph`` (the finished one) of the relations added or changed."""
        rows = (graph.relation_row(*key) for key, rec in self.relations.items() if rec[2])
        return [r for r in rows if r is not None]

    def finish(self, embed: Callable[[list[str]], np.ndarray]) -> tuple[EntityGraph, list[int]]:
        """The merged graph, and the rows whose vectors were (re)computed.

        ``embed``: texts -> ``(k, d)`` vectors (normalised here).
        """
        table: dict[str, int] = {}  # one id per distinct string, in first-use order

        def sid(text: str) -> int:
            return table.setdefault(text, len(table))

        keys = list(self.entities)
        row_of = {k: i for i, k in enumerate(keys)}
        records = list(self.entities.values())
        ent = [
            [(sid(t), sid(c) if c else NO_SOURCE) for t, c in zip(r[2], r[3], strict=True)]
            for r in records
        ]
        ends, labels, rel = [], [], []
        for (source, label, target), (texts, srcs, _) in self.relations.items():
            a, b = row_of.get(source), row_of.get(target)
            if a is None or b is None or a == b:
                continue  # an end the extractor never named as an entity
            ends.append((a, b))
            labels.append(sid(label))
            rel.append(
                [(sid(t), sid(c) if c else NO_SOURCE) for t, c in zip(texts, srcs, strict=True)]
            )
        ent_ptr, ent_text, ent_src = _rows(ent)
        rel_ptr, rel_text, rel_src = _rows(rel)
        fresh = [i for i, r in enumerate(records) if r[4] is None]
        old = self._old
        dim = old.vectors.shape[1] if old is not None and len(old) else 0
        new_vectors = (
            normalize_rows(embed([entity_text(records[i][0], records[i][2]) for i in fresh]))
            if fresh
            else np.zeros((0, dim), dtype=np.float32)
        )
        dim = new_vectors.shape[1] if fresh else dim
        vectors = np.zeros((len(records), dim), dtype=np.float32)
        kept = [(i, r[4]) for i, r in enumerate(records) if r[4] is not None]
        if kept:
            rows, old_rows = (np.asarray(x) for x in zip(*kept, strict=True))
            vectors[rows] = old.vectors[old_rows]
        if fresh:
            vectors[np.asarray(fresh)] = new_vectors
        ent_key = np.asarray([sid(k) for k in keys], dtype=np.int32)
        ent_display = np.asarray([sid(r[0]) for r in records], dtype=np.int32)
        ent_label = np.asarray([sid(r[1]) for r in records], dtype=np.int32)
        ent_built = np.asarray([sid(r[5]) for r in records], dtype=np.int32)
        graph = EntityGraph(
            StringTable(table),
            ent_key=ent_key,
            ent_display=ent_display,
            ent_label=ent_label,
            ent_built=ent_built,
            vectors=vectors,
            ent_ptr=ent_ptr, ent_text=ent_text, ent_src=ent_src,
            rel_ends=np.asarray(ends, dtype=np.int32).reshape(-1, 2),
            rel_label=np.asarray(labels, dtype=np.int32),
            rel_ptr=rel_ptr, rel_text=rel_text, rel_src=rel_src,
        )  # fmt: skip
        return graph, fresh


def _drop(texts: list[str], srcs: list[str], chunk_ids: set[str]) -> bool:
    keep = [k for k, s in enumerate(srcs) if s not in chunk_ids]
    if len(keep) == len(srcs):
        return False
    texts[:] = [texts[k] for k in keep]
    srcs[:] = [srcs[k] for k in keep]
    return True
