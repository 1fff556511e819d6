"""Typed, undirected graph shared by every method's index.

`TypedGraph` wraps a `networkx.MultiGraph`. Every node has a *kind* (``"chunk"``,
``"query"``, ``"unit"``, ``"entity"``, ``"sentence"``, ...) and every edge has a
kind (``"inter"``, ``"intra"``, ``"EC"``, ``"SS"``, ``"SA"``, ...) and an optional
float weight. Nodes and edges may carry small JSON-serialisable attributes.

Why a multigraph: several methods link the same pair of nodes in more than one
way (ChainRAG joins two sentences by an entity co-occurrence edge *and* a
semantic-similarity edge), so the edge kind is the multigraph key. There is at
most one edge of a given kind between two nodes; adding it again updates it.

Storage layout (what `to_networkx` hands out, in a copy)::

    G.nodes[node_id]          == {"kind": node_kind, **node_attrs}
    G[u][v][edge_kind]        == {"weight": w, **edge_attrs}   # "weight" only if set

Thread-safety: every read method (`neighbors`, `k_hop`, `edges`, `nodes`,
`stats`, `to_dict`, ...) only reads plain dicts and keeps its state in local
variables, so any number of threads may read at once while no writer runs.
Writers (`add_*`, `remove_*`, `meta` edits) are not synchronised: the owner (an
index) must not run a writer concurrently with readers or other writers, for
example by guarding inserts with its own lock.

Example:
    >>> g = TypedGraph()
    >>> g.add_nodes(["s1", "s2"], "sentence")
    >>> g.add_edge("s1", "s2", "EC")
    >>> g.add_edge("s1", "s2", "SS", weight=0.83)
    >>> sorted(g.edge_kinds("s1", "s2"))
    ['EC', 'SS']
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import networkx as nx

logger = logging.getLogger(__name__)

FORMAT_NAME = "llama-index-graphrag-ext/typed-graph"
"""Value of the ``format`` field written by `TypedGraph.to_dict`."""

FORMAT_VERSION = 1
"""Version of the `TypedGraph.to_dict` layout; loading a newer one fails clearly."""

_GZIP_MAGIC = b"\x1f\x8b"


def _check_kind(kind: object, what: str) -> str:
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"{what} kind must be a non-empty string, got {kind!r}")
    return kind


def _check_id(node_id: object) -> str:
    if not isinstance(node_id, str):
        raise TypeError(f"node ids must be str, got {type(node_id).__name__}: {node_id!r}")
    return node_id


def _as_weight(weight: Any) -> float | None:
    # float() also turns numpy scalars into plain floats, which JSON can write.
    return None if weight is None else float(weight)


def _kind_set(edge_kind: str | Iterable[str] | None) -> frozenset[str] | None:
    if edge_kind is None:
        return None
    if isinstance(edge_kind, str):
        return frozenset((edge_kind,))
    return frozenset(edge_kind)


class TypedGraph:
    """Undirected graph with typed nodes and typed, optionally weighted edges.

    Node ids are strings. Each node has exactly one kind, fixed when it is first
    added. Each unordered pair of nodes has at most one edge per edge kind;
    different kinds between the same pair coexist. Self-loops are not allowed.

    Attributes:
        meta: Free-form, JSON-serialisable graph-level metadata (for example the
            parameters the graph was built with). Saved and loaded with the graph.
    """

    def __init__(self, meta: Mapping[str, Any] | None = None) -> None:
        """Create an empty graph.

        Args:
            meta: Optional graph-level metadata, copied.
        """
        self._g = nx.MultiGraph()
        # kind -> insertion-ordered set of node ids (dict keys), so that
        # `nodes(kind)` and `num_nodes(kind)` never scan the whole graph.
        self._by_kind: dict[str, dict[str, None]] = {}
        self._edge_counts: Counter[str] = Counter()
        self.meta: dict[str, Any] = dict(meta or {})

    # ------------------------------------------------------------------ nodes

    def add_node(self, node_id: str, kind: str, **attrs: Any) -> None:
        """Add a node, or merge attributes into an existing node of the same kind.

        Args:
            node_id: Node id.
            kind: Node kind, such as ``"chunk"`` or ``"entity"``.
            **attrs: JSON-serialisable attributes (``kind`` is reserved).

        Raises:
            ValueError: If the node exists with another kind.
        """
        _check_id(node_id)
        _check_kind(kind, "node")
        data = self._g._node.get(node_id)
        if data is not None:
            if data["kind"] != kind:
                raise ValueError(
                    f"node {node_id!r} already exists with kind {data['kind']!r}, not {kind!r}"
                )
            data.update(attrs)
            return
        self._g.add_node(node_id, kind=kind, **attrs)
        self._by_kind.setdefault(kind, {})[node_id] = None

    def add_nodes(
        self,
        ids: Iterable[str],
        kind: str,
        attrs_list: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> None:
        """Add many nodes of one kind.

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
                # per-node overhead); each node is complete before the next, so
                # an error part-way leaves the earlier nodes consistent.
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

        If the pair already has an edge of this kind, its weight is replaced when
        ``weight`` is given and ``attrs`` are merged into its attributes.

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
        _check_kind(kind, "edge")
        adj = self._g._adj
        if u not in adj or v not in adj:
            missing = u if u not in adj else v
            raise KeyError(f"cannot add {kind!r} edge: unknown node {missing!r}")
        if u == v:
            raise ValueError(f"self-loops are not allowed (node {u!r}, kind {kind!r})")
        keydict = adj[u].get(v)
        data = keydict.get(kind) if keydict is not None else None
        if data is None:
            self._g.add_edge(u, v, key=kind)
            data = self._g._adj[u][v][kind]
            self._edge_counts[kind] += 1
        if weight is not None:
            data["weight"] = _as_weight(weight)
        data.update(attrs)

    def add_edges(
        self,
        pairs_or_triples: Iterable[tuple[str, str] | tuple[str, str, float | None]],
        kind: str,
    ) -> int:
        """Add many edges of one kind (fast path for 100k+ edges).

        Each item is ``(u, v)`` or ``(u, v, weight)``. An edge that already
        exists gets its weight replaced (when one is given). Items with
        ``u == v`` are skipped and counted in a debug log line.

        This writes into the multigraph's adjacency dicts directly (as networkx's
        own ``add_edges_from`` does) and then clears networkx's cache.

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

    def remove_edges(
        self,
        kind: str | None = None,
        pairs: Iterable[tuple[str, str]] | None = None,
    ) -> int:
        """Remove edges by kind, by node pair, or both.

        Args:
            kind: Only remove edges of this kind; ``None`` means every kind.
            pairs: Only remove edges between these ``(u, v)`` pairs; ``None``
                means every pair. Pairs without such an edge are ignored.

        Returns:
            The number of edges removed.
        """
        adj = self._g._adj
        if pairs is None:
            if kind is None:
                removed = sum(self._edge_counts.values())
                for nbrs in adj.values():
                    nbrs.clear()
                self._edge_counts.clear()
                self._clear_nx_cache()
                return removed
            pairs = [(u, v) for u, v, k in self._g.edges(keys=True) if k == kind]
        removed = 0
        for u, v in pairs:
            keydict = adj.get(u, {}).get(v)
            if not keydict:
                continue
            kinds = list(keydict) if kind is None else ([kind] if kind in keydict else [])
            for k in kinds:
                del keydict[k]
                self._edge_counts[k] -= 1
                removed += 1
            if not keydict:
                del adj[u][v]
                del adj[v][u]
        self._drop_zero_counts()
        self._clear_nx_cache()
        return removed

    def has_edge(self, u: str, v: str, kind: str | None = None) -> bool:
        """Return whether ``u`` and ``v`` are linked (by an edge of ``kind`` if given)."""
        keydict = self._g._adj.get(u, {}).get(v)
        if not keydict:
            return False
        return kind is None or kind in keydict

    def edge_kinds(self, u: str, v: str) -> set[str]:
        """Return the kinds of the edges between ``u`` and ``v`` (empty if none).

        Raises:
            KeyError: If ``u`` or ``v`` does not exist.
        """
        adj = self._g._adj
        if v not in adj:
            raise KeyError(f"unknown node {v!r}")
        return set(self._adjacency(u).get(v, ()))

    def edge_weight(self, u: str, v: str, kind: str) -> float | None:
        """Return the weight of the ``kind`` edge between ``u`` and ``v``.

        Raises:
            KeyError: If there is no such edge.
        """
        return self._edge_data(u, v, kind).get("weight")

    def edge_attrs(self, u: str, v: str, kind: str) -> dict[str, Any]:
        """Return a copy of an edge's attributes (without kind and weight).

        Raises:
            KeyError: If there is no such edge.
        """
        return {k: x for k, x in self._edge_data(u, v, kind).items() if k != "weight"}

    def edges(self, kind: str | None = None) -> Iterator[tuple[str, str, str, float | None]]:
        """Iterate over edges as ``(u, v, kind, weight)``, each edge once.

        Args:
            kind: Only edges of this kind.
        """
        for u, v, k, data in self._g.edges(keys=True, data=True):
            if kind is None or k == kind:
                yield u, v, k, data.get("weight")

    def num_edges(self, kind: str | None = None) -> int:
        """Return the number of edges, optionally only those of one kind."""
        if kind is None:
            return sum(self._edge_counts.values())
        return self._edge_counts.get(kind, 0)

    def edge_kind_names(self) -> list[str]:
        """Return the edge kinds present, sorted."""
        return sorted(self._edge_counts)

    # -------------------------------------------------------------- traversal

    def neighbors(
        self,
        node_id: str,
        edge_kind: str | Iterable[str] | None = None,
        node_kind: str | None = None,
    ) -> list[str]:
        """Return the neighbours of a node (an adjacency lookup, no edge scan).

        Args:
            node_id: The node.
            edge_kind: Only follow edges of this kind (or of any of these kinds).
            node_kind: Only return neighbours of this kind.

        Returns:
            Neighbour ids, each once, in adjacency insertion order.

        Raises:
            KeyError: If the node does not exist.
        """
        nbrs = self._adjacency(node_id)
        kinds = _kind_set(edge_kind)
        if kinds is None and node_kind is None:
            return list(nbrs)
        nodes = self._g._node
        return [
            v
            for v, keydict in nbrs.items()
            if (kinds is None or not kinds.isdisjoint(keydict))
            and (node_kind is None or nodes[v]["kind"] == node_kind)
        ]

    def incident(
        self,
        node_id: str,
        edge_kind: str | Iterable[str] | None = None,
        node_kind: str | None = None,
    ) -> list[tuple[str, str, float | None]]:
        """Return the edges at a node as ``(neighbour, edge_kind, weight)``.

        Same filters as `neighbors`; a neighbour linked by two kinds appears twice.

        Raises:
            KeyError: If the node does not exist.
        """
        nbrs = self._adjacency(node_id)
        kinds = _kind_set(edge_kind)
        nodes = self._g._node
        out: list[tuple[str, str, float | None]] = []
        for v, keydict in nbrs.items():
            if node_kind is not None and nodes[v]["kind"] != node_kind:
                continue
            for k, data in keydict.items():
                if kinds is None or k in kinds:
                    out.append((v, k, data.get("weight")))
        return out

    def degree(self, node_id: str, edge_kind: str | Iterable[str] | None = None) -> int:
        """Return the number of distinct neighbours (via ``edge_kind`` if given).

        Raises:
            KeyError: If the node does not exist.
        """
        if edge_kind is None:
            return len(self._adjacency(node_id))
        return len(self.neighbors(node_id, edge_kind))

    def k_hop(
        self,
        sources: str | Iterable[str],
        h: int,
        edge_kind: str | Iterable[str] | None = None,
        node_kind: str | None = None,
    ) -> dict[str, int]:
        """Breadth-first hop distances from a set of source nodes.

        Args:
            sources: One node id or several; all are at distance 0.
            h: Maximum number of hops (0 returns only the sources).
            edge_kind: Only follow edges of this kind (or these kinds).
            node_kind: Only visit (and pass through) nodes of this kind; the
                sources are always included whatever their kind.

        Returns:
            Mapping node id -> hop distance, in BFS order.

        Raises:
            KeyError: If a source does not exist.
            ValueError: If ``h`` is negative.
        """
        if h < 0:
            raise ValueError(f"h must be >= 0, got {h}")
        if isinstance(sources, str):
            sources = [sources]
        adj = self._g._adj
        nodes = self._g._node
        kinds = _kind_set(edge_kind)
        dist: dict[str, int] = {}
        queue: deque[str] = deque()
        for s in sources:
            if s not in adj:
                raise KeyError(f"unknown source node {s!r}")
            if s not in dist:
                dist[s] = 0
                queue.append(s)
        while queue:
            u = queue.popleft()
            d = dist[u]
            if d >= h:
                continue
            for v, keydict in adj[u].items():
                if v in dist:
                    continue
                if kinds is not None and kinds.isdisjoint(keydict):
                    continue
                if node_kind is not None and nodes[v]["kind"] != node_kind:
                    continue
                dist[v] = d + 1
                queue.append(v)
        return dist

    # ------------------------------------------------------------ whole graph

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

    def subgraph(self, ids: Iterable[str]) -> TypedGraph:
        """Return a new graph induced by ``ids`` (unknown ids are ignored).

        Attribute dicts are copied; nested values are shared.
        """
        keep = {n: None for n in ids if n in self._g._node}
        sub = TypedGraph(meta=self.meta)
        for n in keep:
            data = self._g._node[n]
            sub._g.add_node(n, **data)
            sub._by_kind.setdefault(data["kind"], {})[n] = None
        sub_adj = sub._g._adj
        for u in keep:
            for v, keydict in self._g._adj[u].items():
                if v in keep and v not in sub_adj[u]:
                    copied = {k: dict(d) for k, d in keydict.items()}
                    sub_adj[u][v] = copied
                    sub_adj[v][u] = copied
                    sub._edge_counts.update(copied.keys())
        sub._clear_nx_cache()
        return sub

    def copy(self) -> TypedGraph:
        """Return an independent copy (attribute dicts copied, nested values shared)."""
        return self.subgraph(self._g._node)

    def to_networkx(self) -> nx.MultiGraph:
        """Return a plain ``networkx.MultiGraph`` copy for users and algorithms.

        Nodes carry ``kind`` and their attributes. Edges are keyed by their kind
        and carry ``kind``, ``weight`` (when set) and their attributes. Attribute
        dicts are copied; nested values are shared.
        """
        out = nx.MultiGraph()
        out.graph.update(self.meta)
        out.add_nodes_from((n, dict(d)) for n, d in self._g._node.items())
        out.add_edges_from(
            (u, v, k, {"kind": k, **d}) for u, v, k, d in self._g.edges(keys=True, data=True)
        )
        return out

    # ------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """Return a compact, JSON-ready representation.

        Layout (version 1)::

            {"format": ..., "version": 1, "meta": {...},
             "nodes": [id, ...],                 # every id once
             "node_kinds": [kind, ...],          # kind table
             "kinds": [[kind_index, run_length], ...],  # run-length per node
             "node_attrs": [[node_index, {...}], ...],  # only nodes with attrs
             "edges": {edge_kind: {"u": [i, ...], "v": [j, ...],
                                   "weight": [w or null, ...],      # if any weight
                                   "attrs": [[edge_pos, {...}], ...]}}}  # if any

        Attribute dicts are copied at the top level only.
        """
        node_ids = list(self._g._node)
        index = {n: i for i, n in enumerate(node_ids)}
        kind_table: dict[str, int] = {}
        runs: list[list[int]] = []
        node_attrs: list[list[Any]] = []
        for i, data in enumerate(self._g._node.values()):
            ki = kind_table.setdefault(data["kind"], len(kind_table))
            if runs and runs[-1][0] == ki:
                runs[-1][1] += 1
            else:
                runs.append([ki, 1])
            if len(data) > 1:
                node_attrs.append([i, {k: x for k, x in data.items() if k != "kind"}])
        edges: dict[str, dict[str, Any]] = {}
        for u, v, k, data in self._g.edges(keys=True, data=True):
            block = edges.get(k)
            if block is None:
                block = edges[k] = {"u": [], "v": [], "weight": [], "attrs": []}
            pos = len(block["u"])
            block["u"].append(index[u])
            block["v"].append(index[v])
            block["weight"].append(data.get("weight"))
            attrs = {a: x for a, x in data.items() if a != "weight"}
            if attrs:
                block["attrs"].append([pos, attrs])
        for block in edges.values():
            if all(w is None for w in block["weight"]):
                del block["weight"]
            if not block["attrs"]:
                del block["attrs"]
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "meta": dict(self.meta),
            "nodes": node_ids,
            "node_kinds": list(kind_table),
            "kinds": runs,
            "node_attrs": node_attrs,
            "edges": edges,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TypedGraph:
        """Rebuild a graph from `to_dict` output.

        Raises:
            ValueError: If the format is unknown, the version newer than this
                code, or the arrays are inconsistent.
        """
        if d.get("format") != FORMAT_NAME:
            raise ValueError(f"not a typed graph (format {d.get('format')!r})")
        version = d.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ValueError(
                f"typed graph format version {version!r} is not supported "
                f"(this code reads up to {FORMAT_VERSION}); upgrade llama-index-graphrag-ext"
            )
        graph = cls(meta=d.get("meta") or {})
        node_ids: list[str] = list(d["nodes"])
        kind_table: list[str] = list(d["node_kinds"])
        kinds: list[str] = []
        for ki, run in d["kinds"]:
            kinds.extend([kind_table[ki]] * run)
        if len(kinds) != len(node_ids):
            raise ValueError(f"corrupt graph: {len(kinds)} node kinds for {len(node_ids)} nodes")
        data_list: list[dict[str, Any]] = [{"kind": k} for k in kinds]
        for i, attrs in d.get("node_attrs", ()):
            data_list[i].update(attrs)
        if len(set(node_ids)) != len(node_ids):
            raise ValueError("corrupt graph: duplicate node ids")
        nodes, adj, by_kind = graph._g._node, graph._g._adj, graph._by_kind
        for n, data in zip(node_ids, data_list, strict=True):
            nodes[n] = data
            adj[n] = {}
            by_kind.setdefault(data["kind"], {})[n] = None
        for kind, block in d.get("edges", {}).items():
            us, vs = block["u"], block["v"]
            weights = block.get("weight")
            if len(us) != len(vs) or (weights is not None and len(weights) != len(us)):
                raise ValueError(f"corrupt graph: edge arrays of kind {kind!r} differ in length")
            if weights is None:
                triples: Iterable[tuple[str, str, float | None]] = (
                    (node_ids[i], node_ids[j], None) for i, j in zip(us, vs, strict=True)
                )
            else:
                triples = (
                    (node_ids[i], node_ids[j], w) for i, j, w in zip(us, vs, weights, strict=True)
                )
            graph.add_edges(triples, kind)
            adj = graph._g._adj
            for pos, attrs in block.get("attrs", ()):
                adj[node_ids[us[pos]]][node_ids[vs[pos]]][kind].update(attrs)
        return graph

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the graph to one JSON file (gzip-compressed if the name ends in ``.gz``).

        The file is written in place; atomic directory writes are the caller's
        job (see ``core.persist``).

        Raises:
            TypeError: If an attribute is not JSON-serialisable.
        """
        path = Path(path)
        try:
            text = json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))
        except TypeError as exc:
            raise TypeError(f"graph attributes must be JSON-serialisable: {exc}") from exc
        raw = text.encode("utf-8", errors="surrogatepass")
        if path.name.endswith(".gz"):
            # No name and mtime=0 keep the output byte-identical for identical graphs.
            with (
                open(path, "wb") as fh,
                gzip.GzipFile(filename="", fileobj=fh, mode="wb", mtime=0) as gz,
            ):
                gz.write(raw)
        else:
            path.write_bytes(raw)
        logger.debug(
            "saved graph (%d nodes, %d edges) to %s", self.num_nodes(), self.num_edges(), path
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TypedGraph:
        """Read a graph written by `save` (gzip is detected from the content).

        Raises:
            FileNotFoundError: If the file does not exist.
            ValueError: If the file is not a typed graph of a supported version.
        """
        raw = Path(path).read_bytes()
        if raw[:2] == _GZIP_MAGIC:
            raw = gzip.decompress(raw)
        try:
            d = json.loads(raw.decode("utf-8", errors="surrogatepass"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not a JSON typed graph ({exc})") from exc
        return cls.from_dict(d)

    # ---------------------------------------------------------------- helpers

    def __len__(self) -> int:
        return len(self._g._node)

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

    def _edge_data(self, u: str, v: str, kind: str) -> dict[str, Any]:
        try:
            return self._g._adj[u][v][kind]
        except KeyError:
            raise KeyError(f"no {kind!r} edge between {u!r} and {v!r}") from None

    def _drop_zero_counts(self) -> None:
        for k in [k for k, c in self._edge_counts.items() if c <= 0]:
            del self._edge_counts[k]

    def _clear_nx_cache(self) -> None:
        clear = getattr(nx, "_clear_cache", None)
        if clear is not None:
            clear(self._g)
