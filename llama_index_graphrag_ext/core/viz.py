"""Seeing a `TypedGraph`: GraphML for Gephi and a self-contained HTML viewer.

``graphrag-ext viz INDEX_DIR --out FILE`` calls `export`, which picks the
format from the file suffix:

- ``.graphml``: `export_graphml`, for Gephi, Cytoscape or ``networkx.read_graphml``.
- ``.html`` / ``.htm``: `export_html`, one offline file (inline SVG, CSS and a
  small vanilla script; no CDN, no external font or stylesheet) with pan, zoom,
  hover tooltips, neighbour highlighting and a legend per node and edge kind.

Large graphs are capped to a readable neighbourhood by `neighbourhood`, and
both formats record how many nodes and edges were shown out of the total.
"""

from __future__ import annotations

import html
import json
import logging
import math
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from llama_index_graphrag_ext.core.graph import TypedGraph

logger = logging.getLogger(__name__)

__all__ = [
    "ExportSummary",
    "export",
    "export_graphml",
    "export_html",
    "export_index",
    "neighbourhood",
    "node_label",
]

# Characters XML 1.0 forbids (and lone surrogates, which UTF-8 cannot encode).
_ILLEGAL_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_WHITESPACE = re.compile(r"\s+")

# Tableau-10 fills for node kinds, assigned in sorted kind order.
_NODE_COLOURS = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
# (stroke colour, dash pattern) for edge kinds, assigned in sorted kind order.
_EDGE_STYLES = (
    ("#7f7f7f", ""),
    ("#d62728", "6 3"),
    ("#1f77b4", "2 3"),
    ("#2ca02c", "8 3 2 3"),
    ("#9467bd", ""),
    ("#8c564b", "6 3"),
    ("#e377c2", "2 3"),
    ("#17becf", "8 3 2 3"),
)

