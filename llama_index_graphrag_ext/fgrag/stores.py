"""FG-RAG's graph in any LlamaIndex ``PropertyGraphStore`` (Neo4j, LadybugDB, FalkorDB, ...).

The store holds the structure, written through the standard upserts; the
descriptions and vectors stay in the suite's :class:`~.graph.EntityGraph`.
Expansion reads relations from the store a BFS level at a time
(:class:`StoreNeighbours`) and may match entities with its ``vector_query``
(:class:`StoreSearch`). What comes back is trusted only as structure: each
relation is looked up by ``(source, label, target)`` in the suite's graph, so
empty properties (LadybugDB keeps only its fixed schema) and relations the suite
dropped (no store offers a generic one-relation delete) do no harm.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import EntityNode, PropertyGraphStore
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import VectorStoreQuery

from ..core.embeddings import top_k_of_scores
from ..core.vectors import Hits, RowSearcher
from .graph import EntityGraph

logger = logging.getLogger(__name__)

WRITE_BATCH = 1024
#: Relations asked for per ``get_rel_map`` call (the interface's default, 30, cuts hubs).
REL_MAP_LIMIT = 1_000_000


def write_graph(
    store: PropertyGraphStore,
    graph: EntityGraph,
    entity_rows: Sequence[int] | None = None,
    relation_rows: Sequence[int] | None = None,
    chunks: Sequence[BaseNode] = (),
) -> None:
    """Upsert chunks, entities and relations (all of them when rows are ``None``)."""
    for start in range(0, len(chunks), WRITE_BATCH):
        store.upsert_llama_nodes(list(chunks[start : start + WRITE_BATCH]))
    rows = list(range(len(graph))) if entity_rows is None else list(entity_rows)
    for start in range(0, len(rows), WRITE_BATCH):
        store.upsert_nodes(graph.entity_nodes(rows[start : start + WRITE_BATCH]))
    rels = list(range(graph.num_relations)) if relation_rows is None else list(relation_rows)
    for start in range(0, len(rels), WRITE_BATCH):
        store.upsert_relations(graph.relations(rels[start : start + WRITE_BATCH]))


def delete_nodes(store: PropertyGraphStore, ids: Sequence[str]) -> None:
    """Remove nodes (chunks, emptied entities) and their relations from ``store``.

    ``SimplePropertyGraphStore.delete`` drops both end nodes of every relation
    it removes (``LabelledPropertyGraph.delete_triplet``), so deleting one
    entity would take its neighbours with it: for that store the relations and
    nodes are removed directly. Other stores get the standard ``delete(ids=)``.
    """
    if not ids:
        return
    if not isinstance(store, SimplePropertyGraphStore):
        store.delete(ids=list(ids))
        return
    gone = set(ids)
    graph = store.graph
    for triplet in [t for t in graph.triplets if t[0] in gone or t[2] in gone]:
        graph.triplets.discard(triplet)
        graph.relations.pop(
            graph._get_relation_key(subj_id=triplet[0], rel_id=triplet[1], obj_id=triplet[2]), None
        )
    for node_id in gone:
        graph.nodes.pop(node_id, None)


#: Entity keys -> the relations touching them, as ``(source, label, target)`` keys.
HopReader = Callable[[list[str]], Iterable[tuple[str, str, str]]]


def rel_map_reader(store: PropertyGraphStore) -> HopReader:
    """One hop through the interface's ``get_rel_map`` (one batched call per BFS level).

    The ends are read from the returned nodes' ids: some stores get a relation's
    own ids wrong (see the LadybugDB integration's notes).
    """

    def read(keys: list[str]) -> Iterable[tuple[str, str, str]]:
        nodes = [EntityNode(name=key) for key in keys]
        for source, rel, target in store.get_rel_map(nodes, depth=1, limit=REL_MAP_LIMIT):
            yield source.id, rel.label, target.id

    return read


class StoreNeighbours:
    """Relations read from a property graph store, one round trip per BFS level.

    Args:
        read_hop: How one hop is read (default: :func:`rel_map_reader`; a
            store whose ``get_rel_map`` misses relations gets its own, e.g. one
            Cypher query per hop).
    """

    def __init__(
        self, store: PropertyGraphStore, graph: EntityGraph, read_hop: HopReader | None = None
    ) -> None:
        self.store = store
        self.graph = graph
        self.read_hop = read_hop or rel_map_reader(store)
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        #: Round trips made.
        self.calls = 0

    def prefetch(self, rows: Sequence[int]) -> None:
        want = [r for r in dict.fromkeys(rows) if r not in self._cache]
        if not want:
            return
        g = self.graph
        found: dict[int, dict[int, int]] = {r: {} for r in want}  # row -> relation -> neighbour
        self.calls += 1
        for source, label, target in self.read_hop([g.name(r) for r in want]):
            r = g.relation_row(source, label, target)
            if r is None:
                continue  # not (or no longer) in the suite's graph
            a, b = (int(x) for x in g.rel_ends[r])
            if a in found:
                found[a][r] = b
            if b in found:
                found[b][r] = a
        for row, rels in found.items():
            order = sorted(rels)
            self._cache[row] = (
                np.asarray([rels[r] for r in order], dtype=np.int32),
                np.asarray(order, dtype=np.int32),
            )

    def of(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        if row not in self._cache:
            self.prefetch([row])
        return self._cache[row]


class StoreSearch(RowSearcher):
    """Eqs. 6-7's ``Match`` through the store's ``vector_query``, re-scored exactly.

    The store proposes ``k + margin`` entities per query; the suite's vectors
    score them, best first with ties to the lower row, so the result equals
    the in-memory search whenever the store's candidates hold the true top ``k``.
    """

    def __init__(self, store: PropertyGraphStore, graph: EntityGraph, margin: int = 8) -> None:
        self.store, self.graph, self.margin = store, graph, int(margin)

    def search(self, vector: np.ndarray, k: int) -> Hits:
        vector = np.asarray(vector, dtype=np.float32)
        matrix = self.graph.vectors
        query = VectorStoreQuery(query_embedding=vector.tolist(), similarity_top_k=k + self.margin)
        nodes, _ = self.store.vector_query(query)
        found = (self.graph.row_of(node.id) for node in nodes)
        rows = np.unique(np.fromiter((r for r in found if r is not None), dtype=np.int64))
        scores = (matrix[rows] @ vector).astype(np.float32)
        order, top = top_k_of_scores(scores, k)
        return Hits(rows[order], top, _LazyCosines(matrix, vector))


class _LazyCosines:
    """``cosines[rows]``: the query's cosine with the rows asked for."""

    def __init__(self, matrix: np.ndarray, vector: np.ndarray) -> None:
        self.matrix, self.vector = matrix, vector

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        return self.matrix[rows] @ self.vector
