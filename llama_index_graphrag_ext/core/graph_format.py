"""The on-disk form of a `TypedGraph` (``graph.json.gz``): compact JSON, optionally gzipped.

Layout (version 1)::

    {"format": FORMAT_NAME, "version": 1, "meta": {...},
     "nodes": [id, ...],                         # every id once, insertion order
     "node_kinds": [kind, ...],                  # kind table
     "kinds": [[kind_index, run_length], ...],   # run-length kind per node
     "node_attrs": [[node_index, {...}], ...],   # only nodes with attributes
     "edges": {edge_kind: {"u": [i, ...], "v": [j, ...],
                           "weight": [w or null, ...],            # if any weight
                           "attrs": [[edge_pos, {...}], ...]}}}   # if any attrs

Kinds are run-length coded because builders add nodes kind by kind. Only the
graph's public methods are used, so its storage can change without the format.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .persist import expansion_cap

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "GraphFiles", "decode", "encode", "read", "write"]

logger = logging.getLogger(__name__)

FORMAT_NAME = "llama-index-graphrag-ext/typed-graph"
"""Value of the ``format`` field written by `encode`."""

FORMAT_VERSION = 1
"""Version of the layout; reading a newer one fails clearly."""

_GZIP_MAGIC = b"\x1f\x8b"


def encode(graph: Any) -> dict[str, Any]:
    """Return the compact, JSON-ready form of ``graph`` (attribute dicts copied one level)."""
    node_ids = graph.nodes()
    index = {n: i for i, n in enumerate(node_ids)}
    kind_table: dict[str, int] = {}
    runs: list[list[int]] = []
    node_attrs: list[list[Any]] = []
    for i, n in enumerate(node_ids):
        ki = kind_table.setdefault(graph.node_kind(n), len(kind_table))
        if runs and runs[-1][0] == ki:
            runs[-1][1] += 1
        else:
            runs.append([ki, 1])
        attrs = graph.node_attrs(n)
        if attrs:
            node_attrs.append([i, attrs])
    edges: dict[str, dict[str, Any]] = {}
    for u, v, k, weight, attrs in graph.edges_with_attrs():
        block = edges.get(k)
        if block is None:
            block = edges[k] = {"u": [], "v": [], "weight": [], "attrs": []}
        pos = len(block["u"])
        block["u"].append(index[u])
        block["v"].append(index[v])
        block["weight"].append(weight)
        if attrs:
            block["attrs"].append([pos, attrs])
    for block in edges.values():
        # Empty columns are left out.
        if all(w is None for w in block["weight"]):
            del block["weight"]
        if not block["attrs"]:
            del block["attrs"]
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "meta": dict(graph.meta),
        "nodes": node_ids,
        "node_kinds": list(kind_table),
        "kinds": runs,
        "node_attrs": node_attrs,
        "edges": edges,
    }


def decode(d: Mapping[str, Any], graph_cls: type) -> Any:
    """Rebuild a graph of class ``graph_cls`` from `encode` output.

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
    node_ids: list[str] = list(d["nodes"])
    kind_table: list[str] = list(d["node_kinds"])
    runs = [(kind_table[ki], run) for ki, run in d["kinds"]]
    if sum(run for _, run in runs) != len(node_ids):
        raise ValueError(
            f"corrupt graph: {sum(run for _, run in runs)} node kinds for {len(node_ids)} nodes"
        )
    if len(set(node_ids)) != len(node_ids):
        raise ValueError("corrupt graph: duplicate node ids")
    graph = graph_cls(meta=d.get("meta") or {})
    attrs_at = dict(d.get("node_attrs", ()))
    start = 0
    for kind, run in runs:
        stop = start + run
        attrs_list = [attrs_at.get(i) for i in range(start, stop)] if attrs_at else None
        graph.add_nodes(node_ids[start:stop], kind, attrs_list)
        start = stop
    for kind, block in d.get("edges", {}).items():
        us, vs = block["u"], block["v"]
        weights = block.get("weight")
        if len(us) != len(vs) or (weights is not None and len(weights) != len(us)):
            raise ValueError(f"corrupt graph: edge arrays of kind {kind!r} differ in length")
        if weights is None:
            weights = [None] * len(us)
        triples: Iterable[tuple[str, str, float | None]] = (
            (node_ids[i], node_ids[j], w) for i, j, w in zip(us, vs, weights, strict=True)
        )
        graph.add_edges(triples, kind)
        for pos, attrs in block.get("attrs", ()):
            graph.add_edge(node_ids[us[pos]], node_ids[vs[pos]], kind, **attrs)
    return graph


def write(d: Mapping[str, Any], path: str | os.PathLike[str]) -> None:
    """Write `encode` output as one JSON file, gzip-compressed if the name ends in ``.gz``.

    Written in place; atomic directory writes are the caller's job (``core.persist``).

    Raises:
        TypeError: If an attribute is not JSON-serialisable.
    """
    path = Path(path)
    try:
        text = json.dumps(d, ensure_ascii=False, separators=(",", ":"))
    except TypeError as exc:
        raise TypeError(f"graph attributes must be JSON-serialisable: {exc}") from exc
    # surrogatepass: ids and texts cut from user documents may hold lone surrogates.
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


def read(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read what `write` wrote (gzip is detected from the content, not the name).

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: If the file is not JSON.
    """
    raw = Path(path).read_bytes()
    if raw[:2] == _GZIP_MAGIC:
        raw = _gunzip(raw, path)
    try:
        return json.loads(raw.decode("utf-8", errors="surrogatepass"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a JSON typed graph ({exc})") from exc


def _gunzip(raw: bytes, path: Any) -> bytes:
    """Decompress at most :func:`~.persist.expansion_cap` bytes (a bomb is refused)."""
    cap = expansion_cap(len(raw))
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as gz:
            out = gz.read(cap + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: not a gzip file ({exc})") from exc
    if len(out) > cap:
        raise ValueError(f"{path}: expands beyond {cap} bytes from {len(raw)}; refused")
    return out


class GraphFiles:
    """`TypedGraph`'s persistence methods (a mixin; the layout is this module's)."""

    def to_dict(self) -> dict[str, Any]:
        """Return the compact, JSON-ready form (layout: this module's)."""
        return encode(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Any:
        """Rebuild a graph from `to_dict` output (see `decode`)."""
        return decode(d, cls)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the graph to one JSON file (see `write`)."""
        write(self.to_dict(), path)
        logger.debug(
            "saved graph (%d nodes, %d edges) to %s", self.num_nodes(), self.num_edges(), path
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Any:
        """Read a graph written by `save` (gzip is detected from the content).

        Raises:
            FileNotFoundError: If the file does not exist.
            ValueError: If the file is not a typed graph of a supported version.
        """
        return cls.from_dict(read(path))
