"""Query nodes: the record, its embedded text, and the generator contract (paper §3.3).

A query node is a question-answer pair generated from a chunk (§3.3 step 1) or, in
the "Sentence Nodes" ablation (§4.2, Fig. 4), one of its sentences. Inside an
``IngestionPipeline`` a :class:`QueryNodeGenerator` writes the kept nodes into each
chunk's metadata under :data:`QUERY_NODES_KEY`, and the index reuses them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent
from pydantic import Field

#: Chunk metadata key holding the kept query nodes (written by the generators).
QUERY_NODES_KEY = "qcg_query_nodes"

NodeFormat = Literal["query+answer", "query", "answer"]


@dataclass(frozen=True, slots=True)  # slots: one object per query node
class QueryPair:
    """One query node before embedding.

    Attributes:
        chunk_id: The chunk it was generated from (its ``E_inter`` edge).
        index: Position among the chunk's generated pairs (the paper's ``z`` in ``x-y-z``).
        query: The question (or the sentence, for sentence nodes).
        answer: The answer ("" for sentence nodes).
        kind: ``"qa"`` (LLM pair) or ``"sentence"``.
        filter_score: Cosine of the node text to its chunk (Doc2Query--), if computed.
    """

    chunk_id: str
    index: int
    query: str
    answer: str = ""
    kind: str = "qa"
    filter_score: float | None = None

    @property
    def node_id(self) -> str:
        """``<chunk id>::q<index>`` (``::s<index>`` for sentences)."""
        return f"{self.chunk_id}::{'s' if self.kind == 'sentence' else 'q'}{self.index}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (chunk metadata, the persisted index)."""
        return {
            "index": self.index,
            "query": self.query,
            "answer": self.answer,
            "kind": self.kind,
            "score": self.filter_score,
        }

    @classmethod
    def from_dict(cls, chunk_id: str, data: dict[str, Any]) -> QueryPair:
        """Inverse of :meth:`to_dict`."""
        return cls(
            chunk_id=chunk_id,
            index=int(data["index"]),
            query=str(data["query"]),
            answer=str(data.get("answer") or ""),
            kind=str(data.get("kind") or "qa"),
            filter_score=None if data.get("score") is None else float(data["score"]),
        )


def node_text(pair: QueryPair, node_format: str = "query+answer", separator: str = " ") -> str:
    """The text a query node is embedded as (paper §3.3: ``q ⊕ a``).

    The paper leaves the concatenation open (digest §8.12): joined with ``separator``.
    ``node_format`` selects the Fig. 4 variants (``query+answer``, ``query``, ``answer``).
    """
    if pair.kind == "sentence" or not pair.answer:
        return pair.query
    if node_format == "query":
        return pair.query
    if node_format == "answer":
        return pair.answer
    return f"{pair.query}{separator}{pair.answer}"


@dataclass
class GeneratedNodes:
    """What a generator produced for a batch of chunks.

    Attributes:
        pairs: The kept query nodes, grouped by chunk in input order.
        vectors: Their ``(len(pairs), d)`` unit embeddings, if the generator made them.
        chunk_vectors: The input chunks' embeddings, if the generator made them.
        chunk_windows: With ``chunk_vectors``, per chunk the unit vectors of the
            windows a long one was pooled from (None: read whole).
    """

    pairs: list[QueryPair]
    vectors: np.ndarray | None = None
    stats: dict[str, int] = field(default_factory=dict)
    chunk_vectors: np.ndarray | None = None
    chunk_windows: list[np.ndarray | None] | None = None


def _chunk_text(node: BaseNode) -> str:
    return node.get_content(metadata_mode=MetadataMode.EMBED)


def _exclude_key(node: BaseNode) -> None:
    for attr in ("excluded_embed_metadata_keys", "excluded_llm_metadata_keys"):
        keys = list(getattr(node, attr))
        if QUERY_NODES_KEY not in keys:
            setattr(node, attr, [*keys, QUERY_NODES_KEY])


class QueryNodeGenerator(TransformComponent):
    """Base of the two query-node sources (a ``TransformComponent``; see the module docs)."""

    node_format: NodeFormat = Field(
        default="query+answer", description="Node text: query+answer (paper), query or answer."
    )
    separator: str = Field(default=" ", description="Joins query and answer in the node text.")
    show_progress: bool = Field(default=False, description="Show progress bars.")

    def text_of(self, pair: QueryPair) -> str:
        """The embedded text of a query node."""
        return node_text(pair, self.node_format, self.separator)

    def generate(self, chunks: Sequence[BaseNode]) -> GeneratedNodes:
        """Build the query nodes of ``chunks``."""
        raise NotImplementedError

    async def agenerate(self, chunks: Sequence[BaseNode]) -> GeneratedNodes:
        """Async :meth:`generate` (default: the sync one)."""
        return self.generate(chunks)

    @staticmethod
    def _annotate(chunks: Sequence[BaseNode], result: GeneratedNodes) -> list[BaseNode]:
        by_chunk: dict[str, list[dict[str, Any]]] = {c.node_id: [] for c in chunks}
        for pair in result.pairs:
            by_chunk[pair.chunk_id].append(pair.to_dict())
        for chunk in chunks:
            chunk.metadata[QUERY_NODES_KEY] = by_chunk[chunk.node_id]
            _exclude_key(chunk)
        return list(chunks)

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Write each chunk's query nodes into its metadata (excluded from embedding and LLM)."""
        return self._annotate(nodes, self.generate(nodes))

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        """Async :meth:`__call__`."""
        return self._annotate(nodes, await self.agenerate(nodes))


def _with_score(pair: QueryPair, score: float) -> QueryPair:
    return QueryPair(pair.chunk_id, pair.index, pair.query, pair.answer, pair.kind, score)