_VIEW_W, _VIEW_H, _MARGIN = 1000.0, 700.0, 40.0
_HTML_WARN_NODES = 2000


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote.

    Attributes:
        path: The file written.
        format: ``"graphml"`` or ``"html"``.
        nodes_shown: Nodes in the file.
        nodes_total: Nodes in the graph.
        edges_shown: Edges in the file.
        edges_total: Edges in the graph.
    """

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


# ----------------------------------------------------------------- selection


def neighbourhood(
    graph: TypedGraph,
    max_nodes: int | None,
    center: str | Iterable[str] | None = None,
) -> list[str]:
    """Choose at most ``max_nodes`` nodes that form a readable neighbourhood.

    With ``center``, a breadth-first search runs out from the centre nodes (all
    at distance 0) until ``max_nodes`` nodes are reached or their components are
    exhausted. Without it, the search starts at the highest-degree node and,
    when a component is exhausted, restarts from the next highest-degree node
    not yet reached. Within a BFS level, neighbours are taken by decreasing
    degree, ties broken by id, so the result is deterministic.

    Args:
        graph: The graph.
        max_nodes: Cap on the number of nodes; ``None`` for no cap.
        center: Optional node id or ids to centre on.

    Returns:
        Node ids in the order they were reached.

    Raises:
        KeyError: If a centre node does not exist.
        ValueError: If ``max_nodes`` is below 1 or ``center`` is empty.
    """
    if max_nodes is not None and max_nodes < 1:
        raise ValueError(f"max_nodes must be >= 1, got {max_nodes}")
    total = graph.num_nodes()
    limit = total if max_nodes is None else min(max_nodes, total)

    def by_degree(ids: Iterable[str]) -> list[str]:
        return sorted(ids, key=lambda n: (-graph.degree(n), n))

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
    for seed in by_degree(graph.nodes()):
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


def _shown_edges(
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


# ------------------------------------------------------------------ strings


def _clean(text: str) -> str:
    """Replace characters that XML (and hence GraphML and SVG) cannot carry."""
    return _ILLEGAL_XML.sub("\ufffd", text)


def _truncate(text: str, limit: int) -> str:
    text = _WHITESPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "\u2026"


def node_label(graph: TypedGraph, node_id: str, limit: int = 80) -> str:
    """Return a short display label for a node.

    The node's ``label`` attribute, else its ``text`` attribute, whitespace
    collapsed and truncated to ``limit`` characters (with an ellipsis); else
    its id.
    """
    attrs = graph.node_attrs(node_id)
    for key in ("label", "text"):
        value = attrs.get(key)
        if value is not None and str(value).strip():
            return _clean(_truncate(str(value), limit))
    return _clean(node_id)


def _esc(text: Any) -> str:
    return html.escape(_clean(str(text)), quote=True)


# ------------------------------------------------------------------- GraphML


def _scalar(value: Any) -> str | int | float | bool | None:
    """Map an attribute value to a GraphML scalar (``None`` means drop it)."""
    if value is None:
        return None
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:
        value = value.item()  # numpy scalar
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, bool | int | float):
        return value
    return _clean(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))


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

    Nodes carry ``kind``, ``label`` (see `node_label`) and their other
    attributes; edges carry ``kind``, ``weight`` (when set) and their
    attributes. Non-scalar values are JSON strings, since GraphML only holds
    scalars. The graph is written as an undirected multigraph whose edge ids
    are unique (``e0``, ``e1``, ...), so parallel edges of different kinds
    survive; the graph element records ``nodes_shown``, ``nodes_total``,
    ``edges_shown`` and ``edges_total``.

    Args:
        graph: The graph.
        path: Output file.
        max_nodes: Cap on nodes (see `neighbourhood`); ``None`` writes all.
        center: Optional node id(s) to centre the cap on.

    Returns:
        What was written.
    """
    path = Path(path)
    shown = neighbourhood(graph, max_nodes, center)
    edges = _shown_edges(graph, shown)

    node_records: list[dict[str, Any]] = []
    for n in shown:
        rec: dict[str, Any] = {}
        for key, value in graph.node_attrs(n).items():
            scalar = _scalar(value)
            if scalar is not None and key != "label":
                rec[_clean(key)] = scalar
        rec["kind"] = _clean(graph.node_kind(n))
        rec["label"] = node_label(graph, n)
        node_records.append(rec)
    edge_records: list[dict[str, Any]] = []
    for u, v, kind, weight in edges:
        rec = {}
        for key, value in graph.edge_attrs(u, v, kind).items():
            scalar = _scalar(value)
            if scalar is not None:
                rec[_clean(key)] = scalar
        rec["kind"] = _clean(kind)
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
        out.graph["center"] = _clean(json.dumps(centres, ensure_ascii=False))
    for n, rec in zip(shown, node_records, strict=True):
        out.add_node(_clean(n), **rec)
    for j, ((u, v, _, _), rec) in enumerate(zip(edges, edge_records, strict=True)):
        out.add_edge(_clean(u), _clean(v), key=f"e{j}", **rec)
    path.parent.mkdir(parents=True, exist_ok=True)
    nx.write_graphml(out, str(path))
    logger.info("%s to %s", summary.caption, path)
    return summary


# ---------------------------------------------------------------------- HTML


def _layout(
    nodes: Sequence[str],
    edges: Sequence[tuple[str, str, str, float | None]],
    method: str,
    seed: int,
) -> dict[str, tuple[float, float]]:
    """Node positions in viewBox units, deterministic for a given input."""
    if not nodes:
        return {}
    simple = nx.Graph()
    simple.add_nodes_from(nodes)
    simple.add_edges_from((u, v) for u, v, _, _ in edges)
    if method == "auto":
        small = 2 < len(nodes) <= 60 and nx.is_connected(simple)
        method = "kamada_kawai" if small else "spring"
    if method == "kamada_kawai":
        try:
            raw = nx.kamada_kawai_layout(simple)
        except ImportError:  # scipy missing
            logger.debug("kamada_kawai_layout needs scipy; using spring_layout")
            raw = nx.spring_layout(simple, seed=seed, weight=None)
    elif method == "spring":
        raw = nx.spring_layout(simple, seed=seed, weight=None, iterations=100)
    else:
        raise ValueError(f"unknown layout {method!r}; use 'auto', 'spring' or 'kamada_kawai'")
    xs = [float(raw[n][0]) for n in nodes]
    ys = [float(raw[n][1]) for n in nodes]
    span_x = (max(xs) - min(xs)) or 1.0
    span_y = (max(ys) - min(ys)) or 1.0
    scale = min((_VIEW_W - 2 * _MARGIN) / span_x, (_VIEW_H - 2 * _MARGIN) / span_y)
    off_x = (_VIEW_W - scale * (max(xs) + min(xs))) / 2
    off_y = (_VIEW_H - scale * (max(ys) + min(ys))) / 2
    return {
        n: (round(off_x + scale * x, 1), round(off_y + scale * y, 1))
        for n, x, y in zip(nodes, xs, ys, strict=True)
    }


