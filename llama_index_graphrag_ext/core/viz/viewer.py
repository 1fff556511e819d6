"""The offline HTML viewer: one self-contained page of inline SVG, CSS and script.

Python does the selection, layout, colours and escaping and writes SVG elements
whose ``data-*`` attributes the script reads; the page's fixed parts are files in
``assets/`` (``viewer.html``, a `string.Template`; ``viewer.css``; ``viewer.js``).
"""

from __future__ import annotations

import html
import logging
import math
import os
from collections.abc import Iterable, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

import networkx as nx

from ..graph import TypedGraph
from .selection import ExportSummary, clean, neighbourhood, node_label, shown_edges

logger = logging.getLogger(__name__)

__all__ = ["export_html"]

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
# (stroke colour, dash pattern) for edge kinds, assigned in sorted kind order:
# colour and dash both differ, so kinds stay apart in greyscale too.
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


@cache
def _asset(name: str) -> str:
    """The text of one file in ``assets/`` (read once per process)."""
    return (resources.files(__package__) / "assets" / name).read_text(encoding="utf-8")


def _esc(text: Any) -> str:
    return html.escape(clean(str(text)), quote=True)


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
        # Kamada-Kawai reads best but is cubic and needs one component.
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


def _edge_elements(
    edges: Sequence[tuple[str, str, str, float | None]],
    pos: dict[str, tuple[float, float]],
    index: dict[str, int],
    ek_index: dict[str, int],
) -> list[str]:
    """One ``<path>`` per edge; kinds between one pair bow apart, weights set widths."""
    # Edge widths: weights scaled to [0.8, 2.6] px within each kind.
    ranges: dict[str, tuple[float, float]] = {}
    for _, _, kind, w in edges:
        if w is not None and math.isfinite(w):
            lo, hi = ranges.get(kind, (w, w))
            ranges[kind] = (min(lo, w), max(hi, w))
    pair_kinds: dict[tuple[str, str], list[str]] = {}
    for u, v, kind, _ in edges:
        pair_kinds.setdefault((u, v), []).append(kind)
    out: list[str] = []
    for u, v, kind, w in edges:
        kinds = sorted(pair_kinds[(u, v)])
        offset = (kinds.index(kind) - (len(kinds) - 1) / 2) * 8.0
        width = 1.2
        if w is not None and kind in ranges and math.isfinite(w):
            lo, hi = ranges[kind]
            width = 0.8 + 1.8 * ((w - lo) / (hi - lo) if hi > lo else 1.0)
        title_w = "" if w is None else f' data-w="{_esc(f"{w:.4g}")}"'
        out.append(
            f'<path class="gx-edge gx-ek{ek_index[kind]}" d="{_edge_path(pos[u], pos[v], offset)}"'
            f' stroke-width="{width:.2f}" data-u="{index[u]}" data-v="{index[v]}"'
            f' data-k="{ek_index[kind]}" data-kind="{_esc(kind)}"{title_w}/>'
        )
    return out


def _legend_item(group: str, kind: str, k: int, swatch: str, shown_n: int, total: int) -> str:
    return (
        f'<li data-group="{group}" data-k="{k}" data-kind="{_esc(kind)}"'
        f' title="click to hide or show">{swatch}<span>{_esc(kind)}</span>'
        f'<span class="gx-count">{shown_n:,} / {total:,}</span></li>'
    )


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

    Nodes and edges are coloured by kind, with legends that toggle kinds,
    tooltips, pan, zoom and neighbour highlighting. Every string from the graph
    is HTML-escaped; the page loads nothing from the network.

    Args:
        max_nodes: Cap on nodes (see `neighbourhood`); ``None`` draws all.
        center: Optional node id(s) to centre the cap on.
        layout: ``"auto"`` (Kamada-Kawai when small and connected, else spring),
            ``"spring"`` or ``"kamada_kawai"``.
        max_labels: How many nodes (centres first, then by degree) get a text label.
    """
    path = Path(path)
    shown = neighbourhood(graph, max_nodes, center)
    if len(shown) > _HTML_WARN_NODES:
        logger.warning("drawing %d nodes in HTML; browsers get slow, pass max_nodes", len(shown))
    edges = shown_edges(graph, shown)
    pos = _layout(shown, edges, layout, seed)
    index = {n: i for i, n in enumerate(shown)}
    summary = ExportSummary(
        path, "html", len(shown), graph.num_nodes(), len(edges), graph.num_edges()
    )

    # Kinds are numbered over the whole graph, not the shown part, so a kind
    # keeps its colour in every export of one graph.
    stats = graph.stats()
    nk_index = {k: i for i, k in enumerate(sorted(stats["node_kinds"]))}
    ek_index = {k: i for i, k in enumerate(sorted(stats["edge_kinds"]))}
    shown_nk: dict[str, int] = {}
    for n in shown:
        kind = graph.node_kind(n)
        shown_nk[kind] = shown_nk.get(kind, 0) + 1
    shown_ek: dict[str, int] = {}
    for _, _, kind, _ in edges:
        shown_ek[kind] = shown_ek.get(kind, 0) + 1

    style = [_asset("viewer.css")]
    for i in nk_index.values():
        style.append(f".gx-nk{i}{{fill:{_NODE_COLOURS[i % len(_NODE_COLOURS)]}}}")
    for i in ek_index.values():
        colour, dash = _EDGE_STYLES[i % len(_EDGE_STYLES)]
        style.append(
            f".gx-ek{i}{{stroke:{colour}" + (f";stroke-dasharray:{dash}}}" if dash else "}")
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
    node_legend = [
        _legend_item(
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
        _legend_item(
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

    # substitute, not safe_substitute: a mismatched field fails here, not in the page.
    page = Template(_asset("viewer.html")).substitute(
        title=_esc(title),
        style="\n".join(style),
        nodes_shown=summary.nodes_shown,
        nodes_total=summary.nodes_total,
        edges_shown=summary.edges_shown,
        edges_total=summary.edges_total,
        caption=_esc(caption),
        view_w=f"{_VIEW_W:g}",
        view_h=f"{_VIEW_H:g}",
        edges="\n".join(_edge_elements(edges, pos, index, ek_index)),
        nodes="\n".join(node_svg),
        labels="\n".join(label_svg),
        node_legend="\n".join(node_legend),
        edge_legend="\n".join(edge_legend),
        script=_asset("viewer.js"),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    logger.info("%s to %s", summary.caption, path)
    return summary
