"""GraphML export through ``networkx.write_graphml``: scalar attributes, one type per name."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import networkx as nx

from ..graph import TypedGraph
from .selection import ExportSummary, clean, neighbourhood, node_label, shown_edges

logger = logging.getLogger(__name__)

__all__ = ["export_graphml"]


def _scalar(value: Any) -> str | int | float | bool | None:
    """Map an attribute value to a GraphML scalar (``None`` means drop it)."""
    if value is None:
        return None
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:
        value = value.item()  # numpy scalar
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, bool | int | float):
        return value
    return clean(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))


def _harmonise(records: list[dict[str, Any]], fixed: Iterable[str] = ()) -> None:
    """Give each attribute one GraphML type across records, in place.

    GraphML declares one type per attribute name: ints mixed with floats become
    floats; any other mixture becomes strings.
    """
    types: dict[str, set[type]] = {}
    for rec in records:
        for key, value in rec.items():
            types.setdefault(key, set()).add(type(value))
    fixed = set(fixed)
    for key, seen in types.items():
        if len(seen) < 2 or key in fixed:
            continue
        if seen <= {int, float}:
            convert: Any = float
        else:

            def convert(x: Any) -> str:
                return json.dumps(x) if isinstance(x, bool) else str(x)

        for rec in records:
            if key in rec:
                rec[key] = convert(rec[key])


def export_graphml(
    graph: TypedGraph,
    path: str | os.PathLike[str],
    *,
    max_nodes: int | None = None,
    center: str | Iterable[str] | None = None,
) -> ExportSummary:
    """Write the graph (or a capped neighbourhood of it) as GraphML.

    Nodes carry ``kind``, ``label`` and their attributes, edges ``kind``,
    ``weight`` and theirs; non-scalar values become JSON strings. Edge ids are
    unique, so parallel edges of different kinds survive
    (``networkx.read_graphml(path, force_multigraph=True)`` reads it back).
    ``max_nodes`` and ``center`` cap it as `neighbourhood` does.
    """
    path = Path(path)
    shown = neighbourhood(graph, max_nodes, center)
    edges = shown_edges(graph, shown)

    node_records: list[dict[str, Any]] = []
    for n in shown:
        rec: dict[str, Any] = {}
        for key, value in graph.node_attrs(n).items():
            scalar = _scalar(value)
            if scalar is not None and key != "label":
                rec[clean(key)] = scalar
        rec["kind"] = clean(graph.node_kind(n))
        rec["label"] = node_label(graph, n)
        node_records.append(rec)
    edge_records: list[dict[str, Any]] = []
    for u, v, kind, weight in edges:
        rec = {}
        for key, value in graph.edge_attrs(u, v, kind).items():
            scalar = _scalar(value)
            if scalar is not None:
                rec[clean(key)] = scalar
        rec["kind"] = clean(kind)
        if weight is not None:
            rec["weight"] = float(weight)
        edge_records.append(rec)
    _harmonise(node_records, fixed=("kind", "label"))
    _harmonise(edge_records, fixed=("kind", "weight"))

    out = nx.MultiGraph()
    summary = ExportSummary(
        path, "graphml", len(shown), graph.num_nodes(), len(edges), graph.num_edges()
    )
    out.graph.update(
        nodes_shown=summary.nodes_shown,
        nodes_total=summary.nodes_total,
        edges_shown=summary.edges_shown,
        edges_total=summary.edges_total,
    )
    if center is not None:
        centres = [center] if isinstance(center, str) else list(center)
        out.graph["center"] = clean(json.dumps(centres, ensure_ascii=False))
    for n, rec in zip(shown, node_records, strict=True):
        out.add_node(clean(n), **rec)
    for j, ((u, v, _, _), rec) in enumerate(zip(edges, edge_records, strict=True)):
        # Explicit keys become the GraphML edge ids: unique, which Gephi needs.
        out.add_edge(clean(u), clean(v), key=f"e{j}", **rec)
    path.parent.mkdir(parents=True, exist_ok=True)
    nx.write_graphml(out, str(path))
    logger.info("%s to %s", summary.caption, path)
    return summary
