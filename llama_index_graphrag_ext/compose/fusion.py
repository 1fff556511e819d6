"""Fusion of the suite's retrievers with LlamaIndex's own ``QueryFusionRetriever``.

Three small pieces make it fuse graph retrievers well: :class:`PassageNode`
hashes only the passage's identity (LlamaIndex merges by ``node.hash``, which
covers the evidence metadata); :class:`PassageRetriever` rescales each list to
[0, 1] while keeping the retriever's own order (some rank by something other
than their score); :func:`fuse_retrievers` passes an inert LLM when no query
variants are asked for, so ``Settings.llm`` is never resolved.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Literal

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM, MockLLM
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.retrievers.fusion_retriever import FUSION_MODES
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import PrivateAttr

from ..core.nodes import EVIDENCE_KEY, source_id

logger = logging.getLogger(__name__)

ScoreMode = Literal["minmax", "rank", "raw"]
KeyMode = Literal["passage", "node"]

#: Short names accepted for LlamaIndex's fusion modes.
MODE_ALIASES = {
    "rrf": FUSION_MODES.RECIPROCAL_RANK,
    "reciprocal_rerank": FUSION_MODES.RECIPROCAL_RANK,
    "rel": FUSION_MODES.RELATIVE_SCORE,
    "relative_score": FUSION_MODES.RELATIVE_SCORE,
    "dist": FUSION_MODES.DIST_BASED_SCORE,
    "dist_based_score": FUSION_MODES.DIST_BASED_SCORE,
    "simple": FUSION_MODES.SIMPLE,
}


class PassageNode(TextNode):
    """A text node whose hash is the identity of what it stands for, not its metadata.

    Otherwise a plain ``TextNode`` (serialised results load back as text nodes).
    """

    _identity: str = PrivateAttr(default="")

    @classmethod
    def from_node(cls, node: TextNode, identity: str) -> PassageNode:
        """Copy ``node`` (shallow) and give the copy ``identity``."""
        fields = {name: getattr(node, name) for name in TextNode.model_fields}
        copy = cls(**fields)
        copy._identity = identity
        return copy

    @property
    def identity(self) -> str:
        """The passage (or node) id this node stands for."""
        return self._identity

    @property
    def hash(self) -> str:
        """Hash of the identity, so one passage has one hash whoever retrieved it."""
        return hashlib.sha256(f"passage:{self._identity}".encode()).hexdigest()


def normalise_scores(scores: Sequence[float | None], mode: ScoreMode = "minmax") -> list[float]:
    """Scores on [0, 1] that never increase along the given order.

    Args:
        scores: One score per result, in ranking order (``None``: scored by rank).
        mode: ``minmax`` rescales best to 1 and worst to 0; ``rank`` gives
            ``1 / (1 + rank)``; ``raw`` keeps them (``None`` becomes 0).
            ``minmax`` and ``rank`` cap each score at its predecessor's.
    """
    n = len(scores)
    if mode == "raw":
        return [0.0 if s is None else float(s) for s in scores]
    if mode == "rank" or any(s is None for s in scores):
        out = [1.0 / (1 + rank) for rank in range(n)]
    elif mode == "minmax":
        values = [float(s) for s in scores]  # type: ignore[arg-type]
        low, high = (min(values), max(values)) if values else (0.0, 0.0)
        span = high - low
        out = [1.0 if span == 0 else (v - low) / span for v in values]
    else:
        raise ValueError(f"score mode must be minmax, rank or raw, got {mode!r}")
    for i in range(1, n):  # the retriever's order wins over its reported score
        out[i] = min(out[i], out[i - 1])
    return out


class PassageRetriever(BaseRetriever):
    """Adapts any retriever for fusion: one result per passage, comparable scores.

    Keeps the best-ranked result of each passage (``key="passage"``: by source
    document) or node (``key="node"``), rescales the scores
    (:func:`normalise_scores`) and returns :class:`PassageNode` copies whose
    evidence records the retriever's name, rank and raw score. Non-text nodes
    pass through unchanged (counted in :attr:`passed_through`).

    Args:
        name: Shown in the evidence (default: the retriever's class name).
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        name: str | None = None,
        *,
        scores: ScoreMode = "minmax",
        key: KeyMode = "passage",
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if scores not in ("minmax", "rank", "raw"):
            raise ValueError(f"scores must be minmax, rank or raw, got {scores!r}")
        if key not in ("passage", "node"):
            raise ValueError(f"key must be passage or node, got {key!r}")
        self.retriever = retriever
        self.name = name or type(retriever).__name__
        self.scores = scores
        self.key = key
        self.passed_through = 0
        super().__init__(callback_manager=callback_manager)

    def _identity(self, result: NodeWithScore) -> str:
        return source_id(result) if self.key == "passage" else result.node.node_id

    def _adapt(self, results: list[NodeWithScore]) -> list[NodeWithScore]:
        firsts: dict[str, int] = {}
        kept: list[NodeWithScore] = []
        merged: list[int] = []
        for result in results:
            identity = self._identity(result)
            if identity in firsts:
                merged[firsts[identity]] += 1
                continue
            firsts[identity] = len(kept)
            kept.append(result)
            merged.append(1)
        new_scores = normalise_scores([r.score for r in kept], self.scores)
        out: list[NodeWithScore] = []
        for rank, (result, score, count) in enumerate(zip(kept, new_scores, merged, strict=True)):
            node = result.node
            if not isinstance(node, TextNode):
                self.passed_through += 1
                logger.debug("%s: non-text node %s passed through", self.name, node.node_id)
                out.append(NodeWithScore(node=node, score=score))
                continue
            copy = PassageNode.from_node(node, self._identity(result))
            evidence = {
                "retriever": self.name,
                "rank": rank + 1,
                "raw_score": result.score,
                "results_merged": count,
            }
            if EVIDENCE_KEY in node.metadata:
                evidence["evidence"] = node.metadata[EVIDENCE_KEY]
            copy.metadata = {**node.metadata, EVIDENCE_KEY: evidence}
            for attr in ("excluded_llm_metadata_keys", "excluded_embed_metadata_keys"):
                keys = list(getattr(node, attr))
                if EVIDENCE_KEY not in keys:
                    keys.append(EVIDENCE_KEY)
                setattr(copy, attr, keys)
            out.append(NodeWithScore(node=copy, score=score))
        return out

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._adapt(self.retriever.retrieve(query_bundle))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._adapt(await self.retriever.aretrieve(query_bundle))


def fuse_retrievers(
    retrievers: Mapping[str, BaseRetriever] | Sequence[BaseRetriever],
    *,
    mode: str = "reciprocal_rerank",
    similarity_top_k: int = 10,
    weights: Sequence[float] | None = None,
    scores: ScoreMode = "minmax",
    key: KeyMode = "passage",
    num_queries: int = 1,
    llm: LLM | None = None,
    use_async: bool = False,
    callback_manager: CallbackManager | None = None,
) -> QueryFusionRetriever:
    """LlamaIndex's ``QueryFusionRetriever`` over the given retrievers, each adapted for fusion.

    Args:
        retrievers: The retrievers, by name (names go into the evidence) or as a list.
        mode: A LlamaIndex fusion mode or a short name from ``MODE_ALIASES``.
        weights: Per-retriever weights (``relative_score`` and ``dist`` only).
        scores: How each list's scores are rescaled (:func:`normalise_scores`).
        key: Merge by ``passage`` (source document) or by ``node``.
        num_queries: More than 1 makes ``llm`` write query variants.
        use_async: Run the retrievers as concurrent tasks. Off by default: the
            retrievers are CPU-bound, and LlamaIndex's sync path then calls
            ``asyncio.run``, which fails inside a running loop (Jupyter).

    Raises:
        ValueError: No retrievers, an unknown mode, weights of the wrong length,
            or ``num_queries > 1`` without an LLM.
    """
    named = (
        list(retrievers.items())
        if isinstance(retrievers, Mapping)
        else [(None, r) for r in retrievers]
    )
    if not named:
        raise ValueError("fuse_retrievers needs at least one retriever")
    if mode not in MODE_ALIASES:
        raise ValueError(f"unknown fusion mode {mode!r}; use one of {sorted(MODE_ALIASES)}")
    if weights is not None and len(weights) != len(named):
        raise ValueError(f"{len(weights)} weights for {len(named)} retrievers")
    if num_queries < 1:
        raise ValueError("num_queries must be at least 1")
    if num_queries > 1 and llm is None:
        raise ValueError("num_queries > 1 makes the LLM write query variants: pass llm=")
    adapted = [PassageRetriever(r, name, scores=scores, key=key) for name, r in named]
    return QueryFusionRetriever(
        adapted,
        # never called with num_queries=1; keeps LlamaIndex from resolving Settings.llm
        llm=llm if llm is not None else MockLLM(),
        mode=MODE_ALIASES[mode],
        similarity_top_k=similarity_top_k,
        num_queries=num_queries,
        use_async=use_async,
        retriever_weights=list(weights) if weights is not None else None,
        callback_manager=callback_manager,
    )