def _edge_path(p: tuple[float, float], q: tuple[float, float], offset: float) -> str:
    """Straight line, or a quadratic curve bowed by ``offset`` for parallel kinds."""
    (x1, y1), (x2, y2) = p, q
    if offset == 0:
        return f"M{x1} {y1}L{x2} {y2}"
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy) or 1.0
    # The curve's midpoint sits half-way to the control point, hence 2 * offset.
    cx = round((x1 + x2) / 2 - dy / length * 2 * offset, 1)
    cy = round((y1 + y2) / 2 + dx / length * 2 * offset, 1)
    return f"M{x1} {y1}Q{cx} {cy} {x2} {y2}"


_CSS = """
*{box-sizing:border-box}
body{margin:0;font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;background:#fafafa}
header{padding:8px 16px;border-bottom:1px solid #ddd;background:#fff}
h1{font-size:18px;margin:0}
.gx-caption{margin:2px 0 0;color:#555;font-size:13px}
main{display:flex;height:calc(100vh - 62px);min-height:320px}
#gx-svg{flex:1;width:100%;height:100%;background:#fff;cursor:grab;touch-action:none;user-select:none}
#gx-svg.gx-dragging{cursor:grabbing}
aside{width:250px;overflow:auto;padding:8px 12px;border-left:1px solid #ddd;background:#fff}
aside h2{font-size:12px;letter-spacing:.05em;text-transform:uppercase;color:#666;margin:12px 0 4px}
.gx-legend{list-style:none;margin:0;padding:0}
.gx-legend li{display:flex;align-items:center;gap:6px;padding:2px 4px;border-radius:3px;cursor:pointer}
.gx-legend li:hover{background:#f0f0f0}
.gx-legend li.gx-off{opacity:.35;text-decoration:line-through}
.gx-legend svg{flex:none}
.gx-count{margin-left:auto;color:#777;font-size:12px;font-variant-numeric:tabular-nums}
.gx-hint{color:#777;font-size:12px}
#gx-info{font-size:12px;word-break:break-word;white-space:pre-wrap}
button{font:inherit;font-size:12px;margin-top:8px}
.gx-edge{fill:none;stroke-opacity:.55;vector-effect:non-scaling-stroke}
.gx-swatch{fill:none}
.gx-node{stroke:#fff;stroke-width:1;vector-effect:non-scaling-stroke;cursor:pointer}
.gx-node.gx-sel{stroke:#000;stroke-width:2.5}
.gx-label{pointer-events:none;fill:#222;paint-order:stroke;stroke:#fff;stroke-width:.25em;stroke-linejoin:round}
#gx-svg.gx-focus .gx-node:not(.gx-hl),#gx-svg.gx-focus .gx-label:not(.gx-hl){opacity:.12}
#gx-svg.gx-focus .gx-edge:not(.gx-hl){opacity:.04}
#gx-svg.gx-focus .gx-edge.gx-hl{stroke-opacity:1}
#gx-tip{position:fixed;z-index:10;pointer-events:none;max-width:380px;padding:6px 8px;border-radius:4px;background:rgba(25,25,25,.93);color:#fff;font-size:12px;white-space:pre-wrap;word-break:break-word}
#gx-tip b{display:block}
"""

