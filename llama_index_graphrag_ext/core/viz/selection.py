"""What an export shows: a capped, readable neighbourhood, its edges, and node labels.

Both exporters (`.graphml` and `.viewer`) draw the same selection, so a GraphML
file and an HTML page made with the same cap and centre show the same nodes.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..graph import TypedGraph

__all__ = ["ExportSummary", "clean", "neighbourhood", "node_label", "shown_edges"]

# Characters XML 1.0 forbids (and lone surrogates, which UTF-8 cannot encode).
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote (``format``: ``"graphml"`` or ``"html"``; counts shown and total)."""

    path: Path
    format: str
    nodes_shown: int
    nodes_total: int
    edges_shown: int
    edges_total: int

    @property
    def caption(self) -> str:
        """One line such as ``"Showing 300 of 5,000 nodes and 812 of 40,000 edges"``."""
        return (
            f"Showing {self.nodes_shown:,} of {self.nodes_total:,} nodes and "
            f"{self.edges_shown:,} of {self.edges_total:,} edges"
        )


def neighbourhood(
    graph: TypedGraph,
    max_nodes: int | None,
    center: str | Iterable[str] | None = None,
) -> list[str]:
    """Choose at most ``max_nodes`` nodes that form a readable neighbourhood.

    A breadth-first search from the ``center`` nodes, or else from the
    highest-degree node (restarting from the next one when a component is
    exhausted); each node adds at most ``max(8, max_nodes // 12)`` neighbours,
    chunks first, then by decreasing degree and id, so a hub's leaves do not
    fill the view and the result is deterministic. Returns node ids in the
    order reached.

    Raises:
        KeyError: If a centre node does not exist.
        ValueError: If ``max_nodes`` is below 1 or ``center`` is empty.
    """
    if max_nodes is not None and max_nodes < 1:
        raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
    total = graph.num_nodes()
    limit = total if max_nodes is None else min(max_nodes, total)

    def by_degree(ids: Iterable[str]) -> list[str]:
        # Chunks first (what a reader came to see), then the best connected; a node adds
        # at most `fanout` neighbours, so one hub and its leaves never fill the view.
        ranked = sorted(ids, key=lambda n: (graph.node_kind(n) != "chunk", -graph.degree(n), n))
        return ranked[:fanout]

    fanout = max(8, limit // 12)

    if center is not None:
        seeds = list(dict.fromkeys([center] if isinstance(center, str) else center))
        if not seeds:
            raise ValueError("center is empty")
        missing = [c for c in seeds if not graph.has_node(c)]
        if missing:
            raise KeyError(f"unknown center node(s): {', '.join(map(repr, missing[:5]))}")
        visited = dict.fromkeys(seeds[:limit])
        _bfs_fill(graph, deque(visited), visited, limit, by_degree)
        return list(visited)
    if limit >= total:
        return graph.nodes()
    visited: dict[str, None] = {}
    for seed in sorted(graph.nodes(), key=lambda n: (-graph.degree(n), n)):
        if len(visited) >= limit:
            break
        if seed not in visited:
            visited[seed] = None
            _bfs_fill(graph, deque([seed]), visited, limit, by_degree)
    return list(visited)


def _bfs_fill(
    graph: TypedGraph,
    queue: deque[str],
    visited: dict[str, None],
    limit: int,
    by_degree: Callable[[Iterable[str]], list[str]],
) -> None:
    """Extend ``visited`` breadth-first from ``queue`` until it holds ``limit`` nodes."""
    while queue and len(visited) < limit:
        for v in by_degree(graph.neighbors(queue.popleft())):
            if v not in visited:
                visited[v] = None
                if len(visited) >= limit:
                    return
                queue.append(v)


def shown_edges(
    graph: TypedGraph, shown: Sequence[str]
) -> list[tuple[str, str, str, float | None]]:
    """Edges of the subgraph induced by ``shown``, each once, in a stable order."""
    index = {n: i for i, n in enumerate(shown)}
    out = []
    for i, u in enumerate(shown):
        for v, kind, weight in graph.incident(u):
            j = index.get(v)
            if j is not None and j > i:
                out.append((u, v, kind, weight))
    return out


def clean(text: str) -> str:
    """Replace characters that XML (and hence GraphML and SVG) cannot carry."""
    return _ILLEGAL_XML.sub("\ufffd", text)


def _truncate(text: str, limit: int) -> str:
    text = _WHITESPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def node_label(graph: TypedGraph, node_id: str, limit: int = 80) -> str:
    """The node's ``name``, ``label`` or ``text`` attribute, collapsed and truncated to
    ``limit``; else its id. ``name`` comes first: an entity's ``label`` is its type."""
    attrs = graph.node_attrs(node_id)
    for key in ("name", "label", "text"):
        value = attrs.get(key)
        if value is not None and str(value).strip():
            return clean(_truncate(str(value), limit))
    return clean(node_id)
