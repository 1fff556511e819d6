"""Context-Aware Entity Expansion (CAEE) over an in-memory snapshot of the graph [P §3.2].

[`EntityGraph`][llama_index_graphrag_ext.fgrag.expansion.EntityGraph] is a
read-only snapshot of the entities and relations in a property graph store:
entity vectors in one normalised matrix, relations in CSR adjacency arrays,
descriptions with the chunks they came from. Matching is one matrix product;
BFS is adjacency lookups. Snapshots are immutable, so any number of threads can
expand at once.

[`expand`][llama_index_graphrag_ext.fgrag.expansion.expand] runs the paper's
Eqs. 6-7 and the two BFS passes for one query entity:

1. weak-context entities ``E_w``: the top-``n`` entities for the query entity (Eq. 6);
2. strong-context entities ``E_s``: the top-``n`` entities for ``E_w`` used as a
   query, its names joined in one string as in the authors' code (Eq. 7);
3. breadth-first search from ``E_w`` and then from ``E_s``, each pass adding at
   most ``description_budget`` new descriptions (the authors' 75 + 75);
4. the union, deduplicated, in visit order (the authors' ``set()`` loses order;
   this keeps it, and the BFS is deterministic where theirs samples at random).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode

from ..core.embeddings import top_k, top_k_of_scores


@dataclass(frozen=True)
class Description:
    """One entity or relationship description gathered by the expansion.

    Attributes:
        text: The description.
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
        query_entity: The query entity.
        weak: ``(entity, score)`` of ``E_w``, best first.
        strong: ``(entity, score)`` of ``E_s``, best first.
        descriptions: Deduplicated descriptions, weak pass first, in visit order.
        visited: Entities whose descriptions or edges were read.
    """

    query_entity: str
    weak: list[tuple[str, float]] = field(default_factory=list)
    strong: list[tuple[str, float]] = field(default_factory=list)
    descriptions: list[Description] = field(default_factory=list)
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


class EntityGraph:
    """A read-only snapshot of entities, relations and chunks for fast expansion.

    Args:
        names: Entity keys (node ids in the store).
        display_names: Names as written.
        descriptions: Each entity's description list.
        sources: Each entity's source chunk per description (parallel lists).
        vectors: ``(n, d)`` unit rows, one per entity.
        rel_ends: ``(m, 2)`` entity indices of each relation (undirected).
        rel_descriptions: Each relation's description list.
        rel_sources: Each relation's source chunk per description.
        chunks: Chunk id -> the original chunk node.
    """

    def __init__(
        self,
        names: Sequence[str],
        display_names: Sequence[str],
        descriptions: Sequence[Sequence[str]],
        sources: Sequence[Sequence[str]],
        vectors: np.ndarray,
        rel_ends: np.ndarray,
        rel_descriptions: Sequence[Sequence[str]],
        rel_sources: Sequence[Sequence[str]],
        chunks: dict[str, BaseNode] | None = None,
    ) -> None:
        self.names = list(names)
        self.display_names = list(display_names)
        self.descriptions = [list(d) for d in descriptions]
        self.sources = [list(s) for s in sources]
        self.vectors = np.asarray(vectors, dtype=np.float32)
        self.rel_ends = np.asarray(rel_ends, dtype=np.int64).reshape(-1, 2)
        self.rel_descriptions = [list(d) for d in rel_descriptions]
        self.rel_sources = [list(s) for s in rel_sources]
        self.chunks = dict(chunks or {})
        self.index_of = {name: i for i, name in enumerate(self.names)}
        #: Top-k entity rows from an external vector store (set by the index that
        #: has one; ``None``: exact search over ``vectors``).
        self.searcher: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]] | None = None
        n = len(self.names)
        if self.vectors.shape[0] != n:
            raise ValueError(f"{n} entities but {self.vectors.shape[0]} vectors")
        # CSR adjacency: for entity i, relation ids adj_rel[indptr[i]:indptr[i+1]]
        # and the entity at their other end adj_nbr[...] (relations are undirected).
        ends = self.rel_ends
        rel_ids = np.arange(ends.shape[0], dtype=np.int64)
        heads = np.concatenate([ends[:, 0], ends[:, 1]])
        tails = np.concatenate([ends[:, 1], ends[:, 0]])
        rels = np.concatenate([rel_ids, rel_ids])
        keep = heads != tails
        heads, tails, rels = heads[keep], tails[keep], rels[keep]
        order = np.lexsort((rels, heads))
        self.adj_nbr = tails[order]
        self.adj_rel = rels[order]
        self.indptr = np.zeros(n + 1, dtype=np.int64)
        np.add.at(self.indptr, heads + 1, 1)
        np.cumsum(self.indptr, out=self.indptr)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def num_relations(self) -> int:
        """Number of relations."""
        return int(self.rel_ends.shape[0])

    def degree(self, i: int) -> int:
        """Number of relations touching entity ``i``."""
        return int(self.indptr[i + 1] - self.indptr[i])

    def match(self, vector: np.ndarray, n: int) -> list[tuple[int, float]]:
        """Top-``n`` entities by cosine to ``vector`` (Eqs. 6-7's ``Match``)."""
        if len(self) == 0:
            return []
        if self.searcher is not None:
            idx, scores = self.searcher(vector, n)
        else:
            idx, scores = top_k(self.vectors, vector, n)
        return [(int(i), float(s)) for i, s in zip(idx, scores, strict=True)]

    def bfs(
        self,
        seeds: Sequence[tuple[int, float]],
        budget: int,
        taken: set[tuple[str, str]],
        context: str,
        *,
        query_scores: np.ndarray | None = None,
        per_entity: int | None = None,
        max_depth: int | None = None,
    ) -> tuple[list[Description], list[int]]:
        """Breadth-first search from ``seeds`` that adds at most ``budget`` new descriptions.

        Seeds are visited in the given order; each visited entity contributes
        its own descriptions, then its relations' descriptions, enqueuing the
        entities at their other ends. Neighbours are taken in order of
        ``query_scores`` (their similarity to the query entity) when given, so
        the budget goes to the context nearest the query first.

        Args:
            seeds: ``(entity index, similarity)`` pairs.
            budget: New descriptions this pass may add (the authors' 75).
            taken: ``(owner, text)`` keys already gathered; updated in place.
            context: ``"weak"`` or ``"strong"``, recorded on each description.
            query_scores: ``(n,)`` similarity of every entity to the query entity.
            per_entity: Cap on descriptions taken from one entity per visit
                (``None``: as many as the budget allows, as the authors do).
            max_depth: Hops beyond the seeds (``None``: until the budget is spent).

        Returns:
            The new descriptions and the visited entity indices.
        """
        out: list[Description] = []
        visited_order: list[int] = []
        if budget <= 0 or not seeds:
            return out, visited_order
        seen = {i for i, _ in seeds}
        queue: deque[tuple[int, int, float]] = deque((i, 0, s) for i, s in seeds)

        def add(text: str, kind: str, owner: str, chunk: str, depth: int, score: float) -> bool:
            key = (owner, text)
            if key in taken:
                return False
            taken.add(key)
            out.append(Description(text, kind, owner, chunk, depth, score, context))
            return True

        while queue and len(out) < budget:
            i, depth, score = queue.popleft()
            visited_order.append(i)
            name = self.names[i]
            taken_here = 0
            for text, chunk in zip(self.descriptions[i], self.sources[i], strict=False):
                if len(out) >= budget or (per_entity is not None and taken_here >= per_entity):
                    break
                taken_here += add(text, "entity", name, chunk, depth, score)
            lo, hi = int(self.indptr[i]), int(self.indptr[i + 1])
            if lo == hi or len(out) >= budget:
                continue
            nbrs, rels = self.adj_nbr[lo:hi], self.adj_rel[lo:hi]
            if query_scores is not None:
                order = np.argsort(-query_scores[nbrs], kind="stable")
                nbrs, rels = nbrs[order], rels[order]
            taken_rel = 0
            for j, r in zip(nbrs.tolist(), rels.tolist(), strict=True):
                if len(out) >= budget or (per_entity is not None and taken_rel >= per_entity):
                    break
                a, b = self.rel_ends[r]
                owner = f"{self.names[a]} -> {self.names[b]}"
                texts = self.rel_descriptions[r]
                chunks = self.rel_sources[r]
                added = False
                for text, chunk in zip(texts, chunks, strict=False):
                    if len(out) >= budget:
                        break
                    added |= add(text, "relation", owner, chunk, depth, score)
                if added:
                    taken_rel += 1
                if j not in seen and (max_depth is None or depth < max_depth):
                    seen.add(j)
                    queue.append((j, depth + 1, score))
        return out, visited_order


def expand(
    graph: EntityGraph,
    query_entity: str,
    query_vector: np.ndarray,
    embed_strong: Any,
    *,
    top_n: int = 20,
    strong_top_n: int = 20,
    description_budget: int = 75,
    per_entity: int | None = None,
    max_depth: int | None = None,
    use_strong: bool = True,
) -> Expansion:
    """Context-aware entity expansion for one query entity [P §3.2, Eqs. 6-7].

    Args:
        graph: The snapshot.
        query_entity: The entity text (for the record).
        query_vector: Its unit embedding.
        embed_strong: ``str -> unit vector``; embeds the joined names of ``E_w``.
        top_n: ``|E_w|`` (authors: 20).
        strong_top_n: ``|E_s|`` (authors: 20).
        description_budget: New descriptions per BFS pass (authors: 75).
        per_entity: Per-visit cap on one entity's descriptions and relations.
        max_depth: BFS hop limit (``None``: the budget alone stops it).
        use_strong: ``False`` skips ``E_s`` (an ablation: weak context only).

    Returns:
        The expansion: both entity sets and the gathered descriptions.
    """
    result = Expansion(query_entity=query_entity)
    if len(graph) == 0:
        return result
    query_scores = graph.vectors @ np.asarray(query_vector, dtype=np.float32)
    if graph.searcher is None:  # Eq. 6 from the scores just computed: one product, not two
        idx, scores = top_k_of_scores(query_scores, top_n)
        weak = [(int(i), float(s)) for i, s in zip(idx, scores, strict=True)]
    else:
        weak = graph.match(query_vector, top_n)  # Eq. 6
    result.weak = [(graph.names[i], s) for i, s in weak]
    taken: set[tuple[str, str]] = set()
    found, visited = graph.bfs(
        weak,
        description_budget,
        taken,
        "weak",
        query_scores=query_scores,
        per_entity=per_entity,
        max_depth=max_depth,
    )
    result.descriptions.extend(found)
    result.visited.extend(graph.names[i] for i in visited)
    if use_strong and weak:
        # Eq. 7: E_w itself is the query; the authors embed its names joined by newlines.
        strong_vector = embed_strong("\n".join(graph.display_names[i] for i, _ in weak))
        strong = graph.match(strong_vector, strong_top_n)
        result.strong = [(graph.names[i], s) for i, s in strong]
        found, visited = graph.bfs(
            strong,
            description_budget,
            taken,
            "strong",
            query_scores=query_scores,
            per_entity=per_entity,
            max_depth=max_depth,
        )
        result.descriptions.extend(found)
        result.visited.extend(graph.names[i] for i in visited)
    return result
