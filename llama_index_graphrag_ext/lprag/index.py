"""``ChunkQueryLinkIndex``: chunks, synthetic queries and a trained link predictor (LP-RAG §3.2-3.4).

Building the index runs the paper's pipeline on chunk nodes, one step per module:

| step | paper | module |
|---|---|---|
| embed the chunks (the configured embedder) | §3.3 node features | here |
| join them by mutual kNN with cosine weights (``k = 5``) | §3.3, Eqs. 4-5 | :mod:`.chunk_graph` |
| sample one batch per chunk, write ``n_B = 2`` queries for it (LLM or pseudo), link each to the whole batch | §3.2, Eq. 3; App. A.2 | :mod:`.query_writer` |
| train the link predictor on those links | §3.4 | :mod:`.chunk_graph` (training graph), :mod:`.training` |
| score a new query node's links | §3.4 inference | :mod:`.retriever` |

Inserted chunks get batches and queries of their own; ``update_policy`` then
fine-tunes, retrains or keeps the model. Deleting chunks removes their links and
keeps the model: it is inductive (App. B.3).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode, MetadataMode

from ..core.graph import TypedGraph
from ..core.index import GraphIndexBase
from ..core.llm import UsageMeter
from ..core.vectors import InMemoryVectorTable
from ..core.windows import (
    ChunkWindows,
    chunk_of,
    embed_with_windows,
    sentence_windows,
    window_rows,
)
from .chunk_graph import ChunkEntityKeys, Mention, chunk_edges, link_graph, no_edges, typed_graph
from .config import LPRAGConfig
from .link_graph import ChunkStructure, LinkGraph
from .persistence import LinkIndexState, read_state, write_state
from .predictor import LinkPredictor, LinkScorer, MeanScorer
from .prompts import LP_ANSWER_PROMPT
from .pseudo_queries import chunk_sentences
from .query_table import QueryTable
from .query_writer import QueryNodeWriter
from .retriever import LinkPredictionRetriever
from .training import TrainReport, train_link_predictor

logger = logging.getLogger(__name__)

#: ``window_unit`` of an index whose long chunks are scored by runs of sentences.
SENTENCE_RUNS = "sentences"
#: Most words in one run (about a short passage): chosen on 2wiki-101, plain and joined
#: eight passages to a document, from single sentences, 60 and 100 (docs/methods/lprag.md).
SENTENCE_RUN_WORDS = 60


@dataclass(frozen=True)
class _Snapshot:
    """What a retrieval reads: swapped as a whole after every change (thread safety)."""

    scorer: LinkScorer | MeanScorer
    chunk_ids: tuple[str, ...]
    z_chunks: np.ndarray
    #: The windows of chunks longer than the embedder's window.
    windows: ChunkWindows | None = None

    @cached_property
    def row_of(self) -> dict[str, int]:
        """Chunk id -> row (made once per snapshot, on first use)."""
        return {c: i for i, c in enumerate(self.chunk_ids)}


class ChunkQueryLinkIndex(GraphIndexBase):
    """LP-RAG's index: chunk kNN graph + synthetic query nodes + a trained link predictor.

    Pass ``transformations=[LLMAtomicChunker(llm=...)]`` to ``from_documents``
    for the paper's chunks, or ``[PassageParser()]`` for one chunk per document.

    Args:
        nodes: Chunk nodes.
        config: A :class:`~.config.LPRAGConfig` or preset name: ``default`` (LLM-free,
            bridges along title links), ``pseudo`` (the paper's settings with
            pseudo-queries), ``short-training``, ``paper`` (LLM-written queries;
            ``paper-musique``, ``paper-hotpotqa``, ``paper-2wiki``: Table 7).
        **kwargs: See :class:`~llama_index_graphrag_ext.core.index.GraphIndexBase`,
            and config fields by name.
    """

    index_kind = "lprag-chunk-query-link"
    format_version = 2
    config_class = LPRAGConfig

    def _configure(self) -> None:
        self._usage = UsageMeter()
        self._chunks = InMemoryVectorTable()
        self._windows = InMemoryVectorTable()  # long chunks' windows (core/windows.py)
        self._edges = no_edges()
        self._queries = QueryTable.empty()
        self._models: list[LinkPredictor] = []
        self._snapshot: _Snapshot | None = None
        #: One training report per ensemble member.
        self.train_reports: list[TrainReport] = []
        best = self.config.retrieval.long_chunks == "best-sentences"
        self.build_stats: dict[str, Any] = {"window_unit": SENTENCE_RUNS if best else "windows"}
        self._rng = np.random.default_rng(self.config.training.seed)
        self._graph = TypedGraph()
        self._mentions: list[Mention] = []
        self._entity_keys = ChunkEntityKeys()

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "chunks": len(self),
            "chunk_edges": int(len(self._edges[0])),
            "queries": len(self._queries),
            **self.build_stats,
        }
        reports = self.train_reports
        if reports:  # all members' training time; the epochs and validation are the first's
            first = reports[0]
            out.update(
                ensemble=len(reports),
                train_seconds=round(sum(r.train_seconds for r in reports), 3),
                epochs_run=first.epochs_run,
                best_epoch=first.best_epoch,
                val_auc=None if first.val_auc is None else round(first.val_auc, 4),
                val_hits_at_10=None if first.val_hits is None else round(first.val_hits, 4),
            )
        return out

    @property
    def usage(self) -> UsageMeter:
        """LLM calls and tokens of the synthetic-query step in this process (not persisted)."""
        return self._usage

    @property
    def train_report(self) -> TrainReport | None:
        """The first (with ``ensemble=1`` the only) predictor's training report."""
        return self.train_reports[0] if self.train_reports else None

    @property
    def num_queries(self) -> int:
        """Synthetic/pseudo query nodes in the training graph."""
        return len(self._queries)

    def queries(self) -> list[dict[str, Any]]:
        """The query nodes: id, text, linked chunk ids and origin (``llm``/``pseudo``/``bridge``)."""
        return self._queries.records(self._chunks.ids)

    def _add_chunks(self, nodes: Sequence[BaseNode]) -> None:
        if not nodes:
            return
        texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        vectors, windows = embed_with_windows(
            self.embed_model, texts, show_progress=self._show_progress, desc="Embedding chunks"
        )
        if self.window_unit == SENTENCE_RUNS:  # a long chunk's runs of sentences, not windows
            windows = sentence_windows(
                self.embed_model, texts, windows, chunk_sentences, SENTENCE_RUN_WORDS,
                show_progress=self._show_progress,
            )  # fmt: skip
        first_build = not self._models
        self._chunks.add([n.node_id for n in nodes], vectors)
        window_ids, window_matrix = window_rows([n.node_id for n in nodes], windows)
        if window_ids:
            self._windows.add(window_ids, window_matrix)
        self.build_stats["chunk_windows"] = len(self._windows)
        self._relink(nodes)
        # §3.2 / A.2: batches and queries for the new chunks only.
        targets = [self._chunks.row_of(n.node_id) for n in nodes]
        self._write_queries(targets, {n.node_id: n.get_content() for n in nodes})
        training = self.config.training
        if first_build or training.update_policy == "retrain":
            self._train(fine_tune=False)
        elif training.update_policy == "finetune":
            self._train(fine_tune=True, epochs=training.finetune_epochs)
        else:
            logger.info("update_policy='none': %d chunk(s) added, model kept", len(nodes))
        self._refresh()

    @property
    def window_unit(self) -> str:
        """What the long chunks' windows are: the embedder's windows (``"windows"``) or
        runs of whole sentences (``"sentences"``, for ``long_chunks="best-sentences"``).
        Set by the config an index is made with; one persisted before runs existed holds
        windows."""
        return self.build_stats.get("window_unit", "windows")

    def _remove_chunks(self, node_ids: Sequence[str]) -> None:
        gone = set(node_ids)
        old_ids = self._chunks.ids
        self._chunks.delete(list(node_ids))
        self._windows.delete([w for w in self._windows.ids if chunk_of(w) in gone])
        self.build_stats["chunk_windows"] = len(self._windows)
        # A kept row moves down by the number of deleted rows before it.
        kept = np.fromiter((cid not in gone for cid in old_ids), bool, len(old_ids))
        before = len(self._queries)
        self._queries = self._queries.remap_chunks(np.where(kept, np.cumsum(kept) - 1, -1))
        dropped = before - len(self._queries)
        if dropped:
            logger.info("removed %d query node(s) left without links", dropped)
        self._relink()
        self._refresh()

    def _searchable(self) -> dict[str, tuple[Sequence[str], np.ndarray]]:
        # The query node's message edges go to its M nearest chunks (§3.4).
        return {"chunks": (self._chunks.ids, self._chunks.matrix)}

    def nearest_chunk_rows(self, snapshot: _Snapshot, vector: np.ndarray, k: int) -> np.ndarray:
        """Rows of ``snapshot``'s ``k`` chunks nearest a unit ``vector``, best first
        (see :meth:`~..core.index.GraphIndexBase.searcher`)."""
        search = self.searcher("chunks", snapshot, snapshot.chunk_ids, snapshot.z_chunks)
        return search(vector, k)[0]

    def _relink(self, new_nodes: Sequence[BaseNode] = ()) -> None:
        """Rebuild the chunk graph (:func:`.chunk_graph.chunk_edges`)."""
        self._edges, self._mentions, stats = chunk_edges(
            self._chunks.matrix,
            self.config,
            lambda: self._titles_and_texts(new_nodes),
            self._entity_keys,
            self._chunks.ids,
        )
        if stats:
            self.build_stats.pop("graph_fallback", None)
            self.build_stats.update(stats)

    def _titles_and_texts(self, new_nodes: Sequence[BaseNode]) -> tuple[list, list[str]]:
        ids = self._chunks.ids
        known = {n.node_id: n for n in new_nodes}
        missing = [i for i in ids if i not in known]
        known.update(zip(missing, self.get_chunks(missing), strict=True))
        nodes = [known[i] for i in ids]
        return [n.metadata.get("title") for n in nodes], [n.get_content() for n in nodes]

    def _write_queries(self, targets: list[int], texts_by_id: dict[str, str]) -> None:
        """Batches for ``targets`` and their queries (§3.2, App. A.2), appended to the table."""
        table, stats = QueryNodeWriter(self).write(targets, texts_by_id)
        self._queries = self._queries.concat(table)
        for key, value in stats.items():
            self.build_stats[key] = self.build_stats.get(key, 0) + value

    def _link_graph(self) -> LinkGraph:
        return link_graph(self._chunks.matrix, self._edges, self._queries, self.config.graph.M)

    def _train(self, fine_tune: bool, epochs: int | None = None) -> None:
        """Train every ensemble member (member ``i`` from seed ``seed + i``), or go on
        training the current ones (``fine_tune``)."""
        graph, training = self._link_graph(), self.config.training
        trained = [
            train_link_predictor(
                graph,
                training.model_copy(
                    update={"seed": training.seed + i, "epochs": epochs or training.epochs}
                ),
                # A member the index lacks (none saved for it) starts afresh.
                model=self._models[i] if fine_tune and i < len(self._models) else None,
                show_progress=self._show_progress,
            )
            for i in range(training.ensemble)
        ]
        self._models = [model for model, _ in trained]
        self.train_reports = [report for _, report in trained]

    def _refresh(self) -> None:
        """Rebuild the retrieval snapshot and the visual graph after a change."""
        ids = self._chunks.ids
        rows, cols, weights = self._edges
        if not self._models or not ids:
            self._snapshot = None
        else:
            structure = ChunkStructure(len(ids), rows, cols, weights)
            # No copy: the table swaps in new arrays on writes, never edits them in place.
            matrix = self._chunks.matrix
            windows = ChunkWindows.from_table(
                self._windows.ids, self._windows.matrix, {cid: i for i, cid in enumerate(ids)}
            )
            scorers = [LinkScorer(model, matrix, structure) for model in self._models]
            scorer = scorers[0] if len(scorers) == 1 else MeanScorer(scorers)
            self._snapshot = _Snapshot(scorer, tuple(ids), matrix, windows)
        # Built lazily by ``graph``: it costs more memory than the vectors.
        self._graph = None

    @property
    def graph(self) -> TypedGraph | None:
        """Chunks (``similar`` edges) and queries (``asks`` edges) as a :class:`TypedGraph`."""
        if self._graph is None and len(self._chunks):
            self._graph = typed_graph(self._chunks.ids, self._edges, self._queries)
        return self._graph

    def _persist_state(self, folder: Path) -> None:
        parts = (self._chunks, self._edges, self._queries, self._models, self.train_reports)
        write_state(folder, LinkIndexState(*parts, self.build_stats, self._windows))

    def _load_state(self, folder: Path, manifest: dict[str, Any]) -> None:
        state = read_state(folder)
        self._chunks, self._edges, self._queries = state.chunks, state.edges, state.queries
        self.build_stats = state.build_stats
        self._windows = state.windows
        if state.models:
            self._models, self.train_reports = state.models, state.train_reports
            wanted = self.config.training.ensemble
            if len(self._models) != wanted:  # loaded with another ``ensemble=``
                logger.warning(
                    "LP-RAG index %s holds %d trained predictor(s) but ensemble=%d: "
                    "retrieval scores the saved ones until the next training (an insert), "
                    "which trains %d, any new member from scratch",
                    folder, len(self._models), wanted, wanted,
                )  # fmt: skip
        self._refresh()

    def as_retriever(self, **kwargs: Any) -> LinkPredictionRetriever:
        """A :class:`~.retriever.LinkPredictionRetriever` with the index's config (``kwargs``
        override it)."""
        return LinkPredictionRetriever(self, **kwargs)

    def as_query_engine(self, llm=None, **kwargs: Any):
        """A ``RetrieverQueryEngine`` with LP-RAG's answer prompt (chunks best first)."""
        kwargs.setdefault("text_qa_template", LP_ANSWER_PROMPT)
        return super().as_query_engine(llm=llm, **kwargs)
