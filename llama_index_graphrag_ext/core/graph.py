"""The typed graph every index exports for the viewer, GraphML and ``graph.json.gz``.

Each method retrieves from its own compact structures and builds a `TypedGraph`
on demand, so the class offers bulk adds, adjacency lookups and counts by kind,
and no graph algorithms (export to GraphML and use networkx for those). It is a
multigraph keyed by edge kind because some methods link one pair in several ways
(ChainRAG: entity co-occurrence *and* similarity). Reads are thread-safe while
no writer runs; writers are not synchronised.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import networkx as nx

from . import graph_format
from .graph_format import FORMAT_NAME, FORMAT_VERSION

logger = logging.getLogger(__name__)

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "TypedGraph"]


def _check_kind(kind: object, what: str) -> None:
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"{what} kind must be a non-empty string, got {kind!r}")


def _check_id(node_id: object) -> None:
    if not isinstance(node_id, str):
        raise TypeError(f"node ids must be str, got {type(node_id).__name__}: {node_id!r}")


class TypedGraph(graph_format.GraphFiles):
    """Undirected graph with typed nodes and typed, optionally weighted edges.

    Node ids are strings; a node's kind is fixed when it is first added. A pair
    has at most one edge per kind; no self-loops. Lookups of unknown nodes raise
    ``KeyError``.

    Attributes:
        meta: JSON-serialisable graph-level metadata, saved and loaded with the graph.
    """

    def __init__(self, meta: Mapping[str, Any] | None = None) -> None:
        self._g = nx.MultiGraph()
        # kind -> insertion-ordered set of node ids: no whole-graph scans by kind.
        self._by_kind: dict[str, dict[str, None]] = {}
        self._edge_counts: Counter[str] = Counter()
        self.meta: dict[str, Any] = dict(meta or {})

    def add_node(self, node_id: str, kind: str, **attrs: Any) -> None:
        """Add a node, or merge attributes into an existing node of the same kind.

        Raises:
            ValueError: If the node exists with another kind.
        """
        self.add_nodes([node_id], kind, [attrs])

    def add_nodes(
        self,
        ids: Iterable[str],
        kind: str,
        attrs_list: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> None:
        """Add many nodes of one kind; existing nodes of that kind get attributes merged.

        Args:
            attrs_list: Optional attributes, one mapping (or ``None``) per id.

        Raises:
            ValueError: If ``attrs_list`` has another length than ``ids``, an
                attribute is named ``kind``, or an id exists with another kind.
        """
        _check_kind(kind, "node")
        ids = list(ids)
        if attrs_list is not None and len(attrs_list) != len(ids):
            raise ValueError(f"attrs_list has {len(attrs_list)} entries for {len(ids)} ids")
        nodes = self._g._node
        adj = self._g._adj
        members = self._by_kind.setdefault(kind, {})
        try:
            for i, node_id in enumerate(ids):
                attrs = attrs_list[i] if attrs_list is not None else None
                if attrs and "kind" in attrs:
                    raise ValueError(f"node {node_id!r}: attribute name 'kind' is reserved")
                data = nodes.get(node_id)
                if data is not None:
                    if data["kind"] != kind:
                        raise ValueError(
                            f"node {node_id!r} already exists with kind {data['kind']!r}, "
                            f"not {kind!r}"
                        )
                    if attrs:
                        data.update(attrs)
                    continue
                _check_id(node_id)
                # Direct writes (networkx's add_nodes_from minus its per-node
                # overhead); an error part-way leaves earlier nodes consistent.
                nodes[node_id] = {"kind": kind, **attrs} if attrs else {"kind": kind}
                adj[node_id] = {}
                members[node_id] = None
        finally:
            if not members:
                del self._by_kind[kind]
            self._clear_nx_cache()

    def remove_nodes(self, ids: Iterable[str]) -> int:
        """Remove nodes (unknown ids ignored) and their edges; return how many were removed."""
        adj = self._g._adj
        nodes = self._g._node
        removed = 0
        for node_id in ids:
            data = nodes.get(node_id)
            if data is None:
                continue
            for keydict in adj[node_id].values():
                self._edge_counts.subtract(keydict.keys())
            kind = data["kind"]
            members = self._by_kind[kind]
            del members[node_id]
            if not members:
                del self._by_kind[kind]
            self._g.remove_node(node_id)
            removed += 1
        self._drop_zero_counts()
        return removed

    def has_node(self, node_id: str) -> bool:
        """Return whether the node exists."""
        return node_id in self._g._node

    def node_kind(self, node_id: str) -> str:
        """Return the kind of a node."""
        return self._node_data(node_id)["kind"]

    def node_attrs(self, node_id: str) -> dict[str, Any]:
        """Return a copy of a node's attributes (without its kind)."""
        data = self._node_data(node_id)
        return {k: v for k, v in data.items() if k != "kind"}

    def nodes(self, kind: str | None = None) -> list[str]:
        """Return node ids in insertion order, optionally only those of one kind."""
        if kind is None:
            return list(self._g._node)
        return list(self._by_kind.get(kind, ()))

    def num_nodes(self, kind: str | None = None) -> int:
        """Return the number of nodes, optionally only those of one kind."""
        if kind is None:
            return len(self._g._node)
        return len(self._by_kind.get(kind, ()))

    def node_kinds(self) -> list[str]:
        """Return the node kinds present, sorted."""
        return sorted(self._by_kind)

    def add_edge(
        self, u: str, v: str, kind: str, weight: float | None = None, **attrs: Any
    ) -> None:
        """Add an edge of a kind between two existing nodes, or update it.

        An existing edge of this kind gets its weight replaced (when given) and
        ``attrs`` merged.

        Raises:
            KeyError: If an endpoint does not exist.
            ValueError: If ``u == v``.
        """
        if u == v:
            raise ValueError(f"self-loops are not allowed (node {u!r}, kind {kind!r})")
        self.add_edges([(u, v, weight)], kind)
        if attrs:
            self._g._adj[u][v][kind].update(attrs)

    def add_edges(
        self,
        pairs_or_triples: Iterable[tuple[str, str] | tuple[str, str, float | None]],
        kind: str,
    ) -> int:
        """Add many edges of one kind, each ``(u, v)`` or ``(u, v, weight)``.

        An existing edge gets its weight replaced (when given); self-loops are
        skipped. Writes the adjacency dicts directly, like networkx's
        ``add_edges_from`` without its per-edge overhead.

        Returns:
            The number of edges that were new.

        Raises:
            KeyError: If an endpoint does not exist (edges before it are kept).
        """
        _check_kind(kind, "edge")
        adj = self._g._adj
        added = 0
        loops = 0
        try:
            for item in pairs_or_triples:
                u, v = item[0], item[1]
                weight = item[2] if len(item) > 2 else None
                try:
                    nbrs_u = adj[u]
                    nbrs_v = adj[v]
                except KeyError as exc:
                    raise KeyError(
                        f"cannot add {kind!r} edge ({u!r}, {v!r}): unknown node {exc.args[0]!r}"
                    ) from None
                if u == v:
                    loops += 1
                    continue
                keydict = nbrs_u.get(v)
                if keydict is None:
                    keydict = {}
                    nbrs_u[v] = keydict
                    nbrs_v[u] = keydict
                data = keydict.get(kind)
                # float(): numpy scalars become plain floats, which JSON can write.
                if data is None:
                    keydict[kind] = {} if weight is None else {"weight": float(weight)}
                    added += 1
                elif weight is not None:
                    data["weight"] = float(weight)
        finally:
            if added:
                self._edge_counts[kind] += added
            self._clear_nx_cache()
        if loops:
            logger.debug("add_edges(%r): skipped %d self-loop(s)", kind, loops)
        return added

    def remove_edges(self, kind: str | None = None) -> int:
        """Remove every edge of one kind, or every edge (an index re-linking its nodes).

        Returns:
            The number of edges removed.
        """
        adj = self._g._adj
        if kind is None:
            removed = sum(self._edge_counts.values())
            for nbrs in adj.values():
                nbrs.clear()
            self._edge_counts.clear()
            self._clear_nx_cache()
            return removed
        removed = 0
        for u, v, k in list(self._g.edges(keys=True)):
            if k != kind:
                continue
            keydict = adj[u][v]
            del keydict[k]
            removed += 1
            if not keydict:
                del adj[u][v]
                del adj[v][u]
        self._edge_counts.pop(kind, None)
        self._clear_nx_cache()
        return removed

    def edge_attrs(self, u: str, v: str, kind: str) -> dict[str, Any]:
        """Return a copy of an edge's attributes (without kind and weight)."""
        try:
            data = self._g._adj[u][v][kind]
        except KeyError:
            raise KeyError(f"no {kind!r} edge between {u!r} and {v!r}") from None
        return {k: x for k, x in data.items() if k != "weight"}

    def edges(self) -> Iterator[tuple[str, str, str, float | None]]:
        """Iterate over edges as ``(u, v, kind, weight)``, each edge once."""
        for u, v, k, data in self._g.edges(keys=True, data=True):
            yield u, v, k, data.get("weight")

    def edges_with_attrs(
        self,
    ) -> Iterator[tuple[str, str, str, float | None, dict[str, Any]]]:
        """Like `edges`, with each edge's attributes (a copy, without weight) last."""
        for u, v, k, data in self._g.edges(keys=True, data=True):
            yield u, v, k, data.get("weight"), {a: x for a, x in data.items() if a != "weight"}

    def num_edges(self, kind: str | None = None) -> int:
        """Return the number of edges, optionally only those of one kind."""
        if kind is None:
            return sum(self._edge_counts.values())
        return self._edge_counts.get(kind, 0)

    def edge_kind_names(self) -> list[str]:
        """Return the edge kinds present, sorted."""
        return sorted(self._edge_counts)

    def neighbors(self, node_id: str, edge_kind: str | None = None) -> list[str]:
        """Return the neighbours of a node (only along ``edge_kind`` edges if given), each once."""
        nbrs = self._adjacency(node_id)
        if edge_kind is None:
            return list(nbrs)
        return [v for v, keydict in nbrs.items() if edge_kind in keydict]

    def incident(self, node_id: str) -> list[tuple[str, str, float | None]]:
        """Return the edges at a node as ``(neighbour, edge_kind, weight)``, one per kind."""
        return [
            (v, k, data.get("weight"))
            for v, keydict in self._adjacency(node_id).items()
            for k, data in keydict.items()
        ]

    def degree(self, node_id: str) -> int:
        """Return the number of distinct neighbours."""
        return len(self._adjacency(node_id))

    def stats(self) -> dict[str, Any]:
        """Return ``{"nodes", "edges", "node_kinds": {kind: n}, "edge_kinds": {kind: n}}``."""
        return {
            "nodes": self.num_nodes(),
            "edges": self.num_edges(),
            "node_kinds": {k: len(self._by_kind[k]) for k in sorted(self._by_kind)},
            "edge_kinds": {k: self._edge_counts[k] for k in sorted(self._edge_counts)},
        }

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._g._node

    def __repr__(self) -> str:
        return f"TypedGraph(nodes={self.num_nodes()}, edges={self.num_edges()})"

    def _node_data(self, node_id: str) -> dict[str, Any]:
        try:
            return self._g._node[node_id]
        except KeyError:
            raise KeyError(f"unknown node {node_id!r}") from None

    def _adjacency(self, node_id: str) -> dict[str, dict[str, dict[str, Any]]]:
        try:
            return self._g._adj[node_id]
        except KeyError:
            raise KeyError(f"unknown node {node_id!r}") from None

    def _drop_zero_counts(self) -> None:
        for k in [k for k, c in self._edge_counts.items() if c <= 0]:
            del self._edge_counts[k]

    def _clear_nx_cache(self) -> None:
        # networkx >= 3.3 caches converted backends on the graph; direct dict
        # writes bypass its invalidation, so clear it by hand.
        clear = getattr(nx, "_clear_cache", None)
        if clear is not None:
            clear(self._g)
