"""``CompactPropertyGraphStore``: FG-RAG's default in-memory property graph store.

LlamaIndex's ``SimplePropertyGraphStore`` keeps every entity, relation and
chunk as a live pydantic object. For FG-RAG's graph that is the index's
largest cost by far: an entity's vector is a Python list of 384 floats
(about 12 KB, eight times the float32 bytes), and every description list,
source list and property dict is a tree of Python objects. At 1,000 chunks
the store alone held about 120 MB for 11 MB of vectors (``docs/scaling.md``).

This store is a ``SimplePropertyGraphStore`` to LlamaIndex and to users
(same methods, same persisted JSON, loadable by the stock class), but it holds

- each node and relation as one zlib-compressed pickle of its fields
  (decoded into a fresh object on read), and
- entity vectors apart, as rows of one float32 matrix, which the FG-RAG
  snapshot uses directly instead of copying (see ``entity_matrix``).

Reads decode, so they cost microseconds per object; FG-RAG reads the store
when it (re)builds its snapshot, on inserts and deletions, never per query.
"""

from __future__ import annotations

import json
import pickle
import threading
import zlib
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Any

import fsspec
import numpy as np
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import (
    ChunkNode,
    EntityNode,
    LabelledNode,
    LabelledPropertyGraph,
    Relation,
    Triplet,
)

_ENTITY, _CHUNK, _RELATION, _OTHER = 0, 1, 2, 3


def _pack(obj: Any) -> bytes:
    return zlib.compress(pickle.dumps(obj, protocol=5), 6)


def _unpack(blob: bytes) -> Any:
    return pickle.loads(zlib.decompress(blob))


class EntityVectors:
    """Entity id -> one row of a float32 matrix (grown by whole insert batches).

    Rows of deleted entities stay until :meth:`compact`; ``matrix`` is then a
    view that the snapshot can share without a copy.
    """

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._lock = threading.Lock()

    def put_many(self, items: Sequence[tuple[str, Sequence[float]]]) -> None:
        items = list(dict(items).items())  # one row per id: the last vector given wins
        if not items:
            return
        with self._lock:
            block = np.asarray([v for _, v in items], dtype=np.float32)
            if self._matrix.shape[0] == 0:
                self._matrix = np.zeros((0, block.shape[1]), dtype=np.float32)
            if block.shape[1] != self._matrix.shape[1]:
                raise ValueError(
                    f"entity vectors of dimension {block.shape[1]}, store holds {self._matrix.shape[1]}"
                )
            fresh = [k for k, (key, _) in enumerate(items) if key not in self.rows]
            if len(fresh) < len(items):
                # A snapshot may share the current matrix: write into a copy, so
                # what a running query reads never changes under it.
                matrix = self._matrix.copy()
                for k, (key, _) in enumerate(items):
                    row = self.rows.get(key)
                    if row is not None:
                        matrix[row] = block[k]
                self._matrix = matrix
            if fresh:
                start = self._matrix.shape[0]
                self._matrix = np.concatenate([self._matrix, block[fresh]])
                for offset, k in enumerate(fresh):
                    self.rows[items[k][0]] = start + offset

    def get(self, key: str) -> np.ndarray | None:
        row = self.rows.get(key)
        return None if row is None else self._matrix[row]

    def drop(self, key: str) -> None:
        with self._lock:
            self.rows.pop(key, None)

    def compact(self) -> None:
        """Remove the rows of deleted entities (keeps the order of the others)."""
        with self._lock:
            if len(self.rows) == self._matrix.shape[0]:
                return
            keep = np.asarray(list(self.rows.values()), dtype=np.int64)
            self._matrix = self._matrix[keep] if keep.size else self._matrix[:0]
            self.rows = {key: i for i, key in enumerate(self.rows)}

    def matrix(self, ids: Sequence[str]) -> np.ndarray | None:
        """Rows for ``ids`` in that order: the matrix itself when it already is that."""
        self.compact()
        if len(ids) == len(self.rows) and all(self.rows.get(key) == i for i, key in enumerate(ids)):
            return self._matrix
        rows = [self.rows.get(key) for key in ids]
        if any(r is None for r in rows):
            return None
        return self._matrix[np.asarray(rows, dtype=np.int64)]

    def nbytes(self) -> int:
        return int(self._matrix.nbytes)


