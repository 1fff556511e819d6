"""Reading a property graph store into FG-RAG's retrieval snapshot (:class:`~.expansion.EntityGraph`).

Any ``PropertyGraphStore`` works through the general path (its nodes and
relations as LlamaIndex objects). For FG-RAG's own
:class:`~.store.CompactPropertyGraphStore` the snapshot is computed from the
store's columns with numpy and *shares* the store's string table and entity
matrix: entity names, display names, descriptions and chunk ids stay string
ids (decoded for the few a query reads), and the chunk nodes are decoded from
the store's records when a query returns them. Before, the snapshot held its
own copy of all of it: a second entity matrix (36 MB at 4,000 chunks), every
description string, a Python string per entity name, and a pickled copy of
every chunk.

Both paths give the same snapshot: same entities, order, descriptions,
relations, vector bits and fallbacks (entities without descriptions get their
name; relations without descriptions get ``"A LABEL B"``; relations emptied
by a deletion are skipped).
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import (
    ChunkNode,
    EntityNode,
    PropertyGraphStore,
    Relation,
)
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node

from ..core.embeddings import embed_texts
from .columns import OBJ, STR, STRS, PropertyCodec, ragged_gather
from .expansion import EntityGraph, RowLookup, StringColumn
from .extract import BUILT_BY, DESCRIPTIONS, DISPLAY_NAME, SOURCES
from .store import (
    ChunkRecords,
    CompactPropertyGraphStore,
    GraphColumns,
    chunk_of_docstore_value,
    decode_chunk,
    unit_rows,
)

logger = logging.getLogger(__name__)

#: Characters of an entity's name + descriptions that are embedded (MiniLM reads ~256 tokens).
EMBED_CHARS = 2000


def entity_text(name: str, descriptions: Sequence[str]) -> str:
    """What is embedded for an entity: its name, then its descriptions.

    The authors embed the descriptions alone; the name is prepended here so a
    short query entity ("honey") matches its own node first.
    """
    return (f"{name}: " + " ".join(descriptions))[:EMBED_CHARS]


def build_snapshot(store: PropertyGraphStore, embed_model: BaseEmbedding) -> EntityGraph:
    """Read a property graph store into an [`EntityGraph`][llama_index_graphrag_ext.fgrag.expansion.EntityGraph].

    Entities without a stored vector (a store filled by another extractor, or
    one that does not return vectors) are embedded here. Entities without
    descriptions get their name as their one description, so graphs built by
    LlamaIndex's own extractors work too.
    """
    if isinstance(store, CompactPropertyGraphStore):
        columns = store.columns()
        graph = _from_columns(store, columns, embed_model)
        return graph if graph is not None else _from_compact_records(store, columns, embed_model)
    entities: list[EntityNode] = []
    chunks: dict[str, BaseNode] = {}
    for node in store.get():
        if isinstance(node, EntityNode):
            entities.append(node)
        elif isinstance(node, ChunkNode):
            chunk = _chunk_node(node.properties, node.text)
            if chunk is not None:
                chunks[node.id] = chunk
    names = [e.id for e in entities]
    displays = [e.properties.get(DISPLAY_NAME) or e.name for e in entities]
    descs = [list(e.properties.get(DESCRIPTIONS) or [e.name]) for e in entities]
    srcs = [list(e.properties.get(SOURCES) or []) for e in entities]
    vectors = np.zeros((len(entities), 0), dtype=np.float32)
    if entities:
        missing = [i for i, e in enumerate(entities) if not e.embedding]
        if missing:
            logger.info("FG-RAG snapshot: embedding %d entity(ies) without vectors", len(missing))
            fresh = embed_texts(embed_model, [entity_text(displays[i], descs[i]) for i in missing])
            for row, i in enumerate(missing):
                entities[i].embedding = fresh[row].tolist()
        vectors = unit_rows(np.asarray([e.embedding for e in entities], dtype=np.float32))
    relations = [
        (rel.source_id, rel.label, rel.target_id, rel.properties)
        for rel in _all_relations(store, names)
    ]
    return _graph_from_lists(names, displays, descs, srcs, vectors, relations, chunks)


def _all_relations(store: PropertyGraphStore, entity_ids: Sequence[str]) -> list[Relation]:
    """Every relation of the store (fast path for the in-memory store)."""
    if isinstance(store, SimplePropertyGraphStore):
        return list(store.graph.get_all_relations())
    if not entity_ids:
        return []
    seen: dict[tuple[str, str, str], Relation] = {}
    for _, rel, _ in store.get_triplets(entity_names=list(entity_ids)):
        seen.setdefault((rel.source_id, rel.label, rel.target_id), rel)
    return list(seen.values())


def _graph_from_lists(
    names: list[str],
    displays: list[str],
    descs: list[list[str]],
    srcs: list[list[str]],
    vectors: np.ndarray,
    relations: Sequence[tuple[str, str, str, dict]],
    chunks: Mapping[str, BaseNode],
) -> EntityGraph:
    """The snapshot from per-entity lists and ``(source, label, target, properties)`` relations."""
    index_of = {name: i for i, name in enumerate(names)}
    ends, rel_descs, rel_srcs = [], [], []
    for source, label, target, props in relations:
        a, b = index_of.get(source), index_of.get(target)
        texts = list(props.get(DESCRIPTIONS) or [])
        if a is None or b is None or a == b:
            continue
        if not texts and BUILT_BY in props:
            continue  # emptied by a deletion
        ends.append((a, b))
        rel_descs.append(texts or [f"{displays[a]} {label} {displays[b]}"])
        rel_srcs.append(list(props.get(SOURCES) or []))
    return EntityGraph(
        names,
        displays,
        descs,
        srcs,
        vectors,
        np.asarray(ends, dtype=np.int64).reshape(-1, 2),
        rel_descs,
        rel_srcs,
        chunks,
    )


def _chunk_node(properties: dict, text: str) -> BaseNode | None:
    """The LlamaIndex node a chunk record stands for (``None``: stored without its metadata)."""
    try:
        chunk = metadata_dict_to_node(properties or {})
        chunk.set_content(text)
        return chunk
    except Exception:
        return None


def _chunk_from_blob(blob: bytes) -> BaseNode | None:
    fields = decode_chunk(blob)
    return _chunk_node(fields.get("properties") or {}, fields.get("text", ""))


class StoreChunks(Mapping):
    """Chunk id -> chunk node, decoded from the compact store's record when read.

    The records are the store's own (shared, not copied), so the snapshot
    holds no chunk text: per chunk, a reference to its record. The store's
    own records that do not decode into a LlamaIndex node are left out, as
    the general path leaves them out; the docstore values it shares are
    LlamaIndex nodes by construction, so they are not decoded here (at
    64,000 chunks, decoding every one at each snapshot took seconds and its
    temporaries scattered the snapshot's allocations).
    """

    def __init__(self, records: ChunkRecords) -> None:
        self._own = {key: blob for key, blob in records.own.items() if _chunk_from_blob(blob)}
        self._strings = records.strings
        self._shared_key = records.shared_key
        self._shared_values = records.shared_values
        self._shared_row_of_sid = records.shared_row_of_sid

    def _shared_row(self, chunk_id: object) -> int:
        if not isinstance(chunk_id, str):
            return -1
        sid = self._strings.find(chunk_id)
        rows = self._shared_row_of_sid
        return int(rows[sid]) if 0 <= sid < rows.shape[0] else -1

    def __getitem__(self, chunk_id: str) -> BaseNode:
        blob = self._own.get(chunk_id)
        if blob is not None:
            node = _chunk_from_blob(blob)
        else:
            row = self._shared_row(chunk_id)
            if row < 0:
                raise KeyError(chunk_id)
            chunk = chunk_of_docstore_value(self._shared_values[row])
            node = _chunk_node(chunk.properties, chunk.text)
        assert node is not None
        return node

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self._own or self._shared_row(chunk_id) >= 0

    def present(self, chunk_ids: Sequence[str]) -> set[str]:
        """The ids among ``chunk_ids`` that are chunks here, in one vectorised lookup.

        A retrieval tests every gathered description's chunk (about 800 per
        question); one ``in`` at a time cost about 20 µs each here, against a
        dict lookup's 50 ns, and added 15-30 ms to FG-RAG's p50.
        """
        ids = list(chunk_ids)
        sids = self._strings.find_many(ids)
        rows = self._shared_row_of_sid
        hit = (sids >= 0) & (sids < rows.shape[0])
        hit[hit] = rows[sids[hit]] >= 0
        return {i for i, shared in zip(ids, hit.tolist(), strict=True) if shared or i in self._own}

    def __iter__(self) -> Iterator[str]:
        yield from self._own
        strings = self._strings
        for sid in self._shared_key.tolist():
            yield strings[sid]

    def __len__(self) -> int:
        return len(self._own) + len(self._shared_values)


# --------------------------------------------------------------------------- compact store


def _truthy_object(codec: PropertyCodec, tokens: np.ndarray, positions: np.ndarray) -> bool:
    return any(pickle.loads(codec.objects[int(tokens[p])]) for p in positions.tolist())


def _string_field(columns: GraphColumns, starts: np.ndarray, key: str) -> np.ndarray | None:
    """String id of ``props.get(key)`` per record, -1 where it is missing or falsy.

    ``None`` when some record holds a truthy non-string there (the general
    path then handles the store).
    """
    codec, tokens, strings = columns.codec, columns.tokens, columns.strings
    kind, pos = codec.locate(tokens, starts, key)
    out = np.full(starts.shape[0], -1, dtype=np.int32)
    is_str = np.nonzero(kind == STR)[0]
    sids = tokens[pos[is_str]]
    nonempty = strings.lengths(sids) > 0
    out[is_str[nonempty]] = sids[nonempty]
    if np.any(tokens[pos[kind == STRS]] > 0) or _truthy_object(codec, tokens, pos[kind == OBJ]):
        return None
    return out


def _list_field(
    columns: GraphColumns, starts: np.ndarray, key: str
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(count, first)`` of ``list(props.get(key) or [])`` per record.

    The list's string ids are ``tokens[first:first+count]``. ``None`` when
    some record holds a truthy non-list there.
    """
    codec, tokens, strings = columns.codec, columns.tokens, columns.strings
    kind, pos = codec.locate(tokens, starts, key)
    count = np.zeros(starts.shape[0], dtype=np.int64)
    first = np.zeros(starts.shape[0], dtype=np.int64)
    is_list = kind == STRS
    count[is_list] = tokens[pos[is_list]]
    first[is_list] = pos[is_list] + 1
    if np.any(strings.lengths(tokens[pos[kind == STR]]) > 0):
        return None  # a non-empty string, which list() would split into characters
    if _truthy_object(codec, tokens, pos[kind == OBJ]):
        return None
    return count, first


