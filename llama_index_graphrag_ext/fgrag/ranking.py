"""The LLM-free chunk ranking (not in the paper, which summarises descriptions, §3.3).

1. **reached**: the chunks of every description the expansions gathered
   (``Expansion.hits``, the paper's sub-graphs ``G'_i``);
2. **evidence** ``e(c)``: over the descriptions from chunk ``c``, the similarity
   of the seed whose BFS reached them, halved per hop, summed, divided by the
   question's largest (so in [0, 1]);
3. **similarity** ``s(c)``: the chunk's cosine with the question, since
   evidence alone favours the chunks of hub entities;
4. the score ``s(c) + evidence_weight * e(c)``;
   with ``bm25_weight > 0`` (``core/lexical.py``) that ranking of every reached
   chunk is fused with BM25's best passages by reciprocal rank, which may bring
   chunks the expansion never reached (``"source": "bm25"``); the score is then
   the fused one;
5. **fill**: with fewer than ``k`` reached, ``fill="similarity"`` adds the
   nearest chunks, marked ``"source": "similarity-fill"`` and counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.lexical import fuse_ids
from .expansion import Expansion

#: How the reached chunks are ordered.
RANKINGS = ("combined", "evidence")
#: What happens when fewer than ``k`` chunks were reached.
FILLS = ("similarity", "none", "raise")


class UnderfilledError(RuntimeError):
    """Fewer than ``k`` chunks were reached and the retriever was told to raise."""


@dataclass
class Ranked:
    """One ranked chunk (``similarity`` None: no vector; ``source``: ``"expansion"``,
    ``"bm25"`` or ``"similarity-fill"``; ``why``: the query entities and descriptions that
    reached it; ``bm25_rank``: its BM25 rank when fused and ranked by BM25)."""

    chunk_id: str
    score: float
    similarity: float | None
    evidence: float
    source: str
    why: dict[str, Any] = field(default_factory=dict)
    bm25_rank: int | None = None


def gather(expansions: Sequence[Expansion]) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
    """Every reached chunk's raw evidence (step 2, unnormalised) and the descriptions that reached it."""
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
    lexical: Sequence[str] = (),
    bm25_weight: float = 0.0,
) -> tuple[list[Ranked], dict[str, int]]:
    """The top ``k`` of every reached chunk, then the fill; with this query's counts.

    Args:
        similarity: Chunk ids -> their cosines with the question (NaN: no
            vector). ``None`` ranks by evidence alone.
        nearest: ``n`` -> the ``n`` chunks nearest the question, ``(id, cosine)``
            best first (the fill). ``None``: no fill possible.
        ranking, evidence_weight, fill, bm25_weight: As in :class:`~.config.FGRAGRanking`.
        lexical: BM25's best chunk ids for the question, best first.

    Returns:
        The ranked chunks, and counts: ``reached``, ``returned_reached``,
        ``filled``, ``without_vector``, ``lexical`` (returned by BM25 alone).
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
    order = np.lexsort((np.arange(len(ids)), -score))
    fused = None
    bm25_rank = {c: r + 1 for r, c in enumerate(lexical)} if bm25_weight > 0 else {}
    if bm25_weight > 0 and lexical:
        ranked, fused = fuse_ids([ids[i] for i in order.tolist()], lexical, bm25_weight)
        names = ids + [c for c in dict.fromkeys(lexical) if c not in raw]
        code = {c: i for i, c in enumerate(names)}
        order = np.asarray([code[c] for c in ranked], np.int64)
        new = [names[i] for i in order[:k].tolist() if i >= len(ids)]
        extra = np.asarray(similarity(new), np.float64) if new and similarity else []
        ids, sims = names, np.concatenate([sims, np.full(len(names) - len(ids), np.nan)])
        for c, cos in zip(new, extra, strict=True):
            sims[code[c]] = cos
        ev = np.concatenate([ev, np.zeros(len(names) - len(ev))])
    order = order[:k]
    out = [
        Ranked(
            ids[i],
            float(score[i]) if fused is None else float(fused[rank]),
            None if np.isnan(sims[i]) else float(sims[i]),
            float(ev[i]),
            "expansion" if ids[i] in why else "bm25",
            why.get(ids[i], {}),
            bm25_rank.get(ids[i]),
        )
        for rank, i in enumerate(order.tolist())
    ]
    lexical_only = sum(r.source == "bm25" for r in out)
    counts = {
        "reached": len(raw),
        "returned_reached": len(out) - lexical_only,
        "filled": 0,
        "without_vector": missing,
        "lexical": lexical_only,
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
                # a chunk with no evidence; under "evidence" ranking (or fused, whose
                # scale a cosine is not on) it scores 0
                score_of = 0.0 if ranking == "evidence" or fused is not None else float(cos)
                out.append(Ranked(chunk_id, score_of, float(cos), 0.0, "similarity-fill"))
        counts["filled"] = len(out) - counts["returned_reached"] - lexical_only
        # every reached chunk is returned anyway: one order on one scale
        out.sort(key=lambda r: -r.score)
    return out, counts
