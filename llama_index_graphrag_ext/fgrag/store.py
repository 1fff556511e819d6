"""``CompactPropertyGraphStore``: FG-RAG's default in-memory property graph store.

LlamaIndex's ``SimplePropertyGraphStore`` keeps every entity, relation and
chunk as a live pydantic object, and its graph as dicts keyed by strings: a
node dict, a relation dict keyed ``"source_LABEL_target"`` and a set of
``(source, label, target)`` tuples. For FG-RAG's co-occurrence graph (three
relations per entity, each with a sentence and a chunk id) that was the
index's largest cost by far, several times its vectors.

This store is a ``SimplePropertyGraphStore`` to LlamaIndex and to users: the
same methods with the same results, ``graph.nodes``, ``graph.relations`` and
``graph.triplets`` readable and writable as before, and the same persisted
JSON, loadable by the stock class. Inside, it holds

- entities and relations as rows of integer columns: string ids (into one
  :class:`~.columns.StringTable` holding each distinct string once) and the
  offsets of their properties, written as tokens by a
  :class:`~.columns.PropertyCodec`;
- entity vectors as rows of one float32 matrix (:class:`EntityVectors`),
  which the FG-RAG snapshot shares instead of copying;
- chunk nodes (and any other node type) as one zlib-compressed pickle each,
  or, for the chunks FG-RAG's build writes, as the docstore's own stored
  value of the chunk (the same ``bytes`` object, shared; see
  :meth:`CompactPropertyGraphStore.upsert_docstore_chunks`).

At 4,000 chunks the entities and relations took 66 MB as compressed pickles,
key strings, triplet tuples and dict entries; as columns they take about
5 MB. Reads decode, so they cost microseconds per object; FG-RAG reads the
store when it (re)builds its snapshot, on inserts and deletions, never per
query. A relation and its triplet are one record here: adding a triplet
without a relation gives a relation with no properties, and removing either
removes both (the stock store can hold one without the other).
"""

from __future__ import annotations

import json
import pickle
import threading
import zlib
from collections.abc import Iterator, MutableMapping, MutableSet, Sequence
from dataclasses import dataclass
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
from llama_index.core.schema import MetadataMode
from llama_index.core.storage.docstore.utils import json_to_doc
from llama_index.core.vector_stores.utils import node_to_metadata_dict

from ..core.compact_store import blank_chunk_node, decode_value
from .columns import Growable, IntIndex, PropertyCodec, StringTable, ragged_gather

_CHUNK, _OTHER = 0, 1


def _chunk_dictionary() -> bytes:
    """zlib preset dictionary of chunk records: the pickle of a blank chunk node.

    A chunk record is short (a passage) next to its boilerplate (field names,
    the LlamaIndex node JSON in its properties); zlib given that boilerplate
    up front stores a benchmark passage's record in 478 bytes instead of 757.
    Built from LlamaIndex's own serialisation, so it follows the installed
    release; it lives in memory only (the persisted layout is plain JSON).
    """
    node = blank_chunk_node()
    chunk = ChunkNode(text="", id_="", properties=node_to_metadata_dict(node, remove_text=True))
    return pickle.dumps(chunk.model_dump(), protocol=5)


_CHUNK_ZDICT = _chunk_dictionary()


def _pack(obj: Any) -> bytes:
    return zlib.compress(pickle.dumps(obj, protocol=5), 6)


def _unpack(blob: bytes) -> Any:
    return pickle.loads(zlib.decompress(blob))


def _pack_chunk(fields: dict[str, Any]) -> bytes:
    packer = zlib.compressobj(6, zdict=_CHUNK_ZDICT)
    return packer.compress(pickle.dumps(fields, protocol=5)) + packer.flush()


# A chunk (or other non-entity) node is one bytes record: its kind, the
# number that orders it among all nodes, then its compressed pickle. The
# order number inside the record, not as a Python int in a dict: those ints,
# made while the build's temporaries were alive, kept their pages resident.
_HEAD = 9


def _record(kind: int, seq: int, body: bytes) -> bytes:
    return bytes([kind]) + seq.to_bytes(8, "little") + body


def _seq_of(record: bytes) -> int:
    return int.from_bytes(record[1:_HEAD], "little")


def decode_chunk(record: bytes) -> dict[str, Any]:
    """The fields of a stored chunk record (``ChunkNode.model_dump()``)."""
    unpacker = zlib.decompressobj(zdict=_CHUNK_ZDICT)
    return pickle.loads(unpacker.decompress(record[_HEAD:]) + unpacker.flush())


def chunk_of_docstore_value(value: bytes) -> ChunkNode:
    """The chunk node of a docstore value, exactly as ``upsert_llama_nodes`` makes it.

    ``value`` is what a ``CompactKVStore`` holds for a node
    (:func:`~llama_index_graphrag_ext.core.compact_store.encode_value` of its
    ``doc_to_json``); the node read back from it is the one the docstore's
    ``get_document`` returns.
    """
    node = json_to_doc(decode_value(value))
    return ChunkNode(
        text=node.get_content(metadata_mode=MetadataMode.NONE),
        id_=node.id_,
        properties=node_to_metadata_dict(node, remove_text=True),
        embedding=node.embedding,
    )


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, exactly as FG-RAG's snapshot scales them.

    ``embed_texts`` returns unit rows already, but dividing again moves the
    last bit of some entries, and with near-tied scores that changes
    rankings; every path that makes snapshot rows goes through this one
    function so they are the same bits.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.size == 0:
        return vectors
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def _pair_key(source: int, target: int) -> int:
    """32-bit hash of a relation's (source, target) string ids (see ``IntIndex``)."""
    return ((int(source) * 0x9E3779B1) ^ int(target)) & 0xFFFFFFFF


