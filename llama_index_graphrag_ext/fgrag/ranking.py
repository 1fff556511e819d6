"""The LLM-free chunk ranking: every chunk the expansion reached, then a counted fill.

The paper never ranks chunks: each query entity's expansion (§3.2) gathers
entity and relationship descriptions, and the LLM summarises them (§3.3,
Eqs. 9-11). The LLM-free retriever has no summariser, so it returns the
chunks the gathered descriptions came from, and must order them. That order
is this module's, not the paper's:

1. **reached**: the chunks of every description any query entity's expansion
   gathered (``Expansion.hits``; the paper's retrieved sub-graphs ``G'_i``).
   Every one of them is scored; none is cut before the ranking.
2. **evidence** ``e(c)``: the sum, over the descriptions from chunk ``c``, of
   the similarity of the seed (``E_w`` or ``E_s``, Eqs. 6-7) whose BFS reached
   them, halved per hop; divided by the question's largest, so it is in [0, 1].
3. **similarity** ``s(c)``: the chunk's own cosine with the question. The
   expansion reaches many chunks (a median of 137 of 1,890 per musique-100
   question, 93% of the gold passages among them), and description counts
   alone favour chunks of hub entities: ranked by ``e(c)`` alone, half of the
   reached gold passages fell below rank 5.
4. the score is ``s(c) + evidence_weight * e(c)``; ``evidence_weight`` was
   chosen on one dev set and reported on the other (``docs/methods/fgrag.md``).
5. **fill** (off by default: the paper's scope is what the expansion reached):
   when fewer than ``k`` chunks were reached (a tiny corpus, or a query whose
   entities match nothing), ``fill="similarity"`` takes the rest from chunk
   similarity over the whole index, marked ``"source": "similarity-fill"`` and
   counted; the benchmark runner's ``fgrag`` turns it on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .expansion import Expansion

#: How the reached chunks are ordered.
RANKINGS = ("combined", "evidence")
#: What happens when fewer than ``k`` chunks were reached.
FILLS = ("similarity", "none", "raise")


class UnderfilledError(RuntimeError):
    """Fewer than ``k`` chunks were reached and the retriever was told to raise."""


@dataclass
class Ranked:
    """One ranked chunk.

    Attributes:
        chunk_id: The chunk.
        score: Its final score.
        similarity: Its cosine with the question (``None``: no vector).
        evidence: Its normalised description evidence (0 for a fill).
        source: ``"expansion"`` or ``"similarity-fill"``.
        why: Query entities and descriptions that reached it (expansion only).
    """

    chunk_id: str
    score: float
    similarity: float | None
    evidence: float
    source: str
    why: dict[str, Any] = field(default_factory=dict)


def gather(expansions: Sequence[Expansion]) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """Every reached chunk's raw evidence and the descriptions that reached it.

    A chunk's evidence sums, over each gathered ``(owner, text)`` from it, the
    seed similarity that led there, halved per BFS hop: many owners, more evidence.
    """
    scores: dict[str, float] = defaultdict(float)
    why: dict[str, dict[str, Any]] = {}
    for exp in expansions:
        for d in exp.hits:
            if not d.chunk_id:
                continue  # a description whose chunk the extractor did not say
            scores[d.chunk_id] += max(d.seed_score, 0.0) * 0.5**d.depth
            record = why.setdefault(
                d.chunk_id, {"query_entities": [], "descriptions": [], "max_hops": 0}
            )
            if exp.query_entity not in record["query_entities"]:
                record["query_entities"].append(exp.query_entity)
            if len(record["descriptions"]) < 5:
                record["descriptions"].append(
                    {"owner": d.owner, "kind": d.kind, "context": d.context, "hops": d.depth}
                )
            record["max_hops"] = max(record["max_hops"], d.depth)
    return dict(scores), why


def rank_reached(
    expansions: Sequence[Expansion],
    k: int,
    similarity: Callable[[Sequence[str]], np.ndarray] | None,
    nearest: Callable[[int], list[tuple[str, float]]] | None,
    *,
    ranking: str = "combined",
    evidence_weight: float = 0.3,
    fill: str = "none",
) -> tuple[list[Ranked], dict[str, int]]:
    """The top ``k`` of every reached chunk, then the fill; with this query's counts.

    Args:
        expansions: The query entities' expansions.
        k: Chunks returned.
        similarity: Chunk ids -> their cosines with the question (NaN: no
            vector). ``None`` ranks by evidence alone.
        nearest: ``n`` -> the ``n`` chunks nearest the question, ``(id, cosine)``
            best first (the fill). ``None``: no fill possible.
        ranking: ``"combined"`` (similarity + weighted evidence) or
            ``"evidence"`` (the earlier evidence-only order, an ablation).
        evidence_weight: Weight of the normalised evidence in ``"combined"``.
        fill: ``"none"`` returns fewer, ``"similarity"`` tops up to ``k``,
            ``"raise"`` raises :class:`UnderfilledError`.

    Returns:
        The ranked chunks, and counts: ``reached`` (chunks the expansion
        reached), ``returned_reached``, ``filled``, ``without_vector``.
    """
    if ranking not in RANKINGS:
        raise ValueError(f"ranking must be one of {RANKINGS}, got {ranking!r}")
    if fill not in FILLS:
        raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")
    raw, why = gather(expansions)
    ids = sorted(raw)  # a fixed order: ties break by id
    ev = np.array([raw[c] for c in ids], dtype=np.float64)
    if len(ev) and ev.max() > 0:
        ev = ev / ev.max()
    sims = np.full(len(ids), np.nan)
    if similarity is not None and ids:
        sims = np.asarray(similarity(ids), dtype=np.float64)
    missing = int(np.isnan(sims).sum()) if similarity is not None else 0
    if ranking == "evidence" or similarity is None:
        score = ev
    else:
        score = np.nan_to_num(sims, nan=0.0) + evidence_weight * ev
    order = np.lexsort((np.arange(len(ids)), -score))[:k]
    out = [
        Ranked(
            ids[i],
            float(score[i]),
            None if np.isnan(sims[i]) else float(sims[i]),
            float(ev[i]),
            "expansion",
            why[ids[i]],
        )
        for i in order.tolist()
    ]
    counts = {
        "reached": len(ids),
        "returned_reached": len(out),
        "filled": 0,
        "without_vector": missing,
    }
    short = k - len(out)
    if short > 0 and fill == "raise":
        raise UnderfilledError(
            f"FG-RAG: the expansion reached {len(out)} chunk(s) for k={k} (fill='raise')"
        )
    if short > 0 and fill == "similarity" and nearest is not None:
        have = {r.chunk_id for r in out}
        for chunk_id, cos in nearest(k + len(have)):
            if len(out) >= k:
                break
            if chunk_id not in have:
                have.add(chunk_id)
                # a chunk with no evidence; under "evidence" ranking it scores 0
                score_of = 0.0 if ranking == "evidence" else float(cos)
                out.append(Ranked(chunk_id, score_of, float(cos), 0.0, "similarity-fill"))
        counts["filled"] = len(out) - counts["returned_reached"]
        # every reached chunk is returned anyway: one order on one scale
        out.sort(key=lambda r: -r.score)
    return out, counts