def _csr(
    tokens: np.ndarray,
    texts: tuple[np.ndarray, np.ndarray],
    fallback: np.ndarray,
    sources: tuple[np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ptr, text ids, source ids)`` as ``EntityGraph`` keeps them.

    Row ``i`` has its ``texts`` list, or the one string ``fallback[i]`` when
    that list is empty; the ``k``-th text's source is the ``k``-th entry of
    its ``sources`` list, -1 beyond its end.
    """
    count, first = texts
    empty = count == 0
    lengths = np.where(empty, 1, count)
    ptr = np.zeros(count.shape[0] + 1, dtype=np.int32)
    np.cumsum(lengths, out=ptr[1:])
    text = np.empty(int(ptr[-1]), dtype=np.int32)
    from_list = np.repeat(~empty, lengths)
    text[from_list] = ragged_gather(tokens, first[~empty], count[~empty])
    text[~from_list] = fallback[empty]
    row = np.repeat(np.arange(count.shape[0]), lengths)
    k = np.arange(text.shape[0]) - ptr[row]
    src_count, src_first = sources
    has = k < src_count[row]
    src = np.full(text.shape[0], -1, dtype=np.int32)
    src[has] = tokens[src_first[row[has]] + k[has]]
    return ptr, text, src


def _rows_of(row_of_sid: np.ndarray, sids: np.ndarray) -> np.ndarray:
    inside = sids < row_of_sid.shape[0]
    return np.where(inside, row_of_sid[np.where(inside, sids, 0)], -1)


def _from_columns(
    store: CompactPropertyGraphStore, columns: GraphColumns, embed_model: BaseEmbedding
) -> EntityGraph | None:
    """The snapshot from the store's columns (``None``: the general rules need strings).

    Names are string ids: an entity's snapshot name is its ``EntityNode.id``
    (its name with ``"`` made a space; such names are added to the string
    table). The BFS's dedup owners are compared as ids: an entity's by its
    name, a relation's by its pair of names (what its ``"a -> b"`` string
    says). That needs no name to hold ``" -> "``; otherwise (never in FG-RAG's
    own graphs) the records are decoded instead.
    """
    strings, tokens = columns.strings, columns.tokens
    raw = columns.entity_name  # EntityNode.name
    n = raw.shape[0]
    names = raw.copy()
    quoted = np.nonzero(np.isin(raw, strings.containing(b'"')))[0]
    if quoted.size:
        names[quoted] = store.intern_many(strings[int(k)].replace('"', " ") for k in raw[quoted])
    if np.isin(names, strings.containing(b" -> ")).any():
        return None
    starts = columns.entity_pstart
    display = _string_field(columns, starts, DISPLAY_NAME)
    descs = _list_field(columns, starts, DESCRIPTIONS)
    srcs = _list_field(columns, starts, SOURCES)
    if display is None or descs is None or srcs is None:
        return None
    display = np.where(display >= 0, display, raw)

    # name -> row, the last row winning, as {name: i for i, name in ...} has it
    row_of_name = np.full(len(strings), -1, dtype=np.int32)
    last = n - 1 - np.unique(names[::-1], return_index=True)[1]
    row_of_name[names[last]] = last
    rstarts = columns.relation_pstart
    a = _rows_of(row_of_name, columns.relation_source)
    b = _rows_of(row_of_name, columns.relation_target)
    rel_texts = _list_field(columns, rstarts, DESCRIPTIONS)
    rel_srcs = _list_field(columns, rstarts, SOURCES)
    if rel_texts is None or rel_srcs is None:
        return None
    built_by = columns.codec.locate(tokens, rstarts, BUILT_BY)[0] >= 0
    keep = (a >= 0) & (b >= 0) & (a != b) & ~((rel_texts[0] == 0) & built_by)
    a, b = a[keep], b[keep]
    rel_texts = (rel_texts[0][keep], rel_texts[1][keep])
    rel_srcs = (rel_srcs[0][keep], rel_srcs[1][keep])
    rel_fallback = np.full(a.shape[0], -1, dtype=np.int32)
    bare = np.nonzero(rel_texts[0] == 0)[0]
    if bare.size:  # relations without descriptions: "A LABEL B"
        labels = columns.relation_label[keep][bare]
        rel_fallback[bare] = store.intern_many(
            f"{strings[int(display[i])]} {strings[int(lab)]} {strings[int(display[j])]}"
            for i, lab, j in zip(a[bare], labels, b[bare], strict=True)
        )

    ent_ptr, ent_text, ent_src = _csr(tokens, descs, raw, srcs)
    rel_ptr, rel_text, rel_src = _csr(tokens, rel_texts, rel_fallback, rel_srcs)
    # Owners for the BFS's dedup keys: entities by name, relations by their
    # (source name, target name) pair, numbered after the entities'.
    ent_owner = np.unique(names, return_inverse=True)[1].reshape(-1).astype(np.int32)
    pairs = names[a].astype(np.int64) * max(len(strings), 1) + names[b]
    rel_owner = (n + np.unique(pairs, return_inverse=True)[1].reshape(-1)).astype(np.int32)
    vectors = _entity_vectors(
        store,
        columns,
        embed_model,
        lambda i: entity_text(
            strings[int(display[i])],
            [strings[int(t)] for t in ent_text[ent_ptr[i] : ent_ptr[i + 1]]],
        ),
    )
    name_column = StringColumn(names, strings)
    return EntityGraph.from_arrays(
        names=name_column,
        display_names=StringColumn(display, strings),
        index_of=RowLookup(name_column, strings.find, row_of_name),
        vectors=vectors,
        rel_ends=np.stack([a, b], axis=1),
        ent_ptr=ent_ptr,
        ent_text=ent_text,
        ent_src=ent_src,
        rel_ptr=rel_ptr,
        rel_text=rel_text,
        rel_src=rel_src,
        texts=strings,
        ent_owner=ent_owner,
        rel_owner=rel_owner,
        chunks=StoreChunks(columns.chunks),
    )


def _entity_vectors(
    store: CompactPropertyGraphStore,
    columns: GraphColumns,
    embed_model: BaseEmbedding,
    text_of: Callable[[int], str],
) -> np.ndarray:
    """The store's entity matrix, shared, after embedding the entities that have no vector.

    Those (in FG-RAG's graphs: the bare end nodes LlamaIndex adds for
    relation ends that are no entity's id) are embedded from ``text_of(row)``
    in one call, as the general path does on every snapshot, and the vectors
    are kept in the store, so the snapshot can use its matrix as it is.
    """
    missing = np.nonzero(~columns.vector_has)[0]
    if missing.size:
        logger.info("FG-RAG snapshot: embedding %d entity(ies) without vectors", missing.size)
        fresh = embed_texts(embed_model, [text_of(int(i)) for i in missing])
        keys = [columns.strings[int(k)] for k in columns.entity_key[missing]]
        store.put_unit_vectors(keys, unit_rows(fresh))
    return store.entity_matrix()


def _from_compact_records(
    store: CompactPropertyGraphStore, columns: GraphColumns, embed_model: BaseEmbedding
) -> EntityGraph:
    """The snapshot of a compact store whose names need the general rules (decoded records)."""
    strings, codec, tokens = columns.strings, columns.codec, columns.tokens
    names, displays, descs, srcs = [], [], [], []
    for name_sid, start in zip(
        columns.entity_name.tolist(), columns.entity_pstart.tolist(), strict=True
    ):
        name = strings[name_sid]
        props, _ = codec.decode(tokens, start)
        names.append(name.replace('"', " "))  # EntityNode.id
        displays.append(props.get(DISPLAY_NAME) or name)
        descs.append(list(props.get(DESCRIPTIONS) or [name]))
        srcs.append(list(props.get(SOURCES) or []))
    relations = [
        (strings[s], strings[label], strings[t], codec.decode(tokens, start)[0])
        for s, label, t, start in zip(
            columns.relation_source.tolist(),
            columns.relation_label.tolist(),
            columns.relation_target.tolist(),
            columns.relation_pstart.tolist(),
            strict=True,
        )
    ]
    vectors = _entity_vectors(
        store, columns, embed_model, lambda i: entity_text(displays[i], descs[i])
    )
    chunks = StoreChunks(columns.chunks)
    return _graph_from_lists(names, displays, descs, srcs, vectors, relations, chunks)
