"""``FGRAGRetriever``: query entities, context-aware expansion, chunks with evidence.

The LLM-free half of FG-RAG's query path [P §3.2, §3.3 steps 1-2]:

1. query entities (Eq. 8): given by the caller (the query engine asks its LLM),
   or, LLM-free, spaCy's named entities and noun chunks of the query; the
   whole query is added as one more entity, as in the authors' code;
2. for each, context-aware entity expansion (Eqs. 6-7 and the BFS passes,
   see [`expand_many`][llama_index_graphrag_ext.fgrag.expansion.expand_many]).

As a retriever it returns the original chunks the gathered descriptions came
from (the paper summarises the descriptions instead and never ranks chunks).
Every reached chunk is ranked by its own similarity to the question plus its
weighted description evidence, and a short list is filled from chunk
similarity, counted (see :mod:`.ranking`). Each returned node carries the
query entities, the weak and strong context entities and the descriptions
that chose it under ``metadata["evidence"]``; :attr:`FGRAGRetriever.stats`
counts what the expansion reached and what was filled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.embeddings import embed_query, embed_texts
from ..core.nodes import require_query, with_evidence
from ..core.text import load_spacy, normalize_entity, parsing
from ..core.windows import LONG_CHUNK_SCORES
from .expansion import Expansion, expand_many
from .ranking import FILLS, RANKINGS, rank_reached

if TYPE_CHECKING:
    from .index import FGRAGIndex

logger = logging.getLogger(__name__)

_STAT_KEYS = (
    "queries",
    "reached_chunks",
    "returned_reached",
    "returned_filled",
    "queries_filled",
    "queries_under_k",
    "chunks_without_vector",
)


def spacy_query_entities(query: str, max_entities: int = 9) -> list[str]:
    """LLM-free query entities: named entities, then noun chunks, deduplicated.

    The paper asks an LLM (Eq. 8, Fig. 2); its few-shot outputs are noun
    phrases, which spaCy's noun chunks approximate. Pronouns and wh-words are
    dropped. The first ``max_entities`` are kept (the authors sample 9 at random).
    """
    nlp = load_spacy()
    with parsing(nlp):  # plain strings only leave the block
        doc = nlp(query)
        found: list[str] = [ent.text for ent in doc.ents]
        try:
            for chunk in doc.noun_chunks:
                words = [t for t in chunk if not (t.is_stop or t.pos_ in ("PRON", "DET"))]
                if words:
                    found.append(doc[words[0].i : words[-1].i + 1].text)
        except ValueError:  # a pipeline without a parser has no noun chunks
            logger.debug("spaCy pipeline has no parser; query entities from NER only")
    out: list[str] = []
    keys: set[str] = set()
    for text in found:
        key = normalize_entity(text)
        if key and key not in keys:
            keys.add(key)
            out.append(text.strip())
    return out[:max_entities]


class FGRAGRetriever(BaseRetriever):
    """Context-aware entity expansion over an [`FGRAGIndex`][llama_index_graphrag_ext.fgrag.index.FGRAGIndex].

    Args:
        index: The index.
        similarity_top_k: Chunks returned.
        top_n: ``|E_w|`` per query entity (authors: 20).
        strong_top_n: ``|E_s|`` (authors: 20).
        description_budget: New descriptions per BFS pass (authors: 75).
        per_entity: Per-visit cap on one entity's descriptions and relations
            (``None``: the authors' behaviour).
        max_depth: BFS hop limit (``None``: until the budget is spent).
        max_query_entities: Query entities kept (authors: 9).
        include_query_as_entity: Add the whole query as one more entity (authors' code).
        use_strong_context: ``False`` skips ``E_s`` (ablation).
        chunk_ranking: ``"combined"``: each reached chunk's similarity to the
            question plus ``evidence_weight`` times its normalised description
            evidence; ``"evidence"``: evidence alone (ablation).
        evidence_weight: Weight of the evidence (chosen on a dev set; see the docs).
        fill: When fewer than ``similarity_top_k`` chunks were reached:
            ``"none"`` (default, the paper's scope: only what the expansion
            reached) returns fewer, counted in :attr:`stats`;
            ``"similarity"`` tops up with the chunks nearest the question
            (counted, logged); ``"raise"`` raises :class:`~.ranking.UnderfilledError`.
        long_chunks: The similarity of a chunk longer than the embedder's window:
            its best window's (``"best-window"``) or its pooled vector's
            (``"pooled"``). The fill's search for the nearest chunks reads the
            pooled vectors either way.
        callback_manager: Callbacks; ``Settings`` when omitted.
    """

    def __init__(
        self,
        index: FGRAGIndex,
        similarity_top_k: int = 10,
        top_n: int = 20,
        strong_top_n: int = 20,
        description_budget: int = 75,
        per_entity: int | None = None,
        max_depth: int | None = None,
        max_query_entities: int = 9,
        include_query_as_entity: bool = True,
        use_strong_context: bool = True,
        chunk_ranking: str = "combined",
        evidence_weight: float = 0.3,
        fill: str = "none",
        long_chunks: str = "best-window",
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        if long_chunks not in LONG_CHUNK_SCORES:
            raise ValueError(f"long_chunks must be one of {LONG_CHUNK_SCORES}, got {long_chunks!r}")
        if chunk_ranking not in RANKINGS:
            raise ValueError(f"chunk_ranking must be one of {RANKINGS}, got {chunk_ranking!r}")
        if fill not in FILLS:
            raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")
        if evidence_weight < 0:
            raise ValueError(f"evidence_weight must be >= 0, got {evidence_weight}")
        for name, value in (
            ("similarity_top_k", similarity_top_k),
            ("top_n", top_n),
            ("strong_top_n", strong_top_n),
            ("description_budget", description_budget),
            ("max_query_entities", max_query_entities),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        super().__init__(callback_manager=callback_manager, **kwargs)
        self._index = index
        self.similarity_top_k = similarity_top_k
        self.top_n = top_n
        self.strong_top_n = strong_top_n
        self.description_budget = description_budget
        self.per_entity = per_entity
        self.max_depth = max_depth
        self.max_query_entities = max_query_entities
        self.include_query_as_entity = include_query_as_entity
        self.use_strong_context = use_strong_context
        self.chunk_ranking = chunk_ranking
        self.evidence_weight = float(evidence_weight)
        self.fill = fill
        self.long_chunks = long_chunks
        self._stats: dict[str, int] = dict.fromkeys(_STAT_KEYS, 0)

    @property
    def stats(self) -> dict[str, int]:
        """Counts over the queries this retriever answered (live: read, do not modify).

        ``queries``; ``reached_chunks`` (all chunks the expansions reached);
        ``returned_reached`` / ``returned_filled`` (results from the expansion /
        from the similarity fill); ``queries_filled`` (queries with a fill);
        ``queries_under_k`` (queries that reached fewer than ``similarity_top_k``);
        ``chunks_without_vector`` (reached chunks with no vector, ranked by evidence).
        """
        return self._stats

    @property
    def index(self) -> FGRAGIndex:
        """The index searched."""
        return self._index

    def query_entities(self, query: str, entities: Sequence[str] | None = None) -> list[str]:
        """The retrieval units: the given (or spaCy) entities, capped, plus the query."""
        chosen = list(entities) if entities is not None else spacy_query_entities(query)
        out: list[str] = []
        keys: set[str] = set()
        for text in chosen:
            key = normalize_entity(text)
            if key and key not in keys and len(out) < self.max_query_entities:
                keys.add(key)
                out.append(text.strip())
        if self.include_query_as_entity and query.strip() and normalize_entity(query) not in keys:
            out.append(query.strip())
        return out

    def expand(self, query: str, entities: Sequence[str] | None = None) -> list[Expansion]:
        """CAEE for every query entity (Eqs. 6-7 and both BFS passes).

        Args:
            query: The query.
            entities: Query entities from an LLM; spaCy's when ``None``.

        Returns:
            One [`Expansion`][llama_index_graphrag_ext.fgrag.expansion.Expansion] per query entity.
        """
        graph = self._index.graph_snapshot()
        units = self.query_entities(query, entities)
        if not units or len(graph) == 0:
            return [Expansion(query_entity=u) for u in units]
        embed = self._index.embed_model

        def embed_strong(texts: list[str]) -> np.ndarray:
            return np.stack([embed_query(embed, text) for text in texts])

        search, neighbours = self._index.search_path(graph)
        return expand_many(
            graph,
            units,
            embed_texts(embed, units),
            embed_strong,
            search=search,
            neighbours=neighbours,
            top_n=self.top_n,
            strong_top_n=self.strong_top_n,
            description_budget=self.description_budget,
            per_entity=self.per_entity,
            max_depth=self.max_depth,
            use_strong=self.use_strong_context,
        )

    def rank_chunks(
        self, expansions: Sequence[Expansion], query: str | None = None
    ) -> list[NodeWithScore]:
        """Every chunk the expansions reached, best first, each with its evidence.

        Args:
            expansions: The query entities' expansions.
            query: The question; its similarity to each chunk joins the ranking
                (``None``: evidence alone, and no fill).
        """
        index = self._index
        table = index.chunk_vectors
        similarity = nearest = None
        if query is not None and len(table):
            query_vec = embed_query(index.embed_model, query)
            ids, matrix = table.ids, table.matrix  # one snapshot
            windows = index.chunk_windows() if self.long_chunks == "best-window" else None

            def similarity(chunk_ids: Sequence[str]) -> np.ndarray:
                out = np.full(len(chunk_ids), np.nan)
                rows = [(i, table.row_of(c)) for i, c in enumerate(chunk_ids) if c in table]
                if rows:
                    at, where = (list(x) for x in zip(*rows, strict=True))
                    cos = matrix[where] @ query_vec
                    # A long chunk's similarity is its best window's (core/windows.py).
                    out[at] = cos if windows is None else windows.best(cos, where, query_vec)
                return out

            def nearest(n: int) -> list[tuple[str, float]]:
                search = index.searcher("chunks", table, ids, matrix)
                hits = search.search(query_vec, n)
                return [(ids[r], float(v)) for r, v in zip(hits.rows, hits.scores, strict=True)]

        ranked, counts = rank_reached(
            expansions,
            self.similarity_top_k,
            similarity,
            nearest,
            ranking=self.chunk_ranking,
            evidence_weight=self.evidence_weight,
            fill=self.fill,
        )
        self._count(counts)
        context = {
            exp.query_entity: {
                "weak_context": [n for n, _ in exp.weak[:5]],
                "strong_context": [n for n, _ in exp.strong[:5]],
            }
            for exp in expansions
        }
        nodes = index.get_chunks([r.chunk_id for r in ranked])
        out = []
        for r, node in zip(ranked, nodes, strict=True):
            evidence: dict[str, Any] = {
                "method": "fgrag",
                "source": r.source,
                "similarity": r.similarity,
                "evidence": r.evidence,
                "query_entities": [],
                "descriptions": [],
                **r.why,
            }
            evidence["expansion"] = {q: context[q] for q in evidence["query_entities"]}
            out.append(with_evidence(node, r.score, evidence))
        return out

    def _count(self, counts: dict[str, int]) -> None:
        s = self._stats
        s["queries"] += 1
        s["reached_chunks"] += counts["reached"]
        s["returned_reached"] += counts["returned_reached"]
        s["returned_filled"] += counts["filled"]
        s["queries_filled"] += counts["filled"] > 0
        s["queries_under_k"] += counts["reached"] < self.similarity_top_k
        s["chunks_without_vector"] += counts["without_vector"]
        if counts["filled"]:
            logger.warning(
                "FG-RAG retriever: the expansion reached %d chunk(s) for k=%d; %d filled by "
                "chunk similarity (%d of %d queries so far)",
                counts["reached"],
                self.similarity_top_k,
                counts["filled"],
                s["queries_filled"],
                s["queries"],
            )
        if counts["without_vector"]:
            logger.warning(
                "FG-RAG retriever: %d reached chunk(s) have no vector; ranked by evidence alone",
                counts["without_vector"],
            )

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query = require_query(query_bundle.query_str)
        return self.rank_chunks(self.expand(query), query)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)
