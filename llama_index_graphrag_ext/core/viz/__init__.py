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
    strict: bool = True,
) -> ExportSummary:
    """Export the graph of any persisted index of the suite (what ``graphrag-ext viz`` runs).

    ``index_dir`` is a folder ``persist()`` wrote, or one ``graphrag-ext index`` wrote
    (its ``index/method`` is drawn). Reads the manifest and graph file only, so no
    model is needed. FG-RAG's entity graph is drawn with its entities' source chunks.

    Args:
        max_nodes: Cap on the nodes shown (None for all, GraphML only).
        center: Node ids to centre the shown neighbourhood on.
        strict: An unknown centre id is an error (else it is left out: a retrieved
            passage the graph does not hold).

    Raises:
        IndexFormatError: The folder is not a persisted index.
        ValueError: The index has no graph, or a centre id is unknown.
    """
    folder = method_folder(index_dir)
    if (folder / "baseline.json").is_file():  # the baselines persist LlamaIndex's storage
        raise ValueError(
            f"{index_dir} holds a dense, BM25 or hybrid index, which has no graph to draw"
        )
    manifest = read_manifest(folder)
    graph = load_graph(folder, manifest)
    center = list(center or [])
    unknown = [c for c in center if not graph.has_node(c)]
    if not strict:
        center = [c for c in center if graph.has_node(c)]
    elif unknown:
        raise ValueError(
            f"unknown centre node(s): {unknown[:5]}; ids are chunk ids (the chunk_id of "
            "`graphrag-ext query --json`), entity:<name>, unit:<hash>, ...; or centre on a "
            "question's evidence with --query"
        )
    kw: dict[str, Any] = {"max_nodes": max_nodes, "center": center or None}
    if Path(path).suffix.lower() in (".html", ".htm"):
        kw["title"] = f"{manifest.get('kind')} index: {Path(index_dir).name}"
        if max_nodes is None:
            kw["max_nodes"] = 300
    return export(graph, path, **kw)


def method_folder(index_dir: str | os.PathLike[str]) -> Path:
    """The folder holding the method's index: ``index_dir`` itself, or its ``index/method``
    when ``graphrag-ext index`` wrote it."""
    folder = Path(index_dir)
    return (
        folder / "index" / "method" if (folder / "index" / "collection.json").is_file() else folder
    )


def load_graph(folder: Path, manifest: dict[str, Any]) -> TypedGraph:
    """The index's graph to draw.

    Raises:
        ValueError: The index has no graph (dense, BM25).
    """
    if (folder / GRAPH_FILE).is_file():
        return TypedGraph.load(folder / GRAPH_FILE)
    if manifest.get("kind") == "fgrag":
        from ...fgrag.graph import EntityGraph

        return EntityGraph.load(folder).typed_graph()
    raise ValueError(
        f"{folder} holds a {manifest.get('kind')!r} index, which has no graph to draw "
        "(dense and BM25 rank passages without one)"
    )
