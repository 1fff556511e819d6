"""Context-Aware Entity Expansion (CAEE) over FG-RAG's entity graph [P §3.2].

[`expand_many`][llama_index_graphrag_ext.fgrag.expansion.expand_many] runs, for
each query entity:

1. weak-context entities ``E_w``: the top-``n`` entities for it (Eq. 6);
2. strong-context entities ``E_s``: the top-``n`` entities for ``E_w``'s names
   joined in one string, as in the authors' code (Eq. 7);
3. breadth-first search from ``E_w``, then from ``E_s``, each pass adding at
   most ``description_budget`` new descriptions;
4. the union, deduplicated by text, in visit order (the authors' ``set()``
   loses order and their BFS samples at random; this one is deterministic).

As in the authors' code the budget counts ``(owner, text)`` pairs and the text
is deduplicated afterwards; every pair is kept in ``Expansion.hits`` for the
chunk ranking.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..core.vectors import MatrixSearch, RowSearcher
from .graph import NO_SOURCE, EntityGraph


@dataclass(frozen=True)
class Description:
    """One entity or relationship description gathered by the expansion.

    Attributes:
        kind: ``"entity"`` or ``"relation"``.
        owner: The entity name, or ``"a -> b"`` for a relation.
        chunk_id: The chunk it was extracted from ("" when unknown).
        depth: BFS hops from the seed (0 for the seed's own descriptions).
        seed_score: Similarity of the seed the BFS started from.
        context: ``"weak"`` or ``"strong"``: which pass found it.
    """

    text: str
    kind: str
    owner: str
    chunk_id: str
    depth: int
    seed_score: float
    context: str


@dataclass
class Expansion:
    """The result of CAEE for one query entity.

    Attributes:
        weak: ``(entity, score)`` of ``E_w``, best first.
        strong: ``(entity, score)`` of ``E_s``, best first.
        descriptions: Distinct descriptions (by text), weak pass first, in visit order.
        hits: Every ``(owner, text)`` description gathered, in visit order (the
            chunk ranking's evidence).
        visited: Entities whose descriptions or edges were read.
    """

    query_entity: str
    weak: list[tuple[str, float]] = field(default_factory=list)
    strong: list[tuple[str, float]] = field(default_factory=list)
    descriptions: list[Description] = field(default_factory=list)
    hits: list[Description] = field(default_factory=list)
    visited: list[str] = field(default_factory=list)

    def as_evidence(self) -> dict[str, Any]:
        """A JSON-ready summary for node metadata and response sources."""
        return {
            "query_entity": self.query_entity,
            "weak_context": [name for name, _ in self.weak],
            "strong_context": [name for name, _ in self.strong],
            "descriptions": len(self.descriptions),
            "visited": len(self.visited),
        }


class Neighbours(Protocol):
    """Where the BFS reads an entity's relations."""

    def prefetch(self, rows: Sequence[int]) -> None:
        """Read the relations of ``rows`` now (one round trip for a BFS level)."""

    def of(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """``(neighbour rows, relation rows)`` of entity ``row``, by relation row."""


class GraphNeighbours:
    """The graph's own adjacency arrays (in memory)."""

    def __init__(self, graph: EntityGraph) -> None:
        self.graph = graph

    def prefetch(self, rows: Sequence[int]) -> None:
        return None

    def of(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        g = self.graph
        lo, hi = int(g.indptr[row]), int(g.indptr[row + 1])
        return g.adj_nbr[lo:hi], g.adj_rel[lo:hi]


def bfs(
    graph: EntityGraph,
    neighbours: Neighbours,
    seeds: Sequence[tuple[int, float]],
    budget: int,
    taken: set[tuple[int, ...]],
    context: str,
    query_scores: Any,
    *,
    per_entity: int | None = None,
    max_depth: int | None = None,
) -> tuple[list[Description], list[int]]:
    """Breadth-first search from ``seeds`` that adds at most ``budget`` new descriptions.

    Each visited entity gives its own descriptions, then its relations', and
    enqueues the entities at their other ends, nearest the query entity first,
    so the budget goes to the closest context. Relations are fetched a BFS
    level at a time.

    Args:
        seeds: ``(entity row, similarity)`` pairs, visited in order.
        taken: Keys ``(owner, text id)`` of descriptions already gathered;
            updated in place (an owner is an entity row, or a relation's two rows).
        query_scores: The query entity's similarity to entities, as
            ``query_scores[rows]`` (:attr:`Hits.cosines`).
        per_entity: Cap on descriptions taken from one entity per visit.
        max_depth: Hops beyond the seeds (``None``: until the budget is spent).

    Returns:
        The new descriptions and the visited entity rows.
    """
    out: list[Description] = []
    visited: list[int] = []
    if budget <= 0 or not seeds:
        return out, visited
    strings = graph.strings
    ent_ptr, ent_text, ent_src = graph.ent_ptr, graph.ent_text, graph.ent_src
    rel_ptr, rel_text, rel_src, rel_ends = (
        graph.rel_ptr,
        graph.rel_text,
        graph.rel_src,
        graph.rel_ends,
    )
    seen = {i for i, _ in seeds}
    queue: deque[tuple[int, int, float]] = deque((i, 0, s) for i, s in seeds)
    fetched_depth = -1

    def take(lo: int, hi: int, texts, srcs, kind: str, key, owner, depth, score, limit) -> int:
        """Add one owner's untaken texts (``owner()`` names it, when one is added)."""
        added = 0
        for t, c in zip(texts[lo:hi].tolist(), srcs[lo:hi].tolist(), strict=True):
            if len(out) >= budget or (limit is not None and added >= limit):
                break
            if (*key, t) in taken:
                continue
            taken.add((*key, t))
            chunk = strings[c] if c != NO_SOURCE else ""
            out.append(Description(strings[t], kind, owner(), chunk, depth, score, context))
            added += 1
        return added

    while queue and len(out) < budget:
        i, depth, score = queue.popleft()
        if depth > fetched_depth:  # a new level: its relations in one read
            neighbours.prefetch([i] + [j for j, d, _ in queue if d == depth])
            fetched_depth = depth
        visited.append(i)
        take(
            int(ent_ptr[i]), int(ent_ptr[i + 1]), ent_text, ent_src, "entity", (i,),
            lambda i=i: graph.name(i), depth, score, per_entity,
        )  # fmt: skip
        if len(out) >= budget:
            break
        nbrs, rels = neighbours.of(i)
        if len(nbrs) > 1:
            order = np.argsort(-np.asarray(query_scores[nbrs]), kind="stable")
            nbrs, rels = nbrs[order], rels[order]
        taken_rel = 0
        for j, r in zip(nbrs.tolist(), rels.tolist(), strict=True):
            if len(out) >= budget or (per_entity is not None and taken_rel >= per_entity):
                break

            def owner(r: int = r) -> str:
                return f"{graph.name(rel_ends[r, 0])} -> {graph.name(rel_ends[r, 1])}"

            lo, hi = int(rel_ptr[r]), int(rel_ptr[r + 1])
            key = (-1, int(rel_ends[r, 0]), int(rel_ends[r, 1]))  # "a -> b", any label
            if take(lo, hi, rel_text, rel_src, "relation", key, owner, depth, score, None):
                taken_rel += 1
            if j not in seen and (max_depth is None or depth < max_depth):
                seen.add(j)
                queue.append((j, depth + 1, score))
    return out, visited


def expand_many(
    graph: EntityGraph,
    query_entities: Sequence[str],
    query_vectors: np.ndarray,
    embed_strong: Callable[[list[str]], np.ndarray],
    *,
    search: RowSearcher | None = None,
    neighbours: Neighbours | None = None,
    top_n: int = 20,
    strong_top_n: int = 20,
    description_budget: int = 75,
    per_entity: int | None = None,
    max_depth: int | None = None,
    use_strong: bool = True,
    named: Sequence[int | None] | None = None,
) -> list[Expansion]:
    """Context-aware entity expansion for each query entity [P §3.2, Eqs. 6-7].

    Args:
        query_vectors: ``(q, d)`` unit embeddings of ``query_entities``.
        embed_strong: Texts -> unit vectors; embeds the joined names of each ``E_w``.
        search: Eqs. 6-7's ``Match`` over the graph's rows (default: exact, in memory).
        neighbours: Where relations are read (default: the graph's arrays).
        top_n, strong_top_n, description_budget, per_entity, max_depth, use_strong:
            See :class:`~.config.FGRAGExpansion`.
        named: Per query entity, the row of the entity it names (``None``: none); that
            row heads ``E_w`` with similarity 1 (``names_first``).

    Returns:
        One expansion per query entity, in order.
    """
    results = [Expansion(query_entity=q) for q in query_entities]
    if len(graph) == 0 or not results:
        return results
    search = search or MatrixSearch(graph.vectors)
    neighbours = neighbours or GraphNeighbours(graph)
    query_vectors = np.asarray(query_vectors, dtype=np.float32).reshape(len(results), -1)

    def pairs(hits: Any) -> list[tuple[int, float]]:
        return [(int(i), float(s)) for i, s in zip(hits.rows, hits.scores, strict=True)]

    weak_hits = search.search_many(list(query_vectors), top_n)  # Eq. 6
    weak_sets = [pairs(hits) for hits in weak_hits]
    for k, row in enumerate(named or ()):
        if row is not None:  # names before vectors: the named entity first
            weak_sets[k] = [(row, 1.0), *(p for p in weak_sets[k] if p[0] != row)][:top_n]
    strong_sets: list[list[tuple[int, float]]] = [[] for _ in results]
    asking = [k for k, weak in enumerate(weak_sets) if weak] if use_strong else []
    if asking:
        # Eq. 7: each E_w is itself a query; the authors embed its names joined by newlines.
        texts = ["\n".join(graph.display(i) for i, _ in weak_sets[k]) for k in asking]
        strong = search.search_many(list(embed_strong(texts)), strong_top_n)
        for k, hits in zip(asking, strong, strict=True):
            strong_sets[k] = pairs(hits)
    for k, result in enumerate(results):
        taken: set[tuple[int, ...]] = set()
        passes = [("weak", weak_sets[k])]
        result.weak = [(graph.name(i), s) for i, s in weak_sets[k]]
        if k in asking:
            result.strong = [(graph.name(i), s) for i, s in strong_sets[k]]
            passes.append(("strong", strong_sets[k]))
        for context, seeds in passes:
            found, visited = bfs(
                graph,
                neighbours,
                seeds,
                description_budget,
                taken,
                context,
                weak_hits[k].cosines,
                per_entity=per_entity,
                max_depth=max_depth,
            )
            result.hits.extend(found)
            result.visited.extend(graph.name(i) for i in visited)
        texts: set[str] = set()
        for d in result.hits:  # the authors' set() over the gathered texts, in order
            if d.text not in texts:
                texts.add(d.text)
                result.descriptions.append(d)
    return results
