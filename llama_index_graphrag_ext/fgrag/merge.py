"""The paper's Merge (Eq. 2) over many chunks, kept as flat integer logs until the end.

Extraction gives, per chunk, ``EntityNode`` and ``Relation`` objects (the
``kg_extractors`` contract). FG-RAG merges same-name entities, and same
``(source, label, target)`` relations, across all chunks: the first
occurrence gives the name, label and properties; descriptions (with the chunk
each came from) are appended in chunk order, each text once, up to a cap
[P §3.1, Eq. 2; the authors keep 50].

Holding the merged graph as live pydantic objects until the end of the build
(as the index did before) kept hundreds of thousands of small objects alive
while the extraction's temporaries came and went, and their memory stayed
resident after the build. :class:`GraphMerge` instead logs every occurrence
as a few integers (string ids into a private :class:`~.columns.StringTable`)
in ``array`` buffers, so each extraction batch's objects can be dropped as
soon as it is logged; :meth:`GraphMerge.finish` then computes the merged
description lists for all entities and relations at once with numpy.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from llama_index.core.graph_stores.types import (
    KG_NODES_KEY,
    KG_RELATIONS_KEY,
    EntityNode,
    LabelledNode,
)
from llama_index.core.schema import BaseNode

from .columns import PropertyCodec, StringTable
from .extract import DESCRIPTIONS, DISPLAY_NAME, SOURCES

#: How many chunk ids without entities are kept for the warning.
_NO_ENTITY_SAMPLE = 5


def _frozen(buffer: array, dtype: Any) -> np.ndarray:
    return np.frombuffer(buffer, dtype=dtype) if len(buffer) else np.zeros(0, dtype=dtype)


class _Log:
    """Occurrences of one record kind: three string-id columns, properties, descriptions.

    Args:
        keyed_by_all: Whether a record is identified by all three ids
            (relations: source, label, target) or by the first alone
            (entities: the node id; name and label come with it).
    """

    def __init__(self, keyed_by_all: bool) -> None:
        self.keyed_by_all = keyed_by_all
        self.ids = [array("i") for _ in range(3)]
        self.props = array("q")  # token offset of each occurrence's properties
        self.desc_occ = array("i")  # occurrence of each description
        self.desc_text = array("i")
        self.desc_src = array("i")

    def __len__(self) -> int:
        return len(self.props)


class GraphMerge:
    """Merge the KG output of many chunks (Eq. 2) at the cost of a few integers per occurrence.

    Args:
        cap: Most descriptions kept per entity or relation.
    """

    def __init__(self, cap: int) -> None:
        self.cap = int(cap)
        self.strings = StringTable()
        self.codec = PropertyCodec(self.strings)
        self._tokens = array("i")
        self._entities = _Log(keyed_by_all=False)  # key, name, label
        self._relations = _Log(keyed_by_all=True)  # source, label, target
        self.others: list[LabelledNode] = []
        self.chunks = 0
        self.no_entity = 0
        self.no_entity_sample: list[str] = []
        self._cache: dict[str, int] = {}

    def _sid(self, text: str) -> int:
        # Strings repeat a lot within a batch (a sentence is an entity's and its
        # relations' description): a per-batch dict saves most table lookups.
        sid = self._cache.get(text)
        if sid is None:
            sid = self._cache[text] = self.strings.intern(text)
        return sid

    def _log(self, log: _Log, ids: Sequence[str], props: dict[str, Any], chunk: int) -> None:
        occurrence = len(log)
        for column, text in zip(log.ids, ids, strict=True):
            column.append(self._sid(text))
        log.props.append(len(self._tokens))
        rest = {k: v for k, v in props.items() if k not in (DESCRIPTIONS, SOURCES)}
        self.codec.encode(rest, self._tokens, intern=self._sid)
        for text in list(props.get(DESCRIPTIONS) or []):
            log.desc_occ.append(occurrence)
            log.desc_text.append(self._sid(str(text)) if text else -1)
            log.desc_src.append(chunk)

    def add(self, node: BaseNode) -> None:
        """Log one extracted chunk (its KG lists are taken out of its metadata)."""
        kg_nodes = node.metadata.pop(KG_NODES_KEY, None) or []
        kg_rels = node.metadata.pop(KG_RELATIONS_KEY, None) or []
        self.chunks += 1
        if not any(isinstance(kg, EntityNode) for kg in kg_nodes):
            self.no_entity += 1
            if len(self.no_entity_sample) < _NO_ENTITY_SAMPLE:
                self.no_entity_sample.append(node.node_id)
        chunk = self._sid(node.node_id)
        for kg in kg_nodes:
            if isinstance(kg, EntityNode):
                self._log(self._entities, (kg.id, kg.name, kg.label), kg.properties, chunk)
            else:
                self.others.append(kg)
        for rel in kg_rels:
            ids = (rel.source_id, rel.label, rel.target_id)
            self._log(self._relations, ids, rel.properties, chunk)

    def end_batch(self) -> None:
        """Drop the per-batch string cache (the batch's strings can then be freed)."""
        self._cache = {}

    def finish(self) -> MergedGraph:
        """The merged entities and relations."""
        self.end_batch()
        tokens = _frozen(self._tokens, np.int32)
        return MergedGraph(
            self.strings,
            self.codec,
            tokens,
            _merge(self._entities, self.strings, self.cap),
            _merge(self._relations, self.strings, self.cap),
        )


class _Merged:
    """One record kind after the merge: group ``g`` in first-seen order.

    ``ids[g]``: the key's string ids; ``first[g]``: the first occurrence's
    token span; descriptions of ``g`` are ``text[ptr[g]:ptr[g+1]]``, from
    chunks ``src[...]``.
    """

    def __init__(
        self,
        ids: np.ndarray,
        first: np.ndarray,
        ptr: np.ndarray,
        text: np.ndarray,
        src: np.ndarray,
    ) -> None:
        self.ids, self.first, self.ptr, self.text, self.src = ids, first, ptr, text, src

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def _merge(log: _Log, strings: StringTable, cap: int) -> _Merged:
    """Eq. 2 for one record kind, vectorised.

    The sequential rule (per occurrence in chunk order, append each non-empty
    description not yet in the list until it holds ``cap``) keeps, per
    record, the first ``cap`` distinct non-empty texts in occurrence order,
    each with the chunk of its first occurrence: that is what is computed.
    """
    occ_ids = np.stack([_frozen(c, np.int32) for c in log.ids], axis=1).reshape(-1, 3)
    props_at = _frozen(log.props, np.int64)
    if not occ_ids.shape[0]:
        empty = np.zeros(0, dtype=np.int32)
        return _Merged(occ_ids, props_at, np.zeros(1, dtype=np.int64), empty, empty)
    key = occ_ids if log.keyed_by_all else occ_ids[:, :1]
    _, first_occ, group_of = np.unique(key, axis=0, return_index=True, return_inverse=True)
    group_of = group_of.reshape(-1)
    order = np.argsort(first_occ, kind="stable")  # groups in first-seen order
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    group_of = rank[group_of]
    first_occ = first_occ[order]

    occ = _frozen(log.desc_occ, np.int32)
    text = _frozen(log.desc_text, np.int32)
    src = _frozen(log.desc_src, np.int32)
    live = text >= 0  # empty descriptions are skipped
    occ, text, src = occ[live], text[live], src[live]
    group = group_of[occ].astype(np.int64)
    # First occurrence of each (record, text); descriptions are in occurrence order.
    _, first_desc = np.unique(group * max(len(strings), 1) + text, return_index=True)
    first_desc.sort()
    group, text, src = group[first_desc], text[first_desc], src[first_desc]
    by_group = np.argsort(group, kind="stable")
    group, text, src = group[by_group], text[by_group], src[by_group]
    counts = np.bincount(group, minlength=order.size)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    within = np.arange(group.size) - starts[group]
    keep = within < cap
    group, text, src = group[keep], text[keep], src[keep]
    ptr = np.zeros(order.size + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(np.bincount(group, minlength=order.size))
    return _Merged(occ_ids[first_occ], props_at[first_occ], ptr, text, src)


class MergedGraph:
    """The merged entities and relations of a build, read back as records."""

    def __init__(
        self,
        strings: StringTable,
        codec: PropertyCodec,
        tokens: np.ndarray,
        entities: _Merged,
        relations: _Merged,
    ) -> None:
        self.strings, self.codec, self.tokens = strings, codec, tokens
        self.entities, self.relations = entities, relations

    def _descriptions(self, merged: _Merged, g: int) -> tuple[list[str], list[str]]:
        strings = self.strings
        lo, hi = int(merged.ptr[g]), int(merged.ptr[g + 1])
        return (
            [strings[i] for i in merged.text[lo:hi].tolist()],
            [strings[i] for i in merged.src[lo:hi].tolist()],
        )

    def _props(self, merged: _Merged, g: int) -> dict[str, Any]:
        props, _ = self.codec.decode(self.tokens, int(merged.first[g]))
        descs, srcs = self._descriptions(merged, g)
        props[DESCRIPTIONS] = descs
        props[SOURCES] = srcs
        return props

    def entity_key(self, g: int) -> str:
        """Entity ``g``'s node id."""
        return self.strings[int(self.entities.ids[g, 0])]

    def entity_record(self, g: int) -> tuple[str, str, str, dict[str, Any]]:
        """``(key, name, label, properties)`` of entity ``g``."""
        key, name, label = (self.strings[int(i)] for i in self.entities.ids[g])
        return key, name, label, self._props(self.entities, g)

    def entity_display(self, g: int) -> tuple[str, list[str]]:
        """What entity ``g`` is embedded from: its display name and its descriptions."""
        ids = self.entities.ids[g]
        props, _ = self.codec.decode(self.tokens, int(self.entities.first[g]))
        display = props.get(DISPLAY_NAME) or self.strings[int(ids[1])]
        return display, self._descriptions(self.entities, g)[0]

    def relation_record(self, g: int) -> tuple[str, str, str, dict[str, Any]]:
        """``(label, source, target, properties)`` of relation ``g``."""
        source, label, target = (self.strings[int(i)] for i in self.relations.ids[g])
        return label, source, target, self._props(self.relations, g)

    def records(self, kind: str, start: int, stop: int) -> Iterator[tuple[str, str, str, dict]]:
        """Records ``start..stop`` of ``"entity"`` or ``"relation"``."""
        read = self.entity_record if kind == "entity" else self.relation_record
        for g in range(start, stop):
            yield read(g)
