"""The chunk-query link graph the index keeps (LP-RAG §3.3, Eqs. 4-5).

Chunks are joined by mutual kNN with cosine weights (Eqs. 4-5), plus bridge
edges with ``bridges`` on (:mod:`.bridges`). :func:`link_graph` is the training
graph (§3.3-3.4); :func:`typed_graph` the same as a ``TypedGraph`` for viz.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, get_args

import numpy as np

from ..core.embeddings import knn_graph, mutual_knn_edges
from ..core.graph import TypedGraph
from ..core.text import DEFAULT_ENTITY_LABELS, analyze_batch
from .bridges import bridge_edges, entity_links, title_mentions, union_edges
from .config import BridgeLinks, LPRAGConfig
from .link_graph import LinkGraph
from .query_table import QueryTable

logger = logging.getLogger(__name__)

#: ``(rows, cols, weights)``: one entry per undirected chunk edge ``i < j``.
Edges = tuple[np.ndarray, np.ndarray, np.ndarray]

#: ``(source row, linked row, name)``: the linked chunk's title, or a rare entity both name.
Mention = tuple[int, int, str]

BRIDGE_LINKS: tuple[str, ...] = get_args(BridgeLinks)


def no_edges() -> Edges:
    return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)


def similarity_edges(matrix: np.ndarray, k: int) -> Edges:
    """Mutual-kNN chunk edges with cosine weights (Eqs. 4-5)."""
    idx, sims = knn_graph(matrix, k)
    return mutual_knn_edges(idx, sims)


def mention_pairs(
    titles: Sequence[str | None],
    texts: Sequence[str],
    links: str = "titles",
    entity_keys: Sequence[Sequence[str]] | None = None,
    max_entity_chunks: int = 5,
) -> list[Mention]:
    """The bridge mentions of ``links`` (:data:`BRIDGE_LINKS`), one per ordered pair.

    A pair linked both ways keeps its title. ``entity_keys`` is needed unless
    ``links == "titles"``.
    """
    if links not in BRIDGE_LINKS:
        raise ValueError(f"bridge_links must be one of {BRIDGE_LINKS}, got {links!r}")
    found: dict[tuple[int, int], str] = {}
    if links in ("titles", "both"):
        for a, b in title_mentions(titles, texts):
            found[(a, b)] = titles[b] or ""
    if links in ("entities", "both"):
        if entity_keys is None:
            raise ValueError("entity links need each chunk's entity keys")
        for a, b, key in entity_links(entity_keys, max_chunks=max_entity_chunks):
            found.setdefault((a, b), key)
    return [(a, b, name) for (a, b), name in sorted(found.items())]


def entity_keys(texts: Sequence[str]) -> list[list[str]]:
    """Each text's normalised named-entity keys (spaCy NER, rule sentences: no parser)."""
    analyses = analyze_batch(texts, labels=DEFAULT_ENTITY_LABELS, sentences="rule")
    return [[e.key for e in a.entities] for a in analyses]


class ChunkEntityKeys:
    """:func:`entity_keys` by chunk id, kept between relinks so an insert parses
    only the new chunks (not persisted)."""

    def __init__(self) -> None:
        self._keys: dict[str, list[str]] = {}

    def of(self, ids: Sequence[str], texts: Sequence[str]) -> list[list[str]]:
        """The keys of each chunk ``ids[i]`` (text ``texts[i]``), in order."""
        new = [i for i, cid in enumerate(ids) if cid not in self._keys]
        found = entity_keys([texts[i] for i in new]) if new else []
        known = {cid: self._keys[cid] for cid in ids if cid in self._keys}
        known.update((ids[i], keys) for i, keys in zip(new, found, strict=True))
        self._keys = known
        return [known[cid] for cid in ids]


def add_bridges(edges: Edges, matrix: np.ndarray, mentions: Sequence[Mention]) -> tuple[Edges, int]:
    """``edges`` joined by the mentions' edges, and how many mention edges there were."""
    extra = bridge_edges(mentions, matrix)
    return union_edges(edges, extra, len(matrix)), int(len(extra[0]))