def _pair_keys(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """``_pair_key`` of many pairs (the low 32 bits agree despite uint64 wrap-around)."""
    mixed = (source.astype(np.uint64) * np.uint64(0x9E3779B1)) ^ target.astype(np.uint64)
    return (mixed & np.uint64(0xFFFFFFFF)).astype(np.uint32)


class EntityVectors:
    """Entity vectors: row ``r`` of one float32 matrix belongs to entity row ``r``.

    Each row also records whether the entity has a vector and whether the
    row is already a *unit row* (scaled by :func:`unit_rows`, as the FG-RAG
    snapshot uses it). Vectors given through LlamaIndex's API
    (``EntityNode.embedding``) are kept as given; FG-RAG writes unit rows, and
    the snapshot scales the other rows in place once, so that it can share
    this matrix instead of holding a scaled copy (which, at 4,000 chunks, was
    a second 36 MB matrix).

    A matrix handed to a snapshot is never written again: a later change to
    one of its rows goes to a copy.
    """

    def __init__(self) -> None:
        self._rows: Growable | None = None
        self.has = Growable(np.bool_)
        self.unit = Growable(np.bool_)
        self._shared_upto = 0
        self._reserved = 0  # rows to make room for when the matrix is made

    def __len__(self) -> int:
        return len(self.has)

    @property
    def dim(self) -> int | None:
        """The vectors' dimension (``None`` before the first one)."""
        return None if self._rows is None else int(self._rows.view.shape[1])

    def grow(self, count: int) -> None:
        """Add ``count`` rows without vectors."""
        self.has.extend(np.zeros(count, dtype=np.bool_))
        self.unit.extend(np.zeros(count, dtype=np.bool_))
        if self._rows is not None:
            self._rows.extend(np.zeros((count, self._rows.view.shape[1]), dtype=np.float32))

    def reserve(self, count: int) -> None:
        """Make room for ``count`` more rows (an exact size for a bulk load)."""
        self.has.reserve(count)
        self.unit.reserve(count)
        if self._rows is not None:
            self._rows.reserve(count)
        else:
            self._reserved = max(self._reserved, len(self) + count)

    def _writable(self, rows: np.ndarray, dim: int) -> Growable:
        if self._rows is None:
            self._rows = Growable(np.float32, (dim,))
            self._rows.reserve(max(len(self), self._reserved))
            self._rows.extend(np.zeros((len(self.has), dim), dtype=np.float32))
        if self._rows.view.shape[1] != dim:
            raise ValueError(
                f"entity vectors of dimension {dim}, store holds {self._rows.view.shape[1]}"
            )
        if rows.size and int(rows.min()) < self._shared_upto:
            self._rows.replace(self._rows.view)  # a snapshot reads the old rows
            self._shared_upto = 0
        return self._rows

    def set_rows(self, rows: Sequence[int], vectors: Any, *, unit: bool) -> None:
        """Write ``vectors`` (one per row) into ``rows``."""
        rows = np.asarray(rows, dtype=np.int64)
        if not rows.size:
            return
        vectors = np.asarray(vectors, dtype=np.float32).reshape(rows.size, -1)
        matrix = self._writable(rows, vectors.shape[1])
        matrix[rows] = vectors
        self.has[rows] = True
        self.unit[rows] = unit

    def clear(self, row: int) -> None:
        """Forget row ``row``'s vector."""
        self.has[row] = False
        self.unit[row] = False

    def get(self, row: int) -> np.ndarray | None:
        """Row ``row``'s vector (``None`` without one)."""
        if self._rows is None or not self.has[row]:
            return None
        return self._rows[row]

    def scale_to_unit(self, rows: np.ndarray | None = None) -> None:
        """Make the given rows (default: all with vectors) unit rows, in place."""
        todo = np.nonzero(self.has.view & ~self.unit.view)[0]
        if rows is not None:
            todo = np.intersect1d(todo, rows)
        if todo.size:
            self.set_rows(todo, unit_rows(self._rows.view[todo]), unit=True)

    def mark_unit(self) -> None:
        """Record that every stored vector is a unit row already (a persisted FG-RAG store)."""
        self.unit[:] = self.has.view

    def all_unit(self) -> bool:
        """Whether every row with a vector is a unit row."""
        return bool(np.all(self.unit.view[self.has.view]))

    def shared(self) -> np.ndarray:
        """The whole matrix as a read-only view; later writes to its rows copy first."""
        if self._rows is None:
            return np.zeros((len(self), 0), dtype=np.float32)
        self._shared_upto = len(self)
        view = self._rows.view
        view.flags.writeable = False
        return view

    def take(self, keep: np.ndarray) -> None:
        """Keep only the rows ``keep`` (in that order), in fresh arrays."""
        if self._rows is not None:
            self._rows.replace(self._rows.view[keep])
        self.has.replace(self.has.view[keep])
        self.unit.replace(self.unit.view[keep])
        self._shared_upto = 0

    def nbytes(self) -> int:
        return 0 if self._rows is None else int(self._rows.view.nbytes)


class _Records:
    """Columns shared by the entity and relation tables: properties as token spans."""

    def __init__(self) -> None:
        self.pstart = Growable(np.int32)  # where the record's tokens start (see _encode)
        self.alive = Growable(np.bool_)
        self.dead = 0

    def __len__(self) -> int:
        return len(self.alive)


class _RowsByKey:
    """A ``row_of_sid`` column: the live row whose key is string id ``sid`` (-1: none)."""

    row_of_sid: Growable

    def row_of(self, sid: int) -> int:
        return int(self.row_of_sid[sid]) if 0 <= sid < len(self.row_of_sid) else -1

    def set_row_of(self, sid: int, row: int) -> None:
        if sid >= len(self.row_of_sid):
            self.row_of_sid.extend(np.full(sid + 1 - len(self.row_of_sid), -1, dtype=np.int32))
        self.row_of_sid[sid] = row


class _Entities(_Records, _RowsByKey):
    def __init__(self) -> None:
        super().__init__()
        self.key = Growable(np.int32)
        self.name = Growable(np.int32)
        self.label = Growable(np.int32)
        self.seq = Growable(np.int64)
        self.row_of_sid = Growable(np.int32)  # string id of a key -> live entity row


class _SharedChunks(_RowsByKey):
    """Chunk nodes held as docstore values: ``values[row]`` is the docstore's own ``bytes``.

    Row ``r``'s key is string ``key[r]``; ``seq[r]`` orders it among all
    nodes; a removed row's value is ``None``.
    """

    def __init__(self) -> None:
        self.key = Growable(np.int32)
        self.seq = Growable(np.int64)
        self.values: list[bytes | None] = []
        self.row_of_sid = Growable(np.int32)  # string id of a key -> live row
        self.dead = 0

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class ChunkRecords:
    """The store's chunk records as a snapshot reads them (a frozen copy of the row lists).

    ``own``: key -> the store's own record of the chunk (see ``_record``);
    ``shared_values[i]``: the docstore value of the chunk whose key is string
    ``shared_key[i]``; ``shared_row_of_sid``: string id -> ``i`` (-1).
    """

    own: dict[str, bytes]
    strings: StringTable
    shared_key: np.ndarray
    shared_values: list[bytes]
    shared_row_of_sid: np.ndarray


class _Relations(_Records):
    def __init__(self) -> None:
        super().__init__()
        self.source = Growable(np.int32)
        self.label = Growable(np.int32)
        self.target = Growable(np.int32)
        self.pairs = IntIndex()  # (source id, target id) -> rows


@dataclass
class GraphColumns:
    """What a snapshot reads from the store: live rows, in store order.

    Entity and relation arrays hold string ids (``strings``) and token spans
    (``tokens``, decoded by ``codec``). ``row_of_sid`` maps a string id to the
    entity row whose key it is (-1); ``vector_has`` says which entities have a
    vector (the matrix itself comes from :meth:`CompactPropertyGraphStore.entity_matrix`).
    """

    strings: StringTable
    codec: PropertyCodec
    tokens: np.ndarray
    entity_key: np.ndarray
    entity_name: np.ndarray
    entity_pstart: np.ndarray
    row_of_sid: np.ndarray
    vector_has: np.ndarray
    relation_source: np.ndarray
    relation_label: np.ndarray
    relation_target: np.ndarray
    relation_pstart: np.ndarray
    chunks: ChunkRecords


class _NodeView(MutableMapping):
    """``graph.nodes`` of the compact store: id -> node, decoded on read."""

    def __init__(self, store: CompactPropertyGraphStore) -> None:
        self._store = store

    def __getitem__(self, key: str) -> LabelledNode:
        return self._store._get_node(key)

    def __setitem__(self, key: str, node: LabelledNode) -> None:
        self._store._put_node(key, node)

    def __delitem__(self, key: str) -> None:
        self._store._delete_node(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._store._has_node(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._store._node_keys())

    def __len__(self) -> int:
        return self._store._node_count()


class _RelationView(MutableMapping):
    """``graph.relations``: ``"source_LABEL_target"`` -> relation, decoded on read."""

    def __init__(self, store: CompactPropertyGraphStore) -> None:
        self._store = store

    def __getitem__(self, key: str) -> Relation:
        row = self._store._relation_row_by_key(key)
        if row < 0:
            raise KeyError(key)
        return self._store._get_relation(row)

    def __setitem__(self, key: str, rel: Relation) -> None:
        self._store._put_relation(rel, replace=True)

    def __delitem__(self, key: str) -> None:
        row = self._store._relation_row_by_key(key)
        if row < 0:
            raise KeyError(key)
        self._store._delete_relation(row)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._store._relation_row_by_key(key) >= 0

    def __iter__(self) -> Iterator[str]:
        store = self._store
        return iter([f"{s}_{label}_{t}" for s, label, t in store._relation_triples()])

    def __len__(self) -> int:
        rel = self._store._rel
        return len(rel) - rel.dead


class _TripletView(MutableSet):
    """``graph.triplets``: the ``(source, label, target)`` of every relation."""

    def __init__(self, store: CompactPropertyGraphStore) -> None:
        self._store = store

    def __contains__(self, triplet: object) -> bool:
        return self._store._relation_row(triplet) >= 0

    def add(self, triplet: tuple[str, str, str]) -> None:
        if self._store._relation_row(triplet) < 0:
            source, label, target = triplet
            self._store._put_relation(
                Relation(label=label, source_id=source, target_id=target), replace=False
            )

    def discard(self, triplet: tuple[str, str, str]) -> None:
        row = self._store._relation_row(triplet)
        if row >= 0:
            self._store._delete_relation(row)

    def __iter__(self) -> Iterator[tuple[str, str, str]]:
        return iter(self._store._relation_triples())

    def __len__(self) -> int:
        rel = self._store._rel
        return len(rel) - rel.dead


class CompactPropertyGraphStore(SimplePropertyGraphStore):
    """A ``SimplePropertyGraphStore`` that keeps its graph as integer columns.

    See the module docs. Everything LlamaIndex and FG-RAG call on a
    ``SimplePropertyGraphStore`` works the same; reads return fresh objects,
    so, as with any external store, change a node by upserting it again.

    Args:
        graph: A ``LabelledPropertyGraph`` to start from (copied in).
    """

    def __init__(self, graph: LabelledPropertyGraph | None = None) -> None:
        super().__init__(LabelledPropertyGraph())
        self._lock = threading.RLock()
        self.strings = StringTable()
        self.codec = PropertyCodec(self.strings)
        self.vectors = EntityVectors()
        self._tokens = Growable(np.int32)
        self._garbage = 0  # tokens of replaced or deleted records
        self._ent = _Entities()
        self._rel = _Relations()
        self._blobs: dict[str, bytes] = {}  # chunk and other nodes (see _record)
        self._shared = _SharedChunks()  # chunks held as docstore values
        self._next_seq = 0
        # The pydantic graph's containers are swapped for views of the columns;
        # LabelledPropertyGraph's methods only index, assign, test and delete them.
        object.__setattr__(self.graph, "nodes", _NodeView(self))
        object.__setattr__(self.graph, "relations", _RelationView(self))
        object.__setattr__(self.graph, "triplets", _TripletView(self))
        if graph is not None:
            for key, node in graph.nodes.items():
                self._put_node(key, node)
            for rel in graph.relations.values():
                self._put_relation(rel, replace=True)
            for triplet in graph.triplets:
                self.graph.triplets.add(triplet)

    # ------------------------------------------------------------ encoding

    def _encode(self, props: dict[str, Any]) -> int:
        """Append the tokens of ``props``; return where they start."""
        tokens: list[int] = []
        self.codec.encode(props, tokens)
        if len(self._tokens) + len(tokens) >= 2**31:
            # int32 offsets: 8 GB of tokens, far beyond an in-memory store.
            raise OverflowError("CompactPropertyGraphStore: over 2**31 property tokens")
        return self._tokens.extend(tokens)

    def _length(self, start: int) -> int:
        return int(self.codec.lengths(self._tokens.view, np.asarray([start]))[0])

    def _decode(self, start: int) -> dict[str, Any]:
        tokens = self._tokens.view[start : start + self._length(start)].tolist()
        return self.codec.decode(tokens)[0]

    def _take_seq(self) -> int:
        self._next_seq += 1
        return self._next_seq

    # ------------------------------------------------------------ nodes

    def _entity_row(self, key: str) -> int:
        sid = self.strings.find(key)
        return self._ent.row_of(sid) if sid >= 0 else -1

    def _put_node(self, key: str, node: LabelledNode) -> None:
        with self._lock:
            if type(node) is EntityNode:
                seq = self._take_record(key)
                row = self._put_entity(key, node.name, node.label, node.properties, seq)
                if node.embedding:
                    self.vectors.set_rows([row], [node.embedding], unit=False)
                else:
                    self.vectors.clear(row)
                return
            row = self._entity_row(key)
            old = self._blobs.get(key)  # replaced in place: the dict keeps its order
            seq = None if old is None else _seq_of(old)
            shared = self._shared_row(key)
            if shared >= 0:
                seq = self._kill_shared(shared)
            if row >= 0:
                seq = int(self._ent.seq[row])
                self._kill_entity(row)
            seq = seq if seq is not None else self._take_seq()
            if type(node) is ChunkNode:
                self._blobs[key] = _record(_CHUNK, seq, _pack_chunk(node.model_dump()))
            else:  # another LabelledNode subclass: keep the object's own pickle
                self._blobs[key] = _record(_OTHER, seq, _pack(node))

    def _shared_row(self, key: str) -> int:
        sid = self.strings.find(key)
        return self._shared.row_of(sid) if sid >= 0 else -1

    def _take_record(self, key: str) -> int | None:
        """Remove the chunk or other node record under ``key``; return its order number."""
        old = self._blobs.pop(key, None)
        if old is not None:
            return _seq_of(old)
        row = self._shared_row(key)
        return None if row < 0 else self._kill_shared(row)

    def _kill_shared(self, row: int) -> int:
        shared = self._shared
        shared.values[row] = None
        shared.set_row_of(int(shared.key[row]), -1)
        shared.dead += 1
        return int(shared.seq[row])

    def _put_entity(
        self, key: str, name: str, label: str, props: dict[str, Any], seq: int | None = None
    ) -> int:
        """Write one entity's fields (its vector apart); return its row."""
        ent, intern = self._ent, self.strings.intern
        sid = intern(key)
        row = ent.row_of(sid)
        start = self._encode(props)
        name_sid = sid if name == key else intern(name)
        label_sid = intern(label)
        if row >= 0:
            self._garbage += self._length(int(ent.pstart[row]))
            ent.name[row], ent.label[row] = name_sid, label_sid
            ent.pstart[row] = start
            return row
        row = ent.key.append(sid)
        ent.name.append(name_sid)
        ent.label.append(label_sid)
        ent.pstart.append(start)
        ent.alive.append(True)
        ent.seq.append(seq if seq is not None else self._take_seq())
        ent.set_row_of(sid, row)
        self.vectors.grow(1)
        return row

    def _kill_entity(self, row: int) -> None:
        ent = self._ent
        ent.alive[row] = False
        ent.set_row_of(int(ent.key[row]), -1)
        ent.dead += 1
        self._garbage += self._length(int(ent.pstart[row]))
        self.vectors.clear(row)

    def _get_entity(self, row: int) -> EntityNode:
        ent, strings = self._ent, self.strings
        node = EntityNode(
            name=strings[int(ent.name[row])],
            label=strings[int(ent.label[row])],
            properties=self._decode(int(ent.pstart[row])),
        )
        vector = self.vectors.get(row)
        if vector is not None:
            node.embedding = vector.tolist()
        return node

    def _get_node(self, key: str) -> LabelledNode:
        with self._lock:
            blob = self._blobs.get(key)
            if blob is not None:
                if blob[0] == _CHUNK:
                    return ChunkNode.model_validate(decode_chunk(blob))
                return _unpack(blob[_HEAD:])
            shared = self._shared_row(key)
            if shared >= 0:
                return chunk_of_docstore_value(self._shared.values[shared])
            row = self._entity_row(key)
            if row < 0:
                raise KeyError(key)
            return self._get_entity(row)

    def _delete_node(self, key: str) -> None:
        with self._lock:
            if self._take_record(key) is not None:
                return
            row = self._entity_row(key)
            if row < 0:
                raise KeyError(key)
            self._kill_entity(row)

    def _has_node(self, key: str) -> bool:
        if key in self._blobs:
            return True
        sid = self.strings.find(key)
        return sid >= 0 and (self._ent.row_of(sid) >= 0 or self._shared.row_of(sid) >= 0)

    def _node_keys(self) -> list[str]:
        """Every node id, in the order the nodes were first added (as a dict keeps them)."""
        with self._lock:
            ent, shared, strings = self._ent, self._shared, self.strings
            rows = np.nonzero(ent.alive.view)[0]
            shared_rows = self._live_shared_rows()
            seqs = np.concatenate(
                [
                    ent.seq.view[rows],
                    shared.seq.view[shared_rows],
                    np.fromiter(map(_seq_of, self._blobs.values()), dtype=np.int64),
                ]
            )
            sids = np.concatenate([ent.key.view[rows], shared.key.view[shared_rows]])
            blob_keys = list(self._blobs)
            out = []
            for k in np.argsort(seqs, kind="stable").tolist():
                out.append(strings[int(sids[k])] if k < sids.size else blob_keys[k - sids.size])
            return out

    def _live_shared_rows(self) -> np.ndarray:
        values = self._shared.values
        alive = np.fromiter((v is not None for v in values), dtype=np.bool_, count=len(values))
        return np.nonzero(alive)[0]

    def _node_count(self) -> int:
        shared = len(self._shared) - self._shared.dead
        return len(self._blobs) + shared + len(self._ent) - self._ent.dead

    # ------------------------------------------------------------ relations

    def _relation_row_ids(self, source: int, label: int, target: int) -> int:
        rel = self._rel
        for row in rel.pairs.get(_pair_key(source, target)):
            if (
                rel.alive[row]
                and rel.label[row] == label
                and rel.source[row] == source
                and rel.target[row] == target
            ):
                return row
        return -1

    def _relation_row(self, triplet: Any) -> int:
        try:
            source, label, target = triplet
        except (TypeError, ValueError):
            return -1
        with self._lock:
            sids = [self.strings.find(s) if isinstance(s, str) else -1 for s in triplet]
            if min(sids) < 0:
                return -1
            return self._relation_row_ids(*sids)

    def _relation_row_by_key(self, key: str) -> int:
        """The live relation whose ``"source_LABEL_target"`` key is ``key`` (-1)."""
        with self._lock:
            rel = self._rel
            labels = np.unique(rel.label.view[rel.alive.view]).tolist()
            for label in (self.strings[i] for i in labels):
                mid = f"_{label}_"
                at = key.find(mid)
                while at >= 0:
                    row = self._relation_row((key[:at], label, key[at + len(mid) :]))
                    if row >= 0:
                        return row
                    at = key.find(mid, at + 1)
            return -1

    def _put_relation(self, rel: Relation, *, replace: bool) -> int:
        with self._lock:
            intern, table = self.strings.intern, self._rel
            source, label, target = intern(rel.source_id), intern(rel.label), intern(rel.target_id)
            row = self._relation_row_ids(source, label, target)
            if row >= 0 and not replace:
                return row
            start = self._encode(rel.properties)
            if row >= 0:
                self._garbage += self._length(int(table.pstart[row]))
                table.pstart[row] = start
                return row
            row = table.source.append(source)
            table.label.append(label)
            table.target.append(target)
            table.pstart.append(start)
            table.alive.append(True)
            table.pairs.add(_pair_key(source, target), row)
            return row

    def _delete_relation(self, row: int) -> None:
        with self._lock:
            table = self._rel
            if table.alive[row]:
                table.alive[row] = False
                table.dead += 1
                self._garbage += self._length(int(table.pstart[row]))

    def _get_relation(self, row: int) -> Relation:
        table, strings = self._rel, self.strings
        return Relation(
            label=strings[int(table.label[row])],
            source_id=strings[int(table.source[row])],
            target_id=strings[int(table.target[row])],
            properties=self._decode(int(table.pstart[row])),
        )

    def _live_relation_rows(self) -> np.ndarray:
        return np.nonzero(self._rel.alive.view)[0]

    def _relation_triples(self) -> list[tuple[str, str, str]]:
        with self._lock:
            table, strings = self._rel, self.strings
            rows = self._live_relation_rows()
            return [
                (strings[int(s)], strings[int(label)], strings[int(t)])
                for s, label, t in zip(
                    table.source.view[rows].tolist(),
                    table.label.view[rows].tolist(),
                    table.target.view[rows].tolist(),
                    strict=True,
                )
            ]

    # ------------------------------------------------------------ store API

    def get(
        self,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[LabelledNode]:
        """Get nodes (by id without decoding the others), in store order."""
        if ids and not properties:
            with self._lock:
                found = []  # (insertion order, key)
                for key in dict.fromkeys(ids):
                    blob = self._blobs.get(key)
                    seq = None if blob is None else _seq_of(blob)
                    if seq is None:
                        row = self._shared_row(key)
                        seq = None if row < 0 else int(self._shared.seq[row])
                    if seq is None:
                        row = self._entity_row(key)
                        seq = None if row < 0 else int(self._ent.seq[row])
                    if seq is not None:
                        found.append((seq, key))
                return [self._get_node(key) for _, key in sorted(found)]
        return super().get(properties=properties, ids=ids)

    def get_triplets(
        self,
        entity_names: list[str] | None = None,
        relation_names: list[str] | None = None,
        properties: dict | None = None,
        ids: list[str] | None = None,
    ) -> list[Triplet]:
        """Get triplets; by entity or id, only the matching relations are decoded."""
        if not ids and not properties and not entity_names and not relation_names:
            return []
        with self._lock:
            table = self._rel
            rows = self._live_relation_rows()
            wanted = [*(entity_names or []), *(ids or [])]
            if wanted:
                sids = self.strings.find_many(wanted)
                sids = sids[sids >= 0]
                touch = np.isin(table.source.view[rows], sids) | np.isin(
                    table.target.view[rows], sids
                )
                rows = rows[touch]
            nodes = self.graph.nodes
            triplets = []
            for row in rows.tolist():
                rel = self._get_relation(row)
                triplets.append((nodes[rel.source_id], rel, nodes[rel.target_id]))
        # The stock store's filters, on what is left.
        if entity_names:
            triplets = [t for t in triplets if t[0].id in entity_names or t[2].id in entity_names]
        if relation_names:
            triplets = [t for t in triplets if t[1].id in relation_names]
        if properties:
            triplets = [
                t
                for t in triplets
                if any(
                    t[0].properties.get(k) == v
                    or t[1].properties.get(k) == v
                    or t[2].properties.get(k) == v
                    for k, v in properties.items()
                )
            ]
        if ids:
            triplets = [t for t in triplets if any(t[0].id == i or t[2].id == i for i in ids)]
        return triplets

    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        """Add or replace nodes."""
        with self._lock:
            for node in nodes:
                self._put_node(node.id, node)

    def upsert_relations(self, relations: list[Relation]) -> None:
        """Add relations (and bare entities for missing ends), as the stock store does.

        As there, a relation whose triplet is already stored is left as it is.
        """
        with self._lock:
            for rel in relations:
                for end in (rel.source_id, rel.target_id):
                    if not self._has_node(end):
                        self._put_node(end, EntityNode(name=end))
                self._put_relation(rel, replace=False)

    # ------------------------------------------------------------ bulk paths (FG-RAG)

    def upsert_entity_records(
        self, records: Sequence[tuple[str, str, str, dict[str, Any]]]
    ) -> np.ndarray:
        """Add or replace entities given as ``(key, name, label, properties)``, no pydantic.

        What ``upsert_nodes`` does for ``EntityNode(name, label, properties)``
        under ``key``, without building the nodes. Their vectors are cleared
        (as a node without ``embedding`` would have it); write them with
        :meth:`put_unit_vectors`. Returns the rows.
        """
        with self._lock:
            self.vectors.reserve(len(records))
            rows = np.empty(len(records), dtype=np.int64)
            for k, (key, name, label, props) in enumerate(records):
                seq = self._take_record(key)
                rows[k] = row = self._put_entity(key, name, label, props, seq)
                self.vectors.clear(row)
            self._settle()
            return rows

    def upsert_docstore_chunks(self, keys: Sequence[str], values: Sequence[bytes]) -> None:
        """Add or replace chunk nodes given as their docstore values (kept, not copied).

        ``values[i]`` is what a ``CompactKVStore`` docstore holds for the node
        with id ``keys[i]``; the chunk node read back is the one
        ``upsert_llama_nodes`` makes from that node (:func:`chunk_of_docstore_value`).
        The ``bytes`` objects are immutable, so sharing them is safe whatever
        the docstore does later. Kept as a separate copy, the chunk records
        were a second compressed copy of every chunk's text and node JSON:
        about 470 bytes a chunk, the largest per-chunk cost of the graph store.
        """
        with self._lock:
            shared, ent = self._shared, self._ent
            sids = self.strings.intern_many(keys).tolist()
            for key, sid, value in zip(keys, sids, values, strict=True):
                seq = self._take_record(key)
                row = ent.row_of(sid)
                if row >= 0:  # a chunk replaces an entity under its key (as _put_node does)
                    seq = int(ent.seq[row])
                    self._kill_entity(row)
                row = len(shared.values)
                shared.values.append(value)
                shared.key.append(sid)
                shared.seq.append(seq if seq is not None else self._take_seq())
                shared.set_row_of(sid, row)
            self._settle()

    def put_unit_vectors(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Write entity vectors that are unit rows already (see :class:`EntityVectors`)."""
        with self._lock:
            rows = [self._entity_row(key) for key in keys]
            if any(r < 0 for r in rows):
                raise KeyError("put_unit_vectors: not every key is a stored entity")
            self.vectors.set_rows(rows, vectors, unit=True)

    def upsert_relation_records(
        self, records: Sequence[tuple[str, str, str, dict[str, Any]]]
    ) -> None:
        """``upsert_relations`` for ``(label, source, target, properties)``, no pydantic."""
        with self._lock:
            for label, source, target, props in records:
                for end in (source, target):
                    if not self._has_node(end):
                        self._put_node(end, EntityNode(name=end))
                self._put_relation(
                    Relation(label=label, source_id=source, target_id=target, properties=props),
                    replace=False,
                )
            self._settle()

    def _settle(self) -> None:
        """Merge the lookup entries made one at a time into the indexes' arrays.

        They wait in small dicts of Python ints and lists; left there after a
        bulk write, made among the write's temporaries, they kept those
        temporaries' memory pages resident.
        """
        self.strings.settle()
        self._rel.pairs.settle()

    # ------------------------------------------------------------ snapshot support

    def compact(self) -> None:
        """Drop deleted rows and the tokens of replaced records (fresh arrays)."""
        with self._lock:
            tokens = self._tokens.view
            ent, rel = self._ent, self._rel
            keep_e = np.nonzero(ent.alive.view)[0]
            keep_r = np.nonzero(rel.alive.view)[0]
            starts = np.concatenate([ent.pstart.view[keep_e], rel.pstart.view[keep_r]])
            lengths = self.codec.lengths(tokens, starts)
            fresh_tokens = ragged_gather(tokens, starts, lengths)
            fresh_starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
            for table, keep, offset in ((ent, keep_e, 0), (rel, keep_r, keep_e.size)):
                for column in self._columns(table):
                    column.replace(column.view[keep])
                table.pstart.replace(fresh_starts[offset : offset + keep.size])
                table.dead = 0
            self._tokens.replace(fresh_tokens)
            self._garbage = 0
            self.vectors.take(keep_e)
            ent.row_of_sid.replace(np.full(len(self.strings), -1, dtype=np.int32))
            ent.row_of_sid[ent.key.view] = np.arange(len(ent), dtype=np.int32)
            rel.pairs = IntIndex()
            rel.pairs.add_many(
                _pair_keys(rel.source.view, rel.target.view), np.arange(len(rel), dtype=np.int32)
            )

    def fit(self) -> None:
        """Drop the spare capacity of every column after a bulk write.

        Columns grow by doubling, so up to half of each is spare; in the
        allocator's heap (where a buffer smaller than glibc's mmap threshold
        goes, and that threshold rises to 32 MB once large arrays have been
        freed) reused spare pages stay resident. The entity matrix is left as
        it is: a snapshot may share it, and its spare rows were never touched.
        """
        with self._lock:
            self._settle()
            self.strings.fit()
            self._tokens.fit()
            for table in (self._ent, self._rel):
                for column in (*self._columns(table), table.pstart):
                    column.fit()
            self._ent.row_of_sid.fit()
            shared = self._shared
            for column in (shared.key, shared.seq, shared.row_of_sid):
                column.fit()
            self.vectors.has.fit()
            self.vectors.unit.fit()

    @staticmethod
    def _columns(table: _Records) -> list[Growable]:
        names = ("alive", "key", "name", "label", "seq", "source", "target")
        return [getattr(table, n) for n in names if hasattr(table, n)]

    def columns(self) -> GraphColumns:
        """Live entities, relations and chunks as arrays, for a snapshot (compacts first)."""
        with self._lock:
            ent, rel = self._ent, self._rel
            if ent.dead or rel.dead or self._garbage > len(self._tokens) // 4:
                self.compact()
            self._settle()
            return GraphColumns(
                strings=self.strings,
                codec=self.codec,
                tokens=self._tokens.view.copy(),
                entity_key=ent.key.view.copy(),
                entity_name=ent.name.view.copy(),
                entity_pstart=ent.pstart.view.copy(),
                row_of_sid=ent.row_of_sid.view.copy(),
                vector_has=self.vectors.has.view.copy(),
                relation_source=rel.source.view.copy(),
                relation_label=rel.label.view.copy(),
                relation_target=rel.target.view.copy(),
                relation_pstart=rel.pstart.view.copy(),
                chunks=self._chunk_records(),
            )

    def _chunk_records(self) -> ChunkRecords:
        shared = self._shared
        rows = self._live_shared_rows()
        key = shared.key.view[rows].copy()
        row_of_sid = np.full(len(self.strings), -1, dtype=np.int32)
        row_of_sid[key] = np.arange(rows.size, dtype=np.int32)
        return ChunkRecords(
            own={k: b for k, b in self._blobs.items() if b[0] == _CHUNK},
            strings=self.strings,
            shared_key=key,
            shared_values=[shared.values[r] for r in rows.tolist()],
            shared_row_of_sid=row_of_sid,
        )

    def entity_matrix(self) -> np.ndarray:
        """Every live entity's vector as a unit row, in store order: the store's own
        matrix, read-only (see :class:`EntityVectors`). Needs every entity to have one.
        """
        with self._lock:
            if self._ent.dead:
                self.compact()
            if not bool(np.all(self.vectors.has.view)):
                raise ValueError("entity_matrix: some entities have no vector")
            self.vectors.scale_to_unit()
            return self.vectors.shared()

    def scale_vectors_to_unit(self) -> None:
        """Scale every stored entity vector to the unit row the snapshot reads (in place)."""
        with self._lock:
            self.vectors.scale_to_unit()

    def intern_many(self, texts: Any) -> np.ndarray:
        """String ids of ``texts`` (added to the table when new)."""
        with self._lock:
            return self.strings.intern_many(texts)

    def entity_vector(self, key: str) -> np.ndarray | None:
        """The stored vector of entity ``key`` (``None`` without one)."""
        with self._lock:
            row = self._entity_row(key)
            return None if row < 0 else self.vectors.get(row)

    def nbytes(self) -> dict[str, int]:
        """Bytes held per part (for reports and tests)."""
        with self._lock:
            ent, rel = self._ent, self._rel
            return {
                "strings": self.strings.nbytes(),
                "tokens": int(self._tokens.view.nbytes),
                "entities": sum(c.view.nbytes for c in self._columns(ent))
                + int(ent.pstart.view.nbytes + ent.row_of_sid.view.nbytes),
                "relations": sum(c.view.nbytes for c in self._columns(rel))
                + int(rel.pstart.view.nbytes + rel.pairs.nbytes()),
                "vectors": self.vectors.nbytes(),
                "chunks": sum(len(b) for b in self._blobs.values()),
                # references to the docstore's values (the values are the docstore's)
                "shared_chunks": 8 * len(self._shared)
                + int(self._shared.key.view.nbytes + self._shared.seq.view.nbytes)
                + int(self._shared.row_of_sid.view.nbytes),
            }

    # ------------------------------------------------------------ persistence

    def _keyed_relations(self) -> Iterator[tuple[str, Relation]]:
        """``(key, relation)`` of every live relation, in store order."""
        for row in self._live_relation_rows().tolist():
            rel = self._get_relation(row)
            yield f"{rel.source_id}_{rel.label}_{rel.target_id}", rel

    def to_dict(self) -> dict:
        """The plain ``LabelledPropertyGraph`` layout, as the stock store gives it."""
        with self._lock:
            nodes = self.graph.nodes
            return {
                "nodes": {key: nodes[key].model_dump() for key in nodes},
                "relations": {key: rel.model_dump() for key, rel in self._keyed_relations()},
                "triplets": set(self._relation_triples()),
            }

    def persist(self, persist_path: str, fs: fsspec.AbstractFileSystem | None = None) -> None:
        """Write the same JSON as ``SimplePropertyGraphStore`` (either class loads it)."""
        fs = fs or fsspec.filesystem("file")
        with self._lock:
            nodes = self.graph.nodes
            # One record at a time through pydantic's JSON encoder: the same output
            # as the stock store, without decoding the whole graph at once.
            with fs.open(persist_path, "w", encoding="utf-8") as f:
                f.write('{"nodes":{')
                for k, key in enumerate(nodes):
                    f.write(("," if k else "") + json.dumps(key) + ":")
                    f.write(nodes[key].model_dump_json())
                f.write('},"relations":{')
                for k, (key, rel) in enumerate(self._keyed_relations()):
                    f.write(("," if k else "") + json.dumps(key) + ":")
                    f.write(rel.model_dump_json())
                f.write('},"triplets":[')
                for k, triplet in enumerate(self._relation_triples()):
                    f.write(("," if k else "") + json.dumps(list(triplet)))
                f.write("]}")


__all__ = [
    "ChunkRecords",
    "CompactPropertyGraphStore",
    "EntityVectors",
    "GraphColumns",
    "chunk_of_docstore_value",
    "unit_rows",
]