class _NodeMap(MutableMapping):
    """``graph.nodes`` of the compact store: id -> node, kept encoded."""

    def __init__(self, vectors: EntityVectors) -> None:
        self._blobs: dict[str, bytes] = {}
        self._vectors = vectors

    def __setitem__(self, key: str, node: LabelledNode) -> None:
        if isinstance(node, EntityNode):
            if node.embedding:
                self._vectors.put_many([(key, node.embedding)])
            fields = node.model_dump(exclude={"embedding"})
            self._blobs[key] = bytes([_ENTITY]) + _pack(fields)
        elif isinstance(node, ChunkNode):
            self._blobs[key] = bytes([_CHUNK]) + _pack(node.model_dump())
        else:  # another LabelledNode subclass: keep the object's own pickle
            self._blobs[key] = bytes([_OTHER]) + _pack(node)

    def put_many(self, nodes: Sequence[LabelledNode]) -> None:
        """Upsert nodes, their vectors in one matrix append."""
        self._vectors.put_many(
            [(n.id, n.embedding) for n in nodes if isinstance(n, EntityNode) and n.embedding]
        )
        for node in nodes:
            if isinstance(node, EntityNode):
                fields = node.model_dump(exclude={"embedding"})
                self._blobs[node.id] = bytes([_ENTITY]) + _pack(fields)
            else:
                self[node.id] = node

    def __getitem__(self, key: str) -> LabelledNode:
        blob = self._blobs[key]
        kind, body = blob[0], _unpack(blob[1:])
        if kind == _ENTITY:
            vector = self._vectors.get(key)
            node = EntityNode.model_validate(body)
            node.embedding = None if vector is None else vector.tolist()
            return node
        if kind == _CHUNK:
            return ChunkNode.model_validate(body)
        return body

    def raw_entities(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(id, fields)`` of every entity, without building pydantic objects."""
        for key, blob in list(self._blobs.items()):
            if blob[0] == _ENTITY:
                yield key, _unpack(blob[1:])

    def raw_chunks(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(id, fields)`` of every chunk node."""
        for key, blob in list(self._blobs.items()):
            if blob[0] == _CHUNK:
                yield key, _unpack(blob[1:])

    def __delitem__(self, key: str) -> None:
        del self._blobs[key]
        self._vectors.drop(key)

    def __contains__(self, key: object) -> bool:
        return key in self._blobs

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._blobs))

    def __len__(self) -> int:
        return len(self._blobs)


class _RelationMap(MutableMapping):
    """``graph.relations`` of the compact store: key -> relation, kept encoded."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    def __setitem__(self, key: str, rel: Relation) -> None:
        self._blobs[key] = _pack(rel.model_dump())

    def __getitem__(self, key: str) -> Relation:
        return Relation.model_validate(_unpack(self._blobs[key]))

    def raw(self) -> Iterator[dict[str, Any]]:
        """Every relation's fields, without building pydantic objects."""
        for blob in list(self._blobs.values()):
            yield _unpack(blob)

    def __delitem__(self, key: str) -> None:
        del self._blobs[key]

    def __contains__(self, key: object) -> bool:
        return key in self._blobs

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._blobs))

    def __len__(self) -> int:
        return len(self._blobs)


