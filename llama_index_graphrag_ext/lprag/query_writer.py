"""Query nodes for new chunks: batches, their queries, links (LP-RAG §3.2, Eq. 3; App. A.2).

Per new chunk: one batch (:mod:`.batches`) and ``n_B`` queries for it, LLM
questions (:mod:`.synthetic_queries`) or pseudo-queries (:mod:`.pseudo_queries`),
plus bridge queries (:mod:`.bridges`); each is linked to its whole batch (§3.2).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.embeddings import embed_texts
from ..core.llm import is_embedded
from .batches import neighbor_lists, sample_batches
from .bridges import bridge_queries
from .chunker import new_rule_sentencizer
from .pseudo_queries import ChunkSentences, chunk_sentences, pseudo_queries
from .query_table import ORIGINS, QueryTable, QueryTableBuilder
from .synthetic_queries import SyntheticQueryGenerator

logger = logging.getLogger(__name__)

#: The LLM step's name in the step ledger.
QUERY_STEP = "synthetic-queries"
#: ``max_llm_batches`` when none is set and the LLM is the embedded SmolLM2 (slow on a CPU).
EMBEDDED_LLM_BATCHES = 200
#: Batches whose queries are made at a time (see ``QueryNodeWriter.write``).
_QUERY_BLOCK = 512


class QueryNodeWriter:
    """Writes the query nodes of new chunks of a :class:`~.index.ChunkQueryLinkIndex`,
    drawing from the index's random generator."""

    def __init__(self, index: Any) -> None:
        self._index = index
        self._queries = index.config.queries
        self._calls = index.config.llm

    def write(
        self, targets: list[int], texts_by_id: dict[str, str]
    ) -> tuple[QueryTable, dict[str, int]]:
        """Batches for ``targets`` and their queries (§3.2, App. A.2), and counts to
        add to the index's ``build_stats``. The random draws come in a fixed order,
        so a seeded build is reproducible."""
        index = self._index
        ids = index._chunks.ids
        rows, cols, _ = index._edges
        batches = sample_batches(neighbor_lists(len(ids), rows, cols), targets, index._rng)
        texts = self._texts_of_rows({int(c) for b in batches for c in b}, ids, texts_by_id)
        stats = {"batches": len(batches), "llm_batches": 0, "llm_queries": 0, "pseudo_queries": 0}
        llm_queries = self._llm_queries(batches, texts, stats)
        # A splitter of its own, dropped with its vocabulary at the end.
        nlp = new_rule_sentencizer()
        bridge = self._bridge_queries(targets, texts, nlp)
        fallback = [b for b in range(len(batches)) if b not in llm_queries]
        need = {int(c): texts[int(c)] for b in fallback for c in batches[b]}
        sentences = ChunkSentences(need, nlp)
        builder = QueryTableBuilder()
        # A block of batches at a time, so only one block's sentence strings exist at once.
        for start in range(0, len(batches), _QUERY_BLOCK):
            block = range(start, min(len(batches), start + _QUERY_BLOCK))
            self._add_block_queries(builder, block, batches, llm_queries, sentences, ids)
        for text, pair in bridge:
            builder.add(text, pair, "bridge", first_chunk_id=ids[pair[0]])
        del need, sentences, nlp, texts
        vectors = embed_texts(
            index.embed_model,
            builder.texts(),
            show_progress=index._show_progress,
            desc="Embedding queries",
        )
        table = builder.build(vectors)
        per_origin = np.bincount(table.origins, minlength=len(ORIGINS)).tolist()
        stats["bridge_queries"] = len(bridge)
        stats["llm_queries"] = per_origin[ORIGINS.index("llm")]
        stats["pseudo_queries"] = per_origin[ORIGINS.index("pseudo")]
        return table, stats

    def _texts_of_rows(
        self, rows: set[int], ids: Sequence[str], texts_by_id: dict[str, str]
    ) -> dict[int, str]:
        """Text of each chunk row: the new chunks' from ``texts_by_id``, older ones from the docstore."""
        texts = {r: texts_by_id.get(ids[r]) for r in rows}
        missing = [r for r, t in texts.items() if t is None]
        if missing:
            chunks = self._index.get_chunks([ids[r] for r in missing])
            for r, node in zip(missing, chunks, strict=True):
                texts[r] = node.get_content()
        return texts

    def _llm_queries(
        self, batches: list[np.ndarray], texts: dict[int, str], stats: dict[str, int]
    ) -> dict[int, list[str]]:
        """LLM-written questions by batch (§3.2, Eq. 3); only batches that got some."""
        index = self._index
        llm = self._query_llm()
        if llm is None:
            index.llm_steps.count(QUERY_STEP, len(batches))
            return {}
        bound = index.config.indexing_llm.max_llm_batches
        if bound is None and is_embedded(llm):
            bound = EMBEDDED_LLM_BATCHES
            logger.info(
                "max_llm_batches unset: the embedded SmolLM2 writes the queries of %d "
                "batches at most (set max_llm_batches to change it)",
                bound,
            )
        chosen = list(range(len(batches)))
        if bound is not None and bound < len(batches):
            chosen = sorted(index._rng.choice(len(batches), size=bound, replace=False).tolist())
            logger.info(
                "synthetic queries bounded: %d of %d batches use the LLM, the rest pseudo-queries",
                bound,
                len(batches),
            )
        generator = SyntheticQueryGenerator(
            llm,
            per_batch=self._queries.n_B,
            settings=self._calls,
            meter=index.usage,
        )
        answers = generator.generate(
            [[texts[int(c)] for c in batches[b]] for b in chosen],
            show_progress=index._show_progress,
        )
        index.llm_steps.count(QUERY_STEP, len(chosen))
        index.llm_steps.fell_back(
            QUERY_STEP,
            generator.failures,
            what="batch",
            on_failure=self._calls.on_llm_failure,
        )
        asked = dict(generator.stats)
        stats["llm_batches_asked"] = asked.pop("batches", len(chosen))
        stats.update({f"llm_{k}": v for k, v in asked.items() if k != "queries"})
        stats["llm_batches"] = sum(1 for q in answers if q)
        return {b: qs for b, qs in zip(chosen, answers, strict=True) if qs}

    def _bridge_queries(
        self, targets: list[int], texts: dict[int, str], nlp
    ) -> list[tuple[str, list[int]]]:
        """Bridge pseudo-queries of the targets that mention another chunk (:mod:`.bridges`)."""
        index = self._index
        if not (self._queries.bridges and index._mentions):
            return []
        sources = sorted({m[0] for m in index._mentions} & set(targets))
        titles, _ = index._titles_and_texts(())
        sents = dict(zip(sources, chunk_sentences([texts[i] for i in sources], nlp), strict=True))
        return bridge_queries(
            index._mentions,
            titles,
            _Lookup(sents),
            sources,
            index._rng,
            max_words=self._queries.pseudo_max_words,
            mask=self._queries.bridge_mask,
            per_source=self._queries.bridges_per_chunk,
        )

    def _add_block_queries(
        self,
        builder: QueryTableBuilder,
        block: range,
        batches: list[np.ndarray],
        llm_queries: dict[int, list[str]],
        sentences: ChunkSentences,
        ids: Sequence[str],
    ) -> None:
        """The queries of the batches in ``block``, each linked to its whole batch (§3.2)."""
        fallback = [b for b in block if b not in llm_queries]
        pseudo: dict[int, list[str]] = {}
        if fallback:
            rows = {int(c) for b in fallback for c in batches[b]}
            made = pseudo_queries(
                [batches[b] for b in fallback],
                _Lookup({r: sentences[r] for r in rows}),
                self._index._rng,
                per_batch=self._queries.n_B,
                max_words=self._queries.pseudo_max_words,
            )
            pseudo = dict(zip(fallback, made, strict=True))
        for b in block:
            origin, made_for_b = (
                ("llm", llm_queries[b]) if b in llm_queries else ("pseudo", pseudo[b])
            )
            first = ids[int(batches[b][0])]
            for text in made_for_b:
                builder.add(text, batches[b], origin, first_chunk_id=first)

    def _query_llm(self):
        """The LLM that writes synthetic queries, planned once in ``llm_steps`` (§3.2)."""
        index = self._index
        source = self._queries.query_source
        if source == "pseudo":
            index.llm_steps.chose_llm_free(
                QUERY_STEP, "pseudo-queries (sentence windows)", "query_source='pseudo'"
            )
            return None
        choice = index.llm_choice  # the suite's rule, resolved once for the index
        if choice.llm is None and source == "llm":
            raise ValueError("query_source='llm' but no LLM resolves (provider 'none')")
        return index.llm_steps.plan(
            QUERY_STEP,
            choice,
            needs="text",
            stand_in="pseudo-queries (sentence windows)",
            on_failure=self._calls.on_llm_failure,
        )


class _Lookup:
    """Sentences by chunk index (a dict viewed as a sequence)."""

    def __init__(self, by_index: dict[int, list[str]]) -> None:
        self._by_index = by_index

    def __getitem__(self, i: int) -> list[str]:
        return self._by_index.get(int(i), [])
