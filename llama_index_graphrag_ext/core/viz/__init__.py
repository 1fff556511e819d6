"""Seeing a `TypedGraph`: GraphML for Gephi and a self-contained offline HTML viewer.

``graphrag-ext viz INDEX_DIR --out FILE`` calls `export_index`; `export` picks
the format from the suffix. Large graphs are capped to a readable
`neighbourhood`, and both formats record how much was shown.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..graph import TypedGraph
from ..index_persist import GRAPH_FILE
from ..persist import read_manifest
from .graphml import export_graphml
from .selection import ExportSummary, neighbourhood, node_label
from .viewer import export_html

__all__ = [
    "ExportSummary",
    "export",
    "export_graphml",
    "export_html",
    "export_index",
    "neighbourhood",
    "node_label",
]


def export(graph: TypedGraph, path: str | os.PathLike[str], **kw: Any) -> ExportSummary:
    """Export by file suffix: ``.graphml`` to `export_graphml`, ``.html``/``.htm`` to `export_html`.

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

    Reads the manifest and graph file only, so no model is needed.

    Args:
        max_nodes: Cap on the nodes shown (None for all, GraphML only).
        center: Node ids to centre the shown neighbourhood on.

    Raises:
        IndexFormatError: The folder is not a persisted index.
        ValueError: The index has no graph, or a centre id is unknown.
    """
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