class CompactPropertyGraphStore(SimplePropertyGraphStore):
    """A ``SimplePropertyGraphStore`` that keeps its nodes and relations encoded.

    See the module docs. Everything LlamaIndex and FG-RAG call on a
    ``SimplePropertyGraphStore`` works the same; reads return fresh objects,
    so, as with any external store, change a node by upserting it again.

    Args:
        graph: A ``LabelledPropertyGraph`` to start from (copied in).
    """

    def __init__(self, graph: LabelledPropertyGraph | None = None) -> None:
        super().__init__(LabelledPropertyGraph())
        self.vectors = EntityVectors()
        # The pydantic graph's dict fields are swapped for the encoded maps;
        # LabelledPropertyGraph's methods only index, assign and delete them.
        object.__setattr__(self.graph, "nodes", _NodeMap(self.vectors))
        object.__setattr__(self.graph, "relations", _RelationMap())
        if graph is not None:
            self.graph.nodes.put_many(list(graph.nodes.values()))
            for key, rel in graph.relations.items():
                self.graph.relations[key] = rel
            self.graph.triplets = set(graph.triplets)

    # ------------------------------------------------------------ reads

    def get(
        self,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[LabelledNode]:
        """Get nodes (by id without decoding the others)."""
        if ids and not properties:
            nodes = self.graph.nodes
            return [nodes[i] for i in dict.fromkeys(ids) if i in nodes]
        return super().get(properties=properties, ids=ids)

    def get_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        """Get triplets; by entity or id, only the matching ones are decoded."""
        if properties or relation_names or not (entity_names or ids):
            return super().get_triplets(entity_names, relation_names, properties, ids)
        wanted = set(entity_names or []) | set(ids or [])
        graph = self.graph
        out = []
        for subj, rel, obj in graph.triplets:
            if subj in wanted or obj in wanted:
                key = graph._get_relation_key(subj_id=subj, obj_id=obj, rel_id=rel)
                out.append((graph.nodes[subj], graph.relations[key], graph.nodes[obj]))
        return out

    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        """Add nodes (entity vectors appended to the matrix in one go)."""
        self.graph.nodes.put_many(list(nodes))

    def upsert_relations(self, relations: list[Relation]) -> None:
        """Add relations (and bare entities for missing ends), as the stock store does.

        ``LabelledPropertyGraph.add_relation`` reads both end nodes and writes
        them back unchanged; here that would decode and re-encode two entities
        per relation, so the triplet and relation are written directly.
        """
        graph = self.graph
        for rel in relations:
            for end in (rel.source_id, rel.target_id):
                if end not in graph.nodes:
                    graph.nodes[end] = EntityNode(name=end)
            triplet = (rel.source_id, rel.id, rel.target_id)
            if triplet in graph.triplets:
                continue
            graph.triplets.add(triplet)
            graph.relations[graph._get_relation_key(relation=rel)] = rel

    def raw_entities(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(id, fields)`` of every entity node, vectors left out (see ``entity_matrix``)."""
        return self.graph.nodes.raw_entities()

    def raw_chunks(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """``(id, fields)`` of every chunk node."""
        return self.graph.nodes.raw_chunks()

    def raw_relations(self) -> Iterator[dict[str, Any]]:
        """The fields of every relation."""
        return self.graph.relations.raw()

    def entity_matrix(self, ids: Sequence[str]) -> np.ndarray | None:
        """The vectors of ``ids`` in that order (shared, not copied, where possible).

        ``None`` when one of them has no vector.
        """
        return self.vectors.matrix(ids)

    # ------------------------------------------------------------ persistence

    def to_dict(self) -> dict:
        """The plain ``LabelledPropertyGraph`` layout, as the stock store gives it."""
        graph = self.graph
        return {
            "nodes": {key: graph.nodes[key].model_dump() for key in graph.nodes},
            "relations": {key: graph.relations[key].model_dump() for key in graph.relations},
            "triplets": set(graph.triplets),
        }

    def persist(self, persist_path: str, fs: fsspec.AbstractFileSystem | None = None) -> None:
        """Write the same JSON as ``SimplePropertyGraphStore`` (either class loads it)."""
        fs = fs or fsspec.filesystem("file")
        graph = self.graph
        # One node at a time through pydantic's JSON encoder: the same output as
        # the stock store, without decoding the whole graph at once.
        with fs.open(persist_path, "w", encoding="utf-8") as f:
            f.write('{"nodes":{')
            for k, key in enumerate(graph.nodes):
                f.write(("," if k else "") + json.dumps(key) + ":")
                f.write(graph.nodes[key].model_dump_json())
            f.write('},"relations":{')
            for k, key in enumerate(graph.relations):
                f.write(("," if k else "") + json.dumps(key) + ":")
                f.write(graph.relations[key].model_dump_json())
            f.write('},"triplets":')
            f.write(json.dumps([list(t) for t in graph.triplets]))
            f.write("}")


__all__ = ["CompactPropertyGraphStore", "EntityVectors"]