# Vanilla JS, no dependencies: pan (drag), zoom (wheel), tooltip, neighbour
# highlighting on click, legend toggles. It reads only data-* attributes and
# writes text with textContent, never innerHTML.
_JS = """
(function () {
  "use strict";
  var svg = document.getElementById("gx-svg");
  var vp = document.getElementById("gx-viewport");
  var labelLayer = document.getElementById("gx-labels");
  var tip = document.getElementById("gx-tip");
  var info = document.getElementById("gx-info");
  var list = function (sel) { return Array.prototype.slice.call(svg.querySelectorAll(sel)); };
  var nodes = list(".gx-node"), edges = list(".gx-edge"), labels = list(".gx-label");
  var adj = nodes.map(function () { return []; });
  var inc = nodes.map(function () { return []; });
  var labelOf = {};
  labels.forEach(function (t) { labelOf[t.dataset.i] = t; });
  edges.forEach(function (e, i) {
    var u = +e.dataset.u, v = +e.dataset.v;
    adj[u].push(v); adj[v].push(u); inc[u].push(i); inc[v].push(i);
  });
  var view = { x: 0, y: 0, k: 1 }, focused = -1, drag = null;
  var hidden = { node: {}, edge: {} };

  function apply() {
    vp.setAttribute("transform", "translate(" + view.x + " " + view.y + ") scale(" + view.k + ")");
    var s = 1 / Math.sqrt(view.k);
    nodes.forEach(function (n) { n.setAttribute("r", (+n.dataset.r * s).toFixed(2)); });
    labelLayer.setAttribute("font-size", (11 / view.k).toFixed(3));
  }
  function toSvg(evt) {
    var pt = svg.createSVGPoint();
    pt.x = evt.clientX; pt.y = evt.clientY;
    return pt.matrixTransform(svg.getScreenCTM().inverse());
  }
  function describe(n) {
    var d = n.dataset;
    return [d.id, "kind: " + d.kind + "   neighbours shown: " + adj[+d.i].length, d.label];
  }
  function setLines(el, lines) {
    el.textContent = "";
    lines.forEach(function (line, i) {
      if (!line) { return; }
      var part = document.createElement(i === 0 ? "b" : "div");
      part.textContent = line;
      el.appendChild(part);
    });
  }
  function clearFocus() {
    focused = -1;
    svg.classList.remove("gx-focus");
    list(".gx-hl").forEach(function (el) { el.classList.remove("gx-hl"); });
    list(".gx-sel").forEach(function (el) { el.classList.remove("gx-sel"); });
    info.textContent = "Click a node to highlight its neighbours.";
  }
  function focus(i) {
    clearFocus();
    focused = i;
    svg.classList.add("gx-focus");
    nodes[i].classList.add("gx-hl", "gx-sel");
    [i].concat(adj[i]).forEach(function (j) {
      nodes[j].classList.add("gx-hl");
      if (labelOf[j]) { labelOf[j].classList.add("gx-hl"); }
    });
    inc[i].forEach(function (e) { edges[e].classList.add("gx-hl"); });
    setLines(info, describe(nodes[i]));
  }
  function refreshHidden() {
    nodes.forEach(function (n) { n.style.display = hidden.node[n.dataset.k] ? "none" : ""; });
    labels.forEach(function (t) { t.style.display = nodes[+t.dataset.i].style.display; });
    edges.forEach(function (e) {
      var off = hidden.edge[e.dataset.k] || nodes[+e.dataset.u].style.display === "none" ||
        nodes[+e.dataset.v].style.display === "none";
      e.style.display = off ? "none" : "";
    });
  }

  svg.addEventListener("wheel", function (evt) {
    evt.preventDefault();
    var p = toSvg(evt);
    var k = Math.min(50, Math.max(0.1, view.k * Math.exp(-evt.deltaY * 0.0015)));
    var f = k / view.k;
    view.x = p.x - (p.x - view.x) * f;
    view.y = p.y - (p.y - view.y) * f;
    view.k = k;
    apply();
  }, { passive: false });
  svg.addEventListener("pointerdown", function (evt) {
    if (evt.button !== 0) { return; }
    var p = toSvg(evt);
    drag = { x: p.x, y: p.y, vx: view.x, vy: view.y, cx: evt.clientX, cy: evt.clientY,
             moved: false, target: evt.target };
    svg.setPointerCapture(evt.pointerId);
  });
  svg.addEventListener("pointermove", function (evt) {
    if (drag) {
      if (Math.abs(evt.clientX - drag.cx) + Math.abs(evt.clientY - drag.cy) > 4) {
        drag.moved = true;
        svg.classList.add("gx-dragging");
        tip.hidden = true;
      }
      if (drag.moved) {
        var p = toSvg(evt);
        view.x = drag.vx + p.x - drag.x;
        view.y = drag.vy + p.y - drag.y;
        apply();
      }
      return;
    }
    if (evt.target.classList && evt.target.classList.contains("gx-node")) {
      setLines(tip, describe(evt.target));
      tip.hidden = false;
      var x = evt.clientX + 14, y = evt.clientY + 14;
      var w = tip.offsetWidth, h = tip.offsetHeight;
      if (x + w > window.innerWidth) { x = Math.max(0, evt.clientX - w - 14); }
      if (y + h > window.innerHeight) { y = Math.max(0, evt.clientY - h - 14); }
      tip.style.left = x + "px";
      tip.style.top = y + "px";
    } else {
      tip.hidden = true;
    }
  });
  svg.addEventListener("pointerup", function () {
    if (!drag) { return; }
    var d = drag;
    drag = null;
    svg.classList.remove("gx-dragging");
    if (d.moved) { return; }
    var t = d.target;
    if (t.classList && t.classList.contains("gx-node")) {
      var i = +t.dataset.i;
      if (i === focused) { clearFocus(); } else { focus(i); }
    } else {
      clearFocus();
    }
  });
  svg.addEventListener("pointerleave", function () { tip.hidden = true; });
  document.addEventListener("keydown", function (evt) { if (evt.key === "Escape") { clearFocus(); } });
  document.getElementById("gx-reset").addEventListener("click", function () {
    view = { x: 0, y: 0, k: 1 };
    apply();
    clearFocus();
  });
  Array.prototype.slice.call(document.querySelectorAll(".gx-legend li")).forEach(function (li) {
    li.addEventListener("click", function () {
      var group = hidden[li.dataset.group];
      group[li.dataset.k] = !group[li.dataset.k];
      li.classList.toggle("gx-off", group[li.dataset.k]);
      refreshHidden();
    });
  });
  apply();
  clearFocus();
})();
"""


