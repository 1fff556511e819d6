"""QIterRetriever: CUE-RAG's query-driven iterative retrieval (§3.3, Algorithms 3 and 4)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle
from pydantic import BaseModel, Field
from spacy.lang.en.stop_words import STOP_WORDS

from ..core.config import top_k_of
from ..core.embeddings import embed_query, embed_texts, top_k_of_scores
from ..core.llm import (
    LLMCaller,
    LLMFallbackError,
    LLMSteps,
    UsageMeter,
    choose_llm,
    reason_of,
    writes_json,
)
from ..core.nodes import require_query, with_evidence
from ..core.rwlock import reading
from ..core.text import extract_entities, load_spacy, normalize_entity
from .config import CUEConfig
from .prompts import QUERY_ENTITY_PROMPT
from .qiter import Anchoring, PathCandidate, anchor_entities, beam_search
from .scoring import EmbeddingScorer, QIterScorer, as_scorer
from .view import CueGraphView

logger = logging.getLogger(__name__)

_WORD_RE = re.compile(r"[^\W_]+(?:['\u2019.\-][^\W_]+)*\.?")
_MAX_GAZETTEER_WORDS = 8

#: The LLM step's name in the step ledger.
STEP = "query-entities"


class QueryEntities(BaseModel):
    """The named entities of a question (Spreading Activation's keys, §3.3)."""

    entities: list[str] = Field(description="Entity names as written in the question.")


class _ChunkTexts(Sequence[str]):
    """The candidate chunks' texts, fetched from the docstore only if a scorer reads them.

    There are several times N candidates, and the default embedding scorer reads none.
    """

    def __init__(self, index: Any, cids: list[str]) -> None:
        self._index = index
        self._cids = cids
        self._nodes: dict[str, BaseNode] | None = None

    def _all(self) -> dict[str, BaseNode]:
        if self._nodes is None:
            found = self._index.get_chunks(self._cids) if self._cids else []
            self._nodes = {n.node_id: n for n in found}
        return self._nodes

    def __len__(self) -> int:
        return len(self._cids)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._all()[self._cids[i]].get_content()

    def nodes(self, cids: list[str]) -> dict[str, BaseNode]:
        """The nodes of ``cids`` (from the full fetch if a scorer made one)."""
        if self._nodes is not None:
            return {c: self._nodes[c] for c in cids}
        return {n.node_id: n for n in self._index.get_chunks(cids)} if cids else {}


def _unit_texts(view: CueGraphView) -> list[str]:
    """Each unit's statement and its entities' names (what BM25 reads of a unit)."""
    names = view.entity_names
    return [
        " ".join([text, *(names[e] for e in view.unit_entities[u].tolist())])
        for u, text in enumerate(view.unit_texts)
    ]


class QIterRetriever(BaseRetriever):
    """Entity anchoring, beam search with query updating, final chunk re-ranking.

    Args:
        index: The :class:`.MultiPartiteIndex`.
        config: A :class:`~.config.CUEConfig` or preset name (default: the index's);
            its ``retrieval`` and ``llm`` sections are used.
        similarity_top_k: N, chunks returned (default: the config's).
        reranker: R(q, .): any LlamaIndex reranking postprocessor or a
            :class:`.QIterScorer`, instead of the embedding scorer (:mod:`.scoring`;
            ``lexical_weight`` and ``long_chunks`` are the embedding scorer's).
        llm: LLM for the query entities (default: the index's), picked once, here. One
            that cannot write JSON, or none, makes the step spaCy's with a warning; a
            query whose reply fails gets spaCy's entities (counted in :attr:`llm_steps`).
        callback_manager: LlamaIndex callbacks; falls back to ``Settings``.
        **overrides: Retrieval and LLM fields of the config by name (``M=8``,
            ``use_sa=False``, ``query_entities="llm"``).
    """

    def __init__(
        self,
        index: Any,
        *,
        config: CUEConfig | str | None = None,
        similarity_top_k: int | None = None,
        reranker: BaseNodePostprocessor | QIterScorer | None = None,
        llm: LLM | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **overrides: Any,
    ) -> None:
        if reranker is not None and "lexical_weight" in overrides:
            raise ValueError(
                "lexical_weight applies to the default embedding scorer, not reranker="
            )
        if similarity_top_k is not None:
            overrides["N"] = top_k_of(similarity_top_k)
        base = index.config if config is None else CUEConfig.resolve(config)
        self.config = base.at_query_time(overrides)
        self.params = params = self.config.retrieval
        self._index = index
        self.scorer = (
            as_scorer(reranker)
            if reranker is not None
            else EmbeddingScorer(params.lexical_weight, long_chunks=params.long_chunks)
        )
        self._entity_prompt: BasePromptTemplate = QUERY_ENTITY_PROMPT
        # The index's NER settings: the question's entities are found as its units' were.
        self._labels = index.config.graph.entity_labels
        self._spacy_model = index.config.graph.spacy_model
        self.llm_settings = self.config.llm.model_copy(update={"max_concurrency": 1})
        #: The query-entity step's LLM, tier and per-query fallbacks.
        self.llm_steps = LLMSteps("CUE QIterRetriever")
        self._caller: LLMCaller | None = None
        #: ``"llm"`` or ``"spacy"``: where this retriever's query entities come from.
        self.query_entities = params.query_entities
        if self.query_entities != "spacy":  # resolved once, never per query
            self._plan_query_entities(llm, index)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def similarity_top_k(self) -> int:
        """N."""
        return self.params.N

    def _plan_query_entities(self, llm: LLM | None, index: Any) -> None:
        choice = choose_llm(llm) if llm is not None else None
        if self.query_entities == "auto":
            # The LLM's entities where it wrote the units and writes JSON.
            if index.config.graph.alpha > 0:
                choice = choice or index.llm_choice
                if writes_json(choice.llm):
                    self.query_entities = "llm"
            if self.query_entities == "auto":
                self.query_entities = "spacy"
                self.llm_steps.chose_llm_free(
                    STEP, "spaCy entities", "query_entities='auto' without LLM units or JSON"
                )
                return
        planned = self.llm_steps.plan(
            STEP,
            choice or index.llm_choice,
            needs="json",
            stand_in="spaCy entities",
            on_failure=self.llm_settings.on_llm_failure,
        )
        if planned is not None:
            self._caller = self.llm_settings.new_caller(planned)

    @property
    def usage(self) -> UsageMeter:
        """LLM calls and tokens of the query-entity step so far (empty with spaCy entities)."""
        return self._caller.meter if self._caller is not None else UsageMeter()

    @property
    def fallbacks(self) -> dict[str, int]:
        """Queries whose LLM entities failed and got spaCy's (``{"query_entities_llm": n}``)."""
        record = self.llm_steps.record(STEP)
        return {"query_entities_llm": record.fallbacks if record else 0}

    # ---------------------------------------------------------------- prompts

    def _get_prompts(self) -> PromptDictType:
        return {"query_entities": self._entity_prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "query_entities" in prompts:
            self._entity_prompt = prompts["query_entities"]

    # ------------------------------------------------------- query entities

    def _spacy_entities(self, query: str, view: CueGraphView) -> list[str]:
        """spaCy NER on the query plus maximal query n-grams that name a known entity."""
        nlp = load_spacy(self._spacy_model)
        labels = None if self._labels is None else set(self._labels)
        found = [e.text.strip() for e in extract_entities(query, nlp, labels=labels)]
        words = [m.group().rstrip(".") for m in _WORD_RE.finditer(query)]
        spans: list[tuple[int, int, str]] = []
        longest = min(_MAX_GAZETTEER_WORDS, view.max_entity_words)
        for i in range(len(words)):
            for j in range(min(len(words), i + longest), i, -1):
                gram = words[i:j]
                if all(w.casefold() in STOP_WORDS for w in gram):
                    continue
                text = " ".join(gram)
                if view.entity_of(normalize_entity(text)) is not None:
                    spans.append((i, j, text))
                    break
        for i, j, text in spans:  # keep only maximal matches
            if not any(a <= i and j <= b and (a, b) != (i, j) for a, b, _ in spans):
                found.append(text)
        return list(dict.fromkeys(t for t in found if normalize_entity(t)))

    def _query_entity_names(self, query: str, view: CueGraphView) -> list[str]:
        """§3.3 query entities: the LLM's (``query_entities="llm"``), else spaCy's."""
        if self.query_entities != "llm":
            return self._spacy_entities(query, view)
        self.llm_steps.count(STEP, 1)
        if self._caller is not None:
            try:
                found = self._caller.structured(
                    self._entity_prompt.format(query=query), QueryEntities, max_tokens=96
                )
                names = [" ".join(n.split()) for n in found.entities]
                return list(dict.fromkeys(n for n in names if normalize_entity(n)))
            except LLMFallbackError:
                raise
            except Exception as exc:  # counted and logged below; the query gets spaCy's
                on_failure = self.llm_settings.on_llm_failure
                self.llm_steps.fell_back(
                    STEP, [reason_of(exc)], what="query", on_failure=on_failure
                )
        return self._spacy_entities(query, view)

    def _entity_vectors(
        self, names: list[str], view: CueGraphView, embedded: np.ndarray | None
    ) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        missing = []
        for name in names:
            row = view.entity_of(normalize_entity(name))
            if row is not None:
                out[name] = view.entity_matrix[row]
            else:
                missing.append(name)
        if missing and embedded is not None:
            out.update(zip(missing, embedded, strict=True))
        return out

    def _missing(self, names: list[str], view: CueGraphView) -> list[str]:
        return [n for n in names if view.entity_of(normalize_entity(n)) is None]

    # ---------------------------------------------------------------- search

    def _search(
        self,
        query: str,
        query_vec: np.ndarray,
        entity_vecs: dict[str, np.ndarray],
        view: CueGraphView,
    ) -> list[NodeWithScore]:
        index = self._index
        weight = self.params.bm25_weight
        lexical_units = None
        if weight > 0 and self.params.use_ka:
            table = index.lexical("units", view, lambda: _unit_texts(view))
            lexical_units = table.top(query, max(self.params.K, 20))[0]
        named = {n: view.entity_of(normalize_entity(n)) for n in entity_vecs}
        anchoring = anchor_entities(
            view,
            query_vec,
            entity_vecs,
            self.params.K,
            entity_search=index.searcher("entities", view, view.entity_ids, view.entity_matrix),
            unit_search=index.searcher("units", view, view.unit_ids, view.unit_matrix),
            use_sa=self.params.use_sa,
            use_ka=self.params.use_ka,
            named={n: row for n, row in named.items() if row is not None},
            lexical_units=lexical_units,
            bm25_weight=weight,
        )
        kept = beam_search(
            view,
            query,
            query_vec,
            anchoring.seeds,
            self.scorer,
            top_k=self.params.K,
            depth=self.params.D,
            beam=self.params.M,
            use_qu=self.params.use_qu,
            unit_scores=anchoring.unit_scores,
        )
        return self._rank_chunks(query, query_vec, view, anchoring, kept)

    def _rank_chunks(
        self,
        query: str,
        query_vec: np.ndarray,
        view: CueGraphView,
        anchoring: Anchoring,
        kept: list[list[PathCandidate]],
    ) -> list[NodeWithScore]:
        # Alg. 3 lines 20-23: the chunks of every unit on every kept path, re-ranked.
        paths_of: dict[int, list[PathCandidate]] = {}  # chunk row -> kept paths citing it
        for level in kept:
            for path in level:
                for u in path.units:
                    for row in view.unit_chunks[u].tolist():
                        bucket = paths_of.setdefault(row, [])
                        if path not in bucket:
                            bucket.append(path)
        rows = list(paths_of)
        cids = [view.chunk_ids[r] for r in rows]
        texts = _ChunkTexts(self._index, cids)
        scores = np.asarray(self.scorer.score_chunks(query, query_vec, view, rows, texts), float)
        top_n, path_weight = self.params.N, self.params.path_weight
        if path_weight:
            best = np.array([max(p.score for p in paths_of[r]) for r in rows], dtype=float)
            scores = scores + path_weight * best
        order, _ = top_k_of_scores(scores, len(scores))
        weight = self.params.bm25_weight
        ranked, fused_scores, bm25_ranks = self._index.fuse_passages(
            query, [cids[i] for i in order.tolist()], weight, max(2 * top_n, 20)
        )
        ranked = ranked[:top_n]
        at = {c: i for i, c in enumerate(cids)}
        chunks = texts.nodes([c for c in ranked if c in at])
        lexical_only = [c for c in ranked if c not in at]
        if lexical_only:
            chunks.update((n.node_id, n) for n in self._index.get_chunks(lexical_only))
        entity_names = view.entity_names
        results: list[NodeWithScore] = []
        seeds = [entity_names[e] for e in anchoring.seeds]
        for place, cid in enumerate(ranked):
            # Fused: the reciprocal-rank score; the method's own stays in the evidence.
            fused = fused_scores[place] if fused_scores is not None else None
            if cid not in at:  # found by BM25 alone
                evidence = {
                    "method": "cue-qiter",
                    "rank": len(results) + 1,
                    "source": "bm25",
                    "bm25_rank": bm25_ranks[cid],
                }
                results.append(with_evidence(chunks[cid], fused, evidence))
                continue
            i = at[cid]
            evidence = {
                "method": "cue-qiter",
                "rank": len(results) + 1,
                "source": "paths",
                "final_score": float(scores[i]),
                "paths": [
                    {
                        "depth": p.depth,
                        "score": round(p.score, 6),
                        "units": [view.unit_texts[u] for u in p.units],
                        "hops": [
                            {"entity": entity_names[e], "unit": view.unit_texts[u]}
                            for e, u in p.trail()
                        ],
                    }
                    for p in sorted(paths_of[rows[i]], key=lambda p: -p.score)[:3]
                ],
                "query_entities": list(anchoring.spreading),
                "seed_entities": seeds[:20],
            }
            if fused is not None:
                evidence["bm25_rank"] = bm25_ranks.get(cid)
            score = float(scores[i]) if fused is None else fused
            results.append(with_evidence(chunks[cid], score, evidence))
        if self.params.fill == "dense" and len(results) < top_n and len(view.chunk_ids):
            have = {r.node.node_id for r in results}
            search = self._index.searcher("chunks", view, view.chunk_ids, view.chunk_matrix)
            idx, vals = search(query_vec, top_n + len(have))
            extra = [
                (view.chunk_ids[j], float(s))
                for j, s in zip(idx.tolist(), vals.tolist(), strict=True)
                if view.chunk_ids[j] not in have
            ]
            extra = extra[: top_n - len(results)]
            nodes = {n.node_id: n for n in self._index.get_chunks([c for c, _ in extra])}
            for cid, s in extra:
                evidence = {
                    "method": "cue-qiter",
                    "rank": len(results) + 1,
                    "source": "dense-fill",
                    "cosine": s,
                }
                # under fusion a cosine is not on the fused scale: the fill scores 0
                score = s if fused_scores is None else 0.0
                results.append(with_evidence(nodes[cid], score, evidence))
        return results

    # -------------------------------------------------------------- entrances

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        with reading(self._index):
            return self._retrieve_in(query_bundle)

    def _retrieve_in(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        view = self._index.view()
        query = require_query(query_bundle.query_str)
        if not view.unit_ids:
            return []
        query_vec = embed_query(self._index.embed_model, query)
        entity_vecs: dict[str, np.ndarray] = {}
        if self.params.use_sa:
            names = self._query_entity_names(query, view)
            missing = self._missing(names, view)
            embedded = embed_texts(self._index.embed_model, missing) if missing else None
            entity_vecs = self._entity_vectors(names, view, embedded)
        return self._search(query, query_vec, entity_vecs, view)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        # CPU work (the entity LLM call runs on the suite's loop): off the caller's loop.
        return await asyncio.to_thread(self._retrieve, query_bundle)
