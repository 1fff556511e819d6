"""The typed graph every index hands to the viewer, the exporters and its persisted folder.

`TypedGraph` is the suite's *export model*: each method retrieves from its own
compact structures (arrays, sparse matrices, `QueryLayer`, `SentenceGraph`, ...)
and builds a `TypedGraph` of them on demand, for ``graphrag-ext viz``
(`core.viz`) and ``graph.json.gz`` (`core.graph_format`). So the class offers
what builders and those readers need (bulk adds, adjacency lookups, counts by
kind) and no graph algorithms: export to GraphML and use networkx for those.

Every node has a *kind* (``"chunk"``, ``"entity"``, ``"sentence"``, ...) and
every edge a kind (``"EC"``, ``"SS"``, ``"member"``, ...) and an optional float
weight; both may carry small JSON-serialisable attributes. Why a multigraph:
several methods link one pair of nodes in more than one way (ChainRAG joins two
sentences by entity co-occurrence *and* similarity), so the edge kind is the
multigraph key. A pair has at most one edge per kind; adding it again updates it.

Storage layout (a `networkx.MultiGraph`)::

    G.nodes[node_id]          == {"kind": node_kind, **node_attrs}
    G[u][v][edge_kind]        == {"weight": w, **edge_attrs}   # "weight" only if set

Thread-safety: read methods only read plain dicts, so any number of threads may
read at once while no writer runs. Writers (`add_*`, `remove_*`, `meta` edits)
are not synchronised: the owner builds the graph before handing it out.

Example:
    >>> g = TypedGraph()
    >>> g.add_nodes(["s1", "s2"], "sentence")
    >>> g.add_edges([("s1", "s2"), ("s2", "s1")], "EC")  # undirected: one edge
    1
    >>> g.neighbors("s1", "EC")
    ['s2']
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

    Node ids are strings. Each node has exactly one kind, fixed when it is first
    added. Each unordered pair of nodes has at most one edge per edge kind;
    different kinds between the same pair coexist. Self-loops are not allowed.

    Attributes:
        meta: Free-form, JSON-serialisable graph-level metadata (for example the
            parameters the graph was built with). Saved and loaded with the graph.
    """

    def __init__(self, meta: Mapping[str, Any] | None = None) -> None:
        """Create an empty graph with optional graph-level metadata (copied)."""
        self._g = nx.MultiGraph()
        # kind -> insertion-ordered set of node ids (dict keys), so that
        # `nodes(kind)` and `num_nodes(kind)` never scan the whole graph.
        self._by_kind: dict[str, dict[str, None]] = {}
        self._edge_counts: Counter[str] = Counter()
        self.meta: dict[str, Any] = dict(meta or {})

    # ------------------------------------------------------------------ nodes

    def add_node(self, node_id: str, kind: str, **attrs: Any) -> None:
        """Add a node, or merge attributes into an existing node of the same kind.

        One at a time, for small hand-made graphs; builders call `add_nodes`.

        Args:
            node_id: Node id.
            kind: Node kind, such as ``"chunk"`` or ``"entity"``.
            **attrs: JSON-serialisable attributes (``kind`` is reserved).

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
        """Add many nodes of one kind (what index builders call).

        Existing nodes of the same kind get their attributes merged.

        Args:
            ids: Node ids.
            kind: Kind of every node.
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
                # Direct writes (what networkx's add_nodes_from does, minus its
                # per-node overhead: indexes add 100k+ nodes); each node is
                # complete before the next, so an error part-way leaves the
                # earlier nodes consistent.
                nodes[node_id] = {"kind": kind, **attrs} if attrs else {"kind": kind}
                adj[node_id] = {}
                members[node_id] = None
        finally:
            if not members:
                del self._by_kind[kind]
            self._clear_nx_cache()

    def remove_nodes(self, ids: Iterable[str]) -> int:
        """Remove nodes and every edge incident to them.

        Args:
            ids: Node ids; unknown ids are ignored.

        Returns:
            The number of nodes removed.
        """
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
        """Return the kind of a node.

        Raises:
            KeyError: If the node does not exist.
        """
        return self._node_data(node_id)["kind"]

    def node_attrs(self, node_id: str) -> dict[str, Any]:
        """Return a copy of a node's attributes (without its kind).

        Raises:
            KeyError: If the node does not exist.
        """
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

    # ------------------------------------------------------------------ edges

    def add_edge(
        self, u: str, v: str, kind: str, weight: float | None = None, **attrs: Any
    ) -> None:
        """Add an edge of a kind between two existing nodes, or update it.

        One at a time, for small hand-made graphs and edge attributes; builders
        call `add_edges`. If the pair already has an edge of this kind, its
        weight is replaced when given and ``attrs`` are merged into its attributes.

        Args:
            u: One endpoint.
            v: Other endpoint.
            kind: Edge kind, such as ``"EC"`` or ``"SS"``.
            weight: Optional weight (stored as a Python float).
            **attrs: JSON-serialisable attributes (``weight`` is a parameter).

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
        """Add many edges of one kind (what index builders call; fast for 100k+ edges).

        Each item is ``(u, v)`` or ``(u, v, weight)``. An edge that already
        exists gets its weight replaced (when one is given). Items with
        ``u == v`` are skipped and counted in a debug log line.

        This writes into the multigraph's adjacency dicts directly (as networkx's
        own ``add_edges_from`` does, without its per-edge overhead) and then
        clears networkx's cache.

        Args:
            pairs_or_triples: Edge tuples; endpoints must exist.
            kind: Kind of every edge.

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
                # float() also turns numpy scalars into plain floats, which JSON can write.
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
        """Return a copy of an edge's attributes (without kind and weight).

        Raises:
            KeyError: If there is no such edge.
        """
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
        """Like `edges`, with each edge's attributes (a copy, without weight) last.

        One pass for writers of whole graphs (`graph_format`), instead of an
        `edge_attrs` lookup per edge.
        """
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

    # -------------------------------------------------------------- adjacency

    def neighbors(self, node_id: str, edge_kind: str | None = None) -> list[str]:
        """Return the neighbours of a node (an adjacency lookup, no edge scan).

        Args:
            node_id: The node.
            edge_kind: Only follow edges of this kind.

        Returns:
            Neighbour ids, each once, in adjacency insertion order.

        Raises:
            KeyError: If the node does not exist.
        """
        nbrs = self._adjacency(node_id)
        if edge_kind is None:
            return list(nbrs)
        return [v for v, keydict in nbrs.items() if edge_kind in keydict]

    def incident(self, node_id: str) -> list[tuple[str, str, float | None]]:
        """Return the edges at a node as ``(neighbour, edge_kind, weight)``.

        A neighbour linked by two kinds appears twice.

        Raises:
            KeyError: If the node does not exist.
        """
        return [
            (v, k, data.get("weight"))
            for v, keydict in self._adjacency(node_id).items()
            for k, data in keydict.items()
        ]

    def degree(self, node_id: str) -> int:
        """Return the number of distinct neighbours.

        Raises:
            KeyError: If the node does not exist.
        """
        return len(self._adjacency(node_id))

    def stats(self) -> dict[str, Any]:
        """Return node and edge counts, in total and by kind.

        Returns:
            ``{"nodes": int, "edges": int, "node_kinds": {kind: n},
            "edge_kinds": {kind: n}}`` with kinds sorted.
        """
        return {
            "nodes": self.num_nodes(),
            "edges": self.num_edges(),
            "node_kinds": {k: len(self._by_kind[k]) for k in sorted(self._by_kind)},
            "edge_kinds": {k: self._edge_counts[k] for k in sorted(self._edge_counts)},
        }

    # ---------------------------------------------------------------- helpers

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