def export_html(
    graph: TypedGraph,
    path: str | os.PathLike[str],
    *,
    max_nodes: int | None = 300,
    center: str | Iterable[str] | None = None,
    title: str = "Graph view",
    layout: str = "auto",
    seed: int = 42,
    max_labels: int = 25,
) -> ExportSummary:
    """Write one self-contained, offline HTML page that draws the graph.

    Node positions are computed here (``networkx.kamada_kawai_layout`` for small
    connected graphs, else ``spring_layout`` with a fixed seed) and drawn as
    inline SVG: nodes coloured by kind, edges coloured and dashed by kind (two
    kinds between one pair are drawn as separate curves), legends with counts
    (click an entry to hide that kind), a caption saying how much of the graph
    is shown, hover tooltips (id, kind, label or text snippet), pan by dragging,
    zoom with the wheel, and click a node to highlight its neighbours. Every
    string from the graph is HTML-escaped; the page loads nothing from the
    network.

    Args:
        graph: The graph.
        path: Output file.
        max_nodes: Cap on nodes (see `neighbourhood`); ``None`` draws all, which
            is slow in a browser beyond a few thousand nodes.
        center: Optional node id(s) to centre the cap on.
        title: Page title and heading.
        layout: ``"auto"``, ``"spring"`` or ``"kamada_kawai"``.
        seed: Seed of the spring layout.
        max_labels: How many nodes (centres first, then by degree) get a text
            label on the drawing; every node has a tooltip.

    Returns:
        What was written.
    """
    path = Path(path)
    shown = neighbourhood(graph, max_nodes, center)
    if len(shown) > _HTML_WARN_NODES:
        logger.warning("drawing %d nodes in HTML; browsers get slow, pass max_nodes", len(shown))
    edges = _shown_edges(graph, shown)
    pos = _layout(shown, edges, layout, seed)
    index = {n: i for i, n in enumerate(shown)}
    summary = ExportSummary(
        path, "html", len(shown), graph.num_nodes(), len(edges), graph.num_edges()
    )

    stats = graph.stats()
    node_kinds = sorted(stats["node_kinds"])
    edge_kinds = sorted(stats["edge_kinds"])
    nk_index = {k: i for i, k in enumerate(node_kinds)}
    ek_index = {k: i for i, k in enumerate(edge_kinds)}
    shown_nk: dict[str, int] = {}
    for n in shown:
        kind = graph.node_kind(n)
        shown_nk[kind] = shown_nk.get(kind, 0) + 1
    shown_ek: dict[str, int] = {}
    for _, _, kind, _ in edges:
        shown_ek[kind] = shown_ek.get(kind, 0) + 1

    css = [_CSS]
    for i in nk_index.values():
        css.append(f".gx-nk{i}{{fill:{_NODE_COLOURS[i % len(_NODE_COLOURS)]}}}")
    for i in ek_index.values():
        colour, dash = _EDGE_STYLES[i % len(_EDGE_STYLES)]
        css.append(f".gx-ek{i}{{stroke:{colour}" + (f";stroke-dasharray:{dash}}}" if dash else "}"))

    # Edge widths: weights scaled to [0.8, 2.6] px within each kind.
    ranges: dict[str, tuple[float, float]] = {}
    for _, _, kind, w in edges:
        if w is not None and math.isfinite(w):
            lo, hi = ranges.get(kind, (w, w))
            ranges[kind] = (min(lo, w), max(hi, w))
    pair_kinds: dict[tuple[str, str], list[str]] = {}
    for u, v, kind, _ in edges:
        pair_kinds.setdefault((u, v), []).append(kind)

    edge_svg: list[str] = []
    for u, v, kind, w in edges:
        kinds = sorted(pair_kinds[(u, v)])
        offset = (kinds.index(kind) - (len(kinds) - 1) / 2) * 8.0
        width = 1.2
        if w is not None and kind in ranges and math.isfinite(w):
            lo, hi = ranges[kind]
            width = 0.8 + 1.8 * ((w - lo) / (hi - lo) if hi > lo else 1.0)
        title_w = "" if w is None else f' data-w="{_esc(f"{w:.4g}")}"'
        edge_svg.append(
            f'<path class="gx-edge gx-ek{ek_index[kind]}" d="{_edge_path(pos[u], pos[v], offset)}"'
            f' stroke-width="{width:.2f}" data-u="{index[u]}" data-v="{index[v]}"'
            f' data-k="{ek_index[kind]}" data-kind="{_esc(kind)}"{title_w}/>'
        )

    centres = [] if center is None else ([center] if isinstance(center, str) else list(center))
    labelled = list(dict.fromkeys([c for c in centres if c in index]))
    for n in sorted(shown, key=lambda n: (-graph.degree(n), n)):
        if len(labelled) >= max_labels:
            break
        if n not in labelled:
            labelled.append(n)
    labelled = labelled[:max_labels]

    node_svg: list[str] = []
    for i, n in enumerate(shown):
        x, y = pos[n]
        kind = graph.node_kind(n)
        radius = min(18.0, 4.0 + 2.0 * math.log2(1 + graph.degree(n)))
        node_svg.append(
            f'<circle class="gx-node gx-nk{nk_index[kind]}" cx="{x}" cy="{y}" r="{radius:.2f}"'
            f' data-r="{radius:.2f}" data-i="{i}" data-k="{nk_index[kind]}"'
            f' data-id="{_esc(n)}" data-kind="{_esc(kind)}"'
            f' data-label="{_esc(node_label(graph, n, limit=300))}"/>'
        )
    label_svg = [
        f'<text class="gx-label" x="{pos[n][0]}" y="{pos[n][1]}" dx="0.9em" dy="0.35em"'
        f' data-i="{index[n]}">{_esc(node_label(graph, n, limit=28))}</text>'
        for n in labelled
    ]

    def legend_item(group: str, kind: str, k: int, swatch: str, shown_n: int, total: int) -> str:
        return (
            f'<li data-group="{group}" data-k="{k}" data-kind="{_esc(kind)}"'
            f' title="click to hide or show">{swatch}<span>{_esc(kind)}</span>'
            f'<span class="gx-count">{shown_n:,} / {total:,}</span></li>'
        )

    node_legend = [
        legend_item(
            "node",
            kind,
            i,
            f'<svg width="14" height="14"><circle class="gx-nk{i}" cx="7" cy="7" r="6"/></svg>',
            shown_nk.get(kind, 0),
            stats["node_kinds"][kind],
        )
        for kind, i in nk_index.items()
    ]
    edge_legend = [
        legend_item(
            "edge",
            kind,
            i,
            f'<svg width="28" height="10"><path class="gx-swatch gx-ek{i}" d="M1 5L27 5"'
            ' stroke-width="2"/></svg>',
            shown_ek.get(kind, 0),
            stats["edge_kinds"][kind],
        )
        for kind, i in ek_index.items()
    ]

    caption = summary.caption
    if summary.nodes_shown < summary.nodes_total:
        if centres:
            shown_c = ", ".join(centres[:3]) + (", ..." if len(centres) > 3 else "")
            caption += f" (the neighbourhood of {shown_c}, capped at {max_nodes:,} nodes)"
        else:
            caption += f" (around the highest-degree nodes, capped at {max_nodes:,} nodes)"
    elif centres:
        caption += f" (everything reachable from {', '.join(centres[:3])})"

    page = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="llama-index-graphrag-ext">',
        f"<title>{_esc(title)}</title>",
        "<style>" + "\n".join(css) + "</style></head><body>",
        f"<header><h1>{_esc(title)}</h1>",
        f'<p class="gx-caption" id="gx-caption" data-nodes-shown="{summary.nodes_shown}"'
        f' data-nodes-total="{summary.nodes_total}" data-edges-shown="{summary.edges_shown}"'
        f' data-edges-total="{summary.edges_total}">{_esc(caption)}</p></header>',
        "<main>",
        f'<svg id="gx-svg" viewBox="0 0 {_VIEW_W:g} {_VIEW_H:g}" role="img"'
        f' aria-label="{_esc(title)}"><g id="gx-viewport">',
        '<g id="gx-edges">',
        *edge_svg,
        '</g><g id="gx-nodes">',
        *node_svg,
        '</g><g id="gx-labels" font-size="11">',
        *label_svg,
        "</g></g></svg>",
        "<aside><h2>Node kinds</h2>",
        '<ul class="gx-legend" id="gx-legend-nodes">',
        *node_legend,
        "</ul><h2>Edge kinds</h2>",
        '<ul class="gx-legend" id="gx-legend-edges">',
        *edge_legend,
        "</ul><h2>Selection</h2>",
        '<div id="gx-info"></div>',
        '<button type="button" id="gx-reset">Reset view</button>',
        '<p class="gx-hint">Drag to pan, scroll to zoom, hover a node for details, '
        "click a node to highlight its neighbours (Esc clears), click a legend entry "
        "to hide a kind. Counts are shown / total.</p>",
        "</aside></main>",
        '<div id="gx-tip" hidden></div>',
        "<script>" + _JS + "</script>",
        "</body></html>",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(page) + "\n", encoding="utf-8")
    logger.info("%s to %s", summary.caption, path)
    return summary


