"""Q-Iter's search, as pure functions over a :class:`.CueGraphView` (CUE-RAG §3.3).

* :func:`anchor_entities` is Algorithm 4: Spreading Activation (each query entity's
  top-K entity nodes) plus Knowledge Anchoring (the entities of the top-K units).
* :func:`beam_search` is Algorithm 3, lines 5-18: from each anchor entity, the top-K
  linked units not yet on the path, ranked against the path's own query vector,
  which drops each unit it takes (query updating, ``phi' = phi - phi(k)``); paths
  are scored by R(q, sorted units), the best M survive, and their units' entities
  anchor the next depth.

States still at the query vector reuse Knowledge Anchoring's unit cosines; the
others are grouped by anchor entity, so a hub's units are read once per depth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.embeddings import top_k_of_scores
from ..core.lexical import fuse
from ..core.search import RowSearcher, products
from .scoring import QIterScorer
from .view import CueGraphView


@dataclass(frozen=True)
class PathCandidate:
    """A (partial) path of the beam search.

    Attributes:
        units: Unit rows on the path, sorted (the set S of Alg. 3).
        unit: The unit added last.
        via: The anchor entity row the last unit was reached from.
        depth: The depth at which the path was formed (1-based).
        vector: The path's updated query vector.
        score: R(q, sorted units).
        parent: The path it extends (None at depth 1).
    """

    units: tuple[int, ...]
    unit: int
    via: int
    depth: int
    vector: np.ndarray = field(repr=False, compare=False)
    score: float = 0.0
    parent: PathCandidate | None = field(default=None, repr=False, compare=False)

    def trail(self) -> list[tuple[int, int]]:
        """``(entity row, unit row)`` hops from the first to the last, in order."""
        hops, node = [], self
        while node is not None:
            hops.append((node.via, node.unit))
            node = node.parent
        return hops[::-1]


@dataclass
class Anchoring:
    """Seed entities of Alg. 4 and where each came from.

    Attributes:
        seeds: Entity rows, in order of first discovery.
        spreading: Per query entity, the entity rows it activated (SA).
        knowledge_units: The top-K unit rows nearest the query (KA).
        unit_scores: The query's cosine with any unit row (``unit_scores[rows]``),
            as Knowledge Anchoring computed it; ``None`` without KA.
    """

    seeds: list[int] = field(default_factory=list)
    spreading: dict[str, list[int]] = field(default_factory=dict)
    knowledge_units: list[int] = field(default_factory=list)
    unit_scores: Any = None


def anchor_entities(
    view: CueGraphView,
    query_vec: np.ndarray,
    query_entities: dict[str, np.ndarray],
    top_k: int,
    *,
    entity_search: RowSearcher,
    unit_search: RowSearcher,
    use_sa: bool = True,
    use_ka: bool = True,
    named: dict[str, int] | None = None,
    lexical_units: np.ndarray | None = None,
    bm25_weight: float = 0.0,
) -> Anchoring:
    """Entity-Anchoring (Algorithm 4).

    Args:
        query_entities: Query entity text -> its unit embedding.
        top_k: K: entity matches per query entity and anchor units.
        entity_search: Top-k over the view's entity rows (the index's
            ``searcher("entities", ...)``, or ``MatrixSearch(view.entity_matrix)``);
            ``unit_search`` the same over its unit rows.
        use_sa: Spreading Activation (lines 3-7); ``use_ka``: Knowledge Anchoring (8-10).
        named: Query entity text -> the entity row whose name it is (exact or normalised
            match): that row anchors first, its nearest vectors after (names before vectors).
        lexical_units: BM25's unit rows for the question, best first, fused with the
            cosine's by reciprocal rank (``core/lexical.py``) when ``bm25_weight > 0``.
    """
    out = Anchoring()
    seen: dict[int, None] = {}
    named = named or {}
    if use_sa and query_entities and len(view.entity_ids):
        names = list(query_entities)
        found = entity_search.search_many([query_entities[n] for n in names], top_k)
        for name, hits in zip(names, found, strict=True):
            rows = [int(j) for j in hits.rows]
            if name in named:
                rows = list(dict.fromkeys([named[name], *rows]))[:top_k]
            out.spreading[name] = rows
            seen.update(dict.fromkeys(out.spreading[name]))
    if use_ka and len(view.unit_ids):
        hits = unit_search.search(query_vec, top_k)
        out.unit_scores = hits.cosines
        rows = hits.rows
        if bm25_weight > 0 and lexical_units is not None:
            rows = fuse(hits.rows, lexical_units[:top_k], bm25_weight)[0][:top_k]
        out.knowledge_units = [int(i) for i in rows]
        for u in out.knowledge_units:
            seen.update(dict.fromkeys(int(e) for e in view.unit_entities[u]))
    out.seeds = list(seen)
    return out


def _state_scores(
    view: CueGraphView,
    states: Sequence[tuple[int, np.ndarray, tuple[int, ...], PathCandidate | None]],
    query_vec: np.ndarray,
    unit_scores: Any,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per state: the units of its entity not yet on its path, and their scores (Alg. 3 line 9).

    The score of unit ``k`` in state ``(v, phi, path)`` is ``phi(k) . phi``, as in the paper.
    """
    units = view.unit_matrix
    scored: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(states)
    by_entity: dict[int, list[int]] = {}
    for i, (v, phi, _, _) in enumerate(states):
        if unit_scores is not None and phi is query_vec:
            linked = view.entity_units[v]
            scored[i] = (linked, unit_scores[linked])
        else:
            by_entity.setdefault(v, []).append(i)
    for v, members in by_entity.items():
        linked = view.entity_units[v]
        product = products(units, [states[i][1] for i in members], linked)
        for row, i in zip(product, members, strict=True):
            scored[i] = (linked, row)
    out = []
    for (_, _, path, _), (linked, scores) in zip(states, scored, strict=True):
        if path:  # units already on the path are not candidates (line 9: S excluded)
            keep = np.ones(linked.size, dtype=bool)
            for u in path:
                keep &= linked != u
            linked, scores = linked[keep], scores[keep]
        out.append((linked, scores))
    return out