def chunk_edges(
    matrix: np.ndarray,
    config: LPRAGConfig,
    titles_and_texts: Callable[[], tuple[list[str | None], list[str]]],
    keys: ChunkEntityKeys,
    chunk_ids: Sequence[str],
) -> tuple[Edges, list[Mention], dict[str, Any]]:
    """``(edges, mentions, stats)`` of the chunk graph ``config`` describes.

    ``stats`` (bridges on only) holds ``bridge_pairs``, ``bridge_edges`` and,
    when ``knn_edges=False`` found no link, ``graph_fallback`` (:func:`_no_links`).
    """
    graph, queries = config.graph, config.queries
    edges = similarity_edges(matrix, graph.k) if graph.knn_edges else no_edges()
    if not queries.bridges or not len(matrix):
        return edges, [], {}
    titles, texts = titles_and_texts()
    links = queries.bridge_links
    entity = None if links == "titles" else keys.of(chunk_ids, texts)
    mentions = mention_pairs(titles, texts, links, entity, queries.bridge_entity_chunks)
    edges, added = add_bridges(edges, matrix, mentions)
    stats: dict[str, Any] = {"bridge_pairs": len(mentions), "bridge_edges": added}
    if not graph.knn_edges and not added and len(matrix) > 1:
        edges, stats["graph_fallback"] = _no_links(matrix, config, sum(1 for t in titles if t))
    return edges, mentions, stats


def _no_links(matrix: np.ndarray, config: LPRAGConfig, titled: int) -> tuple[Edges, str]:
    """No bridge link with ``knn_edges=False``: ``on_no_title_links`` says what then."""
    links = config.queries.bridge_links
    shared = "" if links == "titles" else " or shares a rare entity with it"
    why = (
        f"LP-RAG: knn_edges=False, but no chunk names another chunk's title{shared} "
        f"({titled} of {len(matrix)} chunks have a title; bridge_links={links!r})"
    )
    policy = config.graph.on_no_title_links
    if policy == "raise":
        raise ValueError(f"{why}; pass knn_edges=True or on_no_title_links='none' / 'knn'")
    if policy == "none":
        logger.warning("%s; the chunk graph has no edge (no message passing)", why)
        return no_edges(), "no edges: no title links"
    logger.warning("%s; messages pass along the paper's mutual-kNN edges instead", why)
    return similarity_edges(matrix, config.graph.k), "mutual-kNN edges: no title links"


def link_graph(
    z_chunks: np.ndarray, edges: Edges, queries: QueryTable, query_neighbors: int
) -> LinkGraph:
    """The training graph: chunk edges, query nodes and their links (§3.3)."""
    m = min(query_neighbors, len(z_chunks))
    q_nb, _ = knn_graph(queries.vectors, m, others=z_chunks)
    pos_q, pos_c = queries.links()
    rows, cols, weights = edges
    return LinkGraph(
        z_chunks,
        rows,
        cols,
        weights,
        queries.vectors,
        q_nb,
        np.ones(q_nb.shape, np.float32),  # Eq. 5: query-chunk edges weigh 1
        pos_q,
        pos_c,
    )


def typed_graph(ids: Sequence[str], edges: Edges, queries: QueryTable) -> TypedGraph:
    """Chunks (``similar`` edges) and queries (``asks`` edges) as a :class:`TypedGraph`."""
    rows, cols, weights = edges
    graph = TypedGraph()
    graph.add_nodes(ids, "chunk")
    graph.add_edges(
        ((ids[a], ids[b], float(w)) for a, b, w in zip(rows, cols, weights, strict=True)),
        "similar",
    )
    records = queries.records(ids)
    graph.add_nodes(
        [q["id"] for q in records],
        "query",
        [{"text": q["text"], "origin": q["origin"]} for q in records],
    )
    graph.add_edges(((q["id"], c, 1.0) for q in records for c in q["chunks"]), "asks")
    return graph