# ------------------------------------------------------------------ dispatch


def export(graph: TypedGraph, path: str | os.PathLike[str], **kw: Any) -> ExportSummary:
    """Export by file suffix: ``.graphml`` to `export_graphml`, ``.html``/``.htm`` to `export_html`.

    Args:
        graph: The graph.
        path: Output file.
        **kw: Keyword arguments of the chosen exporter.

    Returns:
        What was written.

    Raises:
        ValueError: If the suffix is not one of those.
    """
    suffix = Path(path).suffix.lower()
    if suffix == ".graphml":
        return export_graphml(graph, path, **kw)
    if suffix in (".html", ".htm"):
        return export_html(graph, path, **kw)
    raise ValueError(
        f"cannot export a graph to {os.fspath(path)!r}: unsupported suffix {suffix!r} "
        "(use .graphml for Gephi or .html/.htm for the offline viewer)"
    )


def export_index(
    index_dir: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    max_nodes: int | None = 300,
    center: Iterable[str] | None = None,
) -> ExportSummary:
    """Export the graph of any persisted index of the suite (what ``graphrag-ext viz`` runs).

    Reads the index folder's manifest (so a folder that is not one of the
    suite's indexes gets a clear error) and its graph file; the index itself is
    not loaded, so no model is needed.

    Args:
        index_dir: A folder written by an index's ``persist``.
        path: ``.graphml`` or ``.html`` output file.
        max_nodes: Cap on the nodes shown (None for all, GraphML only).
        center: Node ids to centre the shown neighbourhood on.

    Raises:
        IndexFormatError: The folder is not a persisted index.
        ValueError: The index has no graph, or a centre id is unknown.
    """
    from .index import GRAPH_FILE
    from .persist import read_manifest

    folder = Path(index_dir)
    manifest = read_manifest(folder)
    graph_path = folder / GRAPH_FILE
    if not graph_path.is_file():
        raise ValueError(f"{folder} holds a {manifest.get('kind')!r} index without a graph")
    graph = TypedGraph.load(graph_path)
    center = list(center or [])
    unknown = [c for c in center if not graph.has_node(c)]
    if unknown:
        raise ValueError(f"unknown centre node(s): {unknown[:5]}")
    kw: dict[str, Any] = {"max_nodes": max_nodes, "center": center or None}
    if Path(path).suffix.lower() in (".html", ".htm"):
        kw["title"] = f"{manifest.get('kind')} index: {folder.name}"
        if max_nodes is None:
            kw["max_nodes"] = 300
    return export(graph, path, **kw)
