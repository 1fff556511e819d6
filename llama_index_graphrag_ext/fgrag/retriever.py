"""``FGRAGRetriever``: query entities, context-aware expansion, chunks with evidence.

The LLM-free half of FG-RAG's query path [P §3.2, §3.3]: query entities (Eq. 8;
spaCy's unless the engine's LLM gives them), expansion for each, and the chunks
the descriptions came from, ranked by :mod:`.ranking`, with ``metadata["evidence"]``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.config import top_k_of
from ..core.embeddings import embed_query, embed_texts
from ..core.nodes import require_query, with_evidence
from ..core.rwlock import reading
from ..core.text import load_spacy, normalize_entity, parsing
from .config import FGRAGConfig
from .expansion import Expansion, expand_many
from .ranking import rank_reached

logger = logging.getLogger(__name__)

_STAT_KEYS = (
    "queries",
    "reached_chunks",
    "returned_reached",
    "returned_filled",
    "returned_lexical",
    "queries_filled",
    "queries_under_k",
    "chunks_without_vector",
)


def spacy_query_entities(query: str, max_entities: int = 9) -> list[str]:
    """LLM-free query entities: named entities, then noun chunks, deduplicated.

    The paper asks an LLM (Eq. 8, Fig. 2) for noun phrases, which spaCy's noun
    chunks approximate. The first ``max_entities`` are kept (the authors sample 9).
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
        config: A :class:`~.config.FGRAGConfig` or preset name (default: the index's).
        **overrides: Query-time fields of the config by name (``top_n=10``, ``fill="none"``).
    """

    def __init__(
        self,
        index: Any,
        *,
        config: FGRAGConfig | str | None = None,
        similarity_top_k: int = 10,
        callback_manager: CallbackManager | None = None,
        **overrides: Any,
    ) -> None:
        similarity_top_k = top_k_of(similarity_top_k, 10)
        base = index.config if config is None else FGRAGConfig.resolve(config)
        self.config = base.at_query_time(overrides)
        super().__init__(callback_manager=callback_manager)
        self._index = index
        self.similarity_top_k = similarity_top_k
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

    def query_entities(self, query: str, entities: Sequence[str] | None = None) -> list[str]:
        """The retrieval units: the given (or spaCy) entities, capped, plus the query."""
        params = self.config.expansion
        chosen = list(entities) if entities is not None else spacy_query_entities(query)
        out: list[str] = []
        keys: set[str] = set()
        for text in chosen:
            key = normalize_entity(text)
            if key and key not in keys and len(out) < params.max_query_entities:
                keys.add(key)
                out.append(text.strip())
        if params.include_query and query.strip() and normalize_entity(query) not in keys:
            out.append(query.strip())
        return out

    def expand(self, query: str, entities: Sequence[str] | None = None) -> list[Expansion]:
        """CAEE for every query entity (``entities``: the LLM's; spaCy's when ``None``)."""
        graph = self._index.graph_snapshot()
        units = self.query_entities(query, entities)
        if not units or len(graph) == 0:
            return [Expansion(query_entity=u) for u in units]
        embed = self._index.embed_model

        def embed_strong(texts: list[str]) -> np.ndarray:
            return np.stack([embed_query(embed, text) for text in texts])

        params = self.config.expansion
        search, neighbours = self._index.search_path(graph, params.store_vector_search)
        return expand_many(
            graph,
            units,
            embed_texts(embed, units),
            embed_strong,
            search=search,
            neighbours=neighbours,
            top_n=params.top_n,
            strong_top_n=params.strong_top_n,
            description_budget=params.description_budget,
            per_entity=params.per_entity,
            max_depth=params.max_depth,
            use_strong=params.use_strong,
            named=[graph.row_of(normalize_entity(u)) for u in units]
            if params.names_first
            else None,
        )

    def rank_chunks(
        self, expansions: Sequence[Expansion], query: str | None = None
    ) -> list[NodeWithScore]:
        """Every chunk the expansions reached, best first, each with its evidence.

        ``query``: its similarity to each chunk joins the ranking (``None``:
        evidence alone, and no fill).
        """
        index, params = self._index, self.config.ranking
        table = index.chunk_vectors
        similarity = nearest = None
        if query is not None and len(table):
            query_vec = embed_query(index.embed_model, query)
            ids, matrix = table.ids, table.matrix  # one snapshot
            windows = index.chunk_windows() if params.long_chunks == "best-window" else None

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

        lexical: list[str] = []
        if params.bm25_weight > 0 and query is not None:
            lexical = index.bm25_passages(query, max(2 * self.similarity_top_k, 20))
        ranked, counts = rank_reached(
            expansions,
            self.similarity_top_k,
            similarity,
            nearest,
            ranking=params.chunk_ranking,
            evidence_weight=params.evidence_weight,
            fill=params.fill,
            lexical=lexical,
            bm25_weight=params.bm25_weight,
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
            if params.bm25_weight > 0:
                evidence["bm25_rank"] = r.bm25_rank
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
        s["returned_lexical"] += counts["lexical"]
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
        with reading(self._index):
            return self.rank_chunks(self.expand(query), query)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)