def beam_search(
    view: CueGraphView,
    query: str,
    query_vec: np.ndarray,
    seeds: Sequence[int],
    scorer: QIterScorer,
    *,
    top_k: int = 3,
    depth: int = 3,
    beam: int = 5,
    use_qu: bool = True,
    unit_scores: Any = None,
) -> list[list[PathCandidate]]:
    """The iterative retrieval of Algorithm 3 (lines 5-18).

    Args:
        query_vec: The unit query embedding, every state's initial vector.
        seeds: Anchor entity rows (``V_q^(0)``).
        scorer: R(q, .).
        top_k: K: units expanded per state.
        depth: D: search depth.
        beam: M: paths kept per depth (across all states).
        use_qu: Query updating; without it every state keeps ``phi(q)``.
        unit_scores: :attr:`Anchoring.unit_scores`, if the caller has them.

    Returns:
        The paths kept at each depth (``C*`` split by depth), best first.
    """
    units = view.unit_matrix
    states: list[tuple[int, np.ndarray, tuple[int, ...], PathCandidate | None]] = [
        (int(v), query_vec, (), None) for v in dict.fromkeys(seeds)
    ]
    kept_by_depth: list[list[PathCandidate]] = []
    for d in range(1, depth + 1):
        candidates: dict[tuple[int, ...], PathCandidate] = {}
        scored = _state_scores(view, states, query_vec, unit_scores)
        for (v, phi, path, parent), (linked, unit_sims) in zip(states, scored, strict=True):
            if linked.size == 0:
                continue
            idx, _ = top_k_of_scores(unit_sims, top_k)  # line 9
            for k in linked[idx].tolist():
                key = tuple(sorted((*path, k)))  # line 12
                if key in candidates:  # the same unit set reached twice: keep the first
                    continue
                vector = phi - units[k] if use_qu else phi  # line 11
                candidates[key] = PathCandidate(key, k, v, d, vector, 0.0, parent)
        if not candidates:
            break
        cands = list(candidates.values())
        scores = np.asarray(scorer.score_paths(query, query_vec, view, [c.units for c in cands]))
        order, _ = top_k_of_scores(scores.astype(np.float64), beam)  # line 16
        kept = [
            PathCandidate(c.units, c.unit, c.via, c.depth, c.vector, float(scores[i]), c.parent)
            for i in order.tolist()
            for c in (cands[i],)
        ]
        kept_by_depth.append(kept)
        # line 18: every entity of the new unit anchors the next depth
        next_states: dict[tuple[int, tuple[int, ...]], tuple] = {}
        for c in kept:
            for e in view.unit_entities[c.unit].tolist():
                next_states.setdefault((e, c.units), (e, c.vector, c.units, c))
        states = list(next_states.values())
    return kept_by_depth
