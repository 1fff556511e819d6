"""``FGRAGRetriever``: query entities, context-aware expansion, chunks with evidence.

The LLM-free half of FG-RAG's query path [P §3.2, §3.3 steps 1-2]:

1. query entities (Eq. 8): given by the caller (the query engine asks its LLM),
   or, LLM-free, spaCy's named entities and noun chunks of the query; the
   whole query is added as one more entity, as in the authors' code;
2. for each, context-aware entity expansion (Eqs. 6-7 and the BFS passes,
   see [`expand_many`][llama_index_graphrag_ext.fgrag.expansion.expand_many]).

As a retriever it ranks the original chunks the gathered descriptions came
from. A chunk's score is the sum, over every description it contributed, of
the seed similarity that led to it, halved per BFS hop (a documented stand-in:
the paper never ranks chunks, it summarises descriptions). Each returned
node carries the query entities, the weak and strong context entities and the
descriptions that chose it under ``metadata["evidence"]``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from ..core.embeddings import embed_query, embed_texts
from ..core.nodes import require_query, with_evidence
from ..core.text import load_spacy, normalize_entity, parsing
from .expansion import Expansion, expand_many

if TYPE_CHECKING:
    from .index import FGRAGIndex

logger = logging.getLogger(__name__)


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
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
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

    def rank_chunks(self, expansions: Sequence[Expansion]) -> list[NodeWithScore]:
        """Chunks of the gathered descriptions, best first, each with its evidence."""
        scores: dict[str, float] = defaultdict(float)
        why: dict[str, dict[str, Any]] = {}
        for exp in expansions:
            for d in exp.hits:  # every (owner, text) gathered: many owners, more evidence
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
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[: self.similarity_top_k]
        context = {
            exp.query_entity: {
                "weak_context": [n for n, _ in exp.weak[:5]],
                "strong_context": [n for n, _ in exp.strong[:5]],
            }
            for exp in expansions
        }
        nodes = self._index.get_chunks([chunk_id for chunk_id, _ in ranked])
        out = []
        for (chunk_id, score), node in zip(ranked, nodes, strict=True):
            evidence = {"method": "fgrag", **why[chunk_id]}
            evidence["expansion"] = {q: context[q] for q in evidence["query_entities"]}
            out.append(with_evidence(node, score, evidence))
        return out

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.rank_chunks(self.expand(require_query(query_bundle.query_str)))

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)
