"""``ChunkQueryLinkIndex``: chunks, synthetic queries and a trained link predictor (LP-RAG §3.2-3.4).

Building the index runs the paper's pipeline on chunk nodes, one step per module:

| step | paper | module |
|---|---|---|
| embed the chunks (the configured embedder) | §3.3 node features | here |
| join them by mutual kNN with cosine weights (``k = 5``) | §3.3, Eqs. 4-5 | :mod:`.chunk_graph` |
| sample one batch per chunk and write ``n_B = 2`` queries per batch, with the LLM or, LLM-free, as pseudo-queries; each query linked to every chunk of its batch | §3.2, Eq. 3; App. A.2 | :mod:`.query_nodes` |
| train the link predictor on those links | §3.4 | :mod:`.chunk_graph` (training graph), :mod:`.training` |
| score a new query node's links | §3.4 inference | :mod:`.retriever` |

The built state is written and read by :mod:`.persistence`.

Inserting chunks later (``insert_nodes``) follows ``update_policy``:
``"finetune"`` (default) re-samples batches and writes queries for the new
chunks only, then continues training the current model for ``finetune_epochs``
on all queries; ``"retrain"`` trains a fresh model on everything; ``"none"``
adds the chunks and their queries but keeps the model as is (the paper's
inductive use on unseen documents, App. B.3). Deleting chunks removes their
links (and queries left without links) and keeps the model: it is inductive.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode, MetadataMode

from ..core.graph import TypedGraph
from ..core.index import GraphIndexBase
from ..core.llm import LLMSettings, UsageMeter
from ..core.vectors import InMemoryVectorTable
from ..core.windows import ChunkWindows, chunk_of, embed_with_windows, window_rows, windows_missing
from .chunk_graph import (
    BRIDGE_LINKS,
    ChunkEntityKeys,
    Mention,
    chunk_edges,
    link_graph,
    no_edges,
    typed_graph,
)
from .models import (
    PREDICTORS,
    ChunkStructure,
    LinkGraph,
    LinkPredictor,
    LinkScorer,
    MeanScorer,
    TrainConfig,
    TrainReport,
    train_link_predictor,
)
from .persistence import MODEL_FILE, STATE_FILE, LinkIndexState, read_state, write_state
from .prompts import LP_ANSWER_PROMPT
from .query_nodes import QUERY_SOURCES, QUERY_STEP, QueryNodeWriter
from .query_table import QueryTable

__all__ = [
    "MODEL_FILE",
    "NO_TITLE_LINKS",
    "QUERY_SOURCES",
    "QUERY_STEP",
    "STATE_FILE",
    "UPDATE_POLICIES",
    "ChunkQueryLinkIndex",
]

logger = logging.getLogger(__name__)

UPDATE_POLICIES = ("finetune", "retrain", "none")
#: What ``knn_edges=False`` does when no chunk names another's title: the paper's
#: mutual-kNN graph, no chunk edges at all, or an error.
NO_TITLE_LINKS = ("knn", "none", "raise")


@dataclass(frozen=True)
class _Snapshot:
    """What a retrieval reads: swapped as a whole after every change (thread safety)."""

    scorer: LinkScorer | MeanScorer
    chunk_ids: tuple[str, ...]
    z_chunks: np.ndarray
    #: The windows of chunks longer than the embedder's window (the retriever's
    #: ``long_chunks="best-window"`` scores such a chunk's cosine by its best one).
    windows: ChunkWindows | None = None


class ChunkQueryLinkIndex(GraphIndexBase):
    """LP-RAG's index: chunk kNN graph + synthetic query nodes + a trained link predictor.

    Construct it with ``from_documents`` (pass
    ``transformations=[LLMAtomicChunker(llm=...)]`` for the paper's chunks, or
    ``[PassageParser()]`` for one chunk per document), or with chunk nodes; the
    usual ``embed_model``, ``llm`` and ``callback_manager`` arguments fall back to
    ``Settings``. Its own settings are keyword arguments:

    * ``predictor``: ``ncn`` (paper default), ``sage``, ``gcn`` or ``mlp``;
    * ``k``: neighbours of the mutual-kNN chunk graph (5);
    * ``query_neighbors``: chunks a query node is attached to for messages (``M`` = 10);
    * ``queries_per_batch``: queries per batch (``n_B`` = 2);
    * ``query_source``: ``llm``, ``pseudo`` or ``auto``: the index's LLM as the
      suite's rule picks it (``llm=``, ``Settings.llm``, the environment, the
      embedded SmolLM2, which writes short questions), pseudo-queries only when
      none resolves; ``llm`` makes no LLM an error;
    * ``max_llm_batches``: bound on LLM-written batches (the rest get pseudo-queries);
    * ``pseudo_max_words``: longest sentence window in a pseudo-query (20);
    * ``bridges``: title-mention edges and cross-passage (bridge) pseudo-queries
      (:mod:`.bridges`, our addition); ``knn_edges=False`` then drops the
      mutual-kNN edges, so messages pass only along title links;
      ``bridge_mask`` drops the mentioned title from a bridge query;
      ``bridges_per_chunk`` bounds the bridge queries of one chunk (1);
      ``bridge_links``: what a bridge links by, ``titles`` (the default), ``entities``
      (two chunks naming the same named entity, one that at most
      ``bridge_entity_chunks`` = 5 chunks name: spaCy's NER) or ``both``. Off the
      presets: on the dev sets entity links raised recall@10 but not recall@5, and
      lowered recall@2 (docs/methods/lprag.md);
      ``on_no_title_links``: with ``knn_edges=False`` and no chunk naming another's
      title (no titles, or titles nobody mentions), ``none`` (the default) trains
      and scores with no chunk-chunk edge, ``knn`` falls back to the paper's
      mutual-kNN graph (both with a WARNING and ``build_stats["graph_fallback"]``),
      ``raise`` raises. ``none`` because on the dev sets with their titles
      removed the kNN fallback cost recall@5 0.11-0.13 against dense, and no
      edges kept dense's level (docs/methods/lprag.md);
    * ``hidden``, ``layers``, ``lr``, ``weight_decay``, ``epochs``, ``negatives``,
      ``hard_negative_fraction``, ``val_fraction``, ``patience``, ``seed``,
      ``threads``, ``pair_batch``, ``links_per_epoch``: training (see
      :class:`.TrainConfig`);
    * ``ensemble``: predictors trained, from seeds ``seed``, ``seed + 1``, ...;
      retrieval averages their logits (1, the paper's single predictor; our
      addition: one predictor trained on weak supervision varies with its seed);
    * ``update_policy``: ``finetune``, ``retrain`` or ``none`` (module docs);
    * ``finetune_epochs``: epochs of a fine-tune after an insert (20);
    * ``llm_cache_path``: optional sqlite cache of LLM answers;
    * ``max_concurrency``, ``max_attempts``, ``timeout``, ``on_llm_failure``: the
      LLM call settings (see :class:`~..core.llm.LLMSettings`); a batch whose
      questions cannot be had gets pseudo-queries, counted in ``llm_steps``.
    """

    index_kind = "lprag-chunk-query-link"
    format_version = 1
    # Indexes persisted without the setting fell back to the kNN graph (then the default).
    config_before = {"on_no_title_links": "knn"}

    def _configure(
        self,
        predictor: str = "ncn",
        k: int = 5,
        query_neighbors: int = 10,
        queries_per_batch: int = 2,
        query_source: str = "auto",
        max_llm_batches: int | None = None,
        pseudo_max_words: int = 20,
        bridges: bool = False,
        knn_edges: bool = True,
        bridge_mask: bool = False,
        bridges_per_chunk: int = 1,
        bridge_links: str = "titles",
        bridge_entity_chunks: int = 5,
        on_no_title_links: str = "none",
        hidden: int = 256,
        layers: int = 1,
        lr: float = 0.0043,
        weight_decay: float = 1e-8,
        epochs: int = 100,
        negatives: int = 3,
        hard_negative_fraction: float = 0.0,
        val_fraction: float = 0.1,
        patience: int = 4,
        seed: int = 0,
        threads: int = 2,
        pair_batch: int = 32768,
        links_per_epoch: int = 65536,
        update_policy: str = "finetune",
        finetune_epochs: int = 20,
        ensemble: int = 1,
        llm_cache_path: str | None = None,
        max_concurrency: int = 4,
        max_attempts: int = 3,
        timeout: float | None = 60.0,
        on_llm_failure: str = "fallback",
    ) -> None:
        if predictor not in PREDICTORS:
            raise ValueError(f"unknown predictor {predictor!r}; choose one of {PREDICTORS}")
        if query_source not in QUERY_SOURCES:
            raise ValueError(f"query_source must be one of {QUERY_SOURCES}")
        if update_policy not in UPDATE_POLICIES:
            raise ValueError(f"update_policy must be one of {UPDATE_POLICIES}")
        for name, value in (
            ("k", k),
            ("query_neighbors", query_neighbors),
            ("queries_per_batch", queries_per_batch),
            ("pseudo_max_words", pseudo_max_words),
            ("finetune_epochs", finetune_epochs),
            ("ensemble", ensemble),
            ("bridges_per_chunk", bridges_per_chunk),
            ("max_concurrency", max_concurrency),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        if not knn_edges and not bridges:
            raise ValueError("knn_edges=False needs bridges=True (the graph would have no edges)")
        if bridge_links not in BRIDGE_LINKS:
            raise ValueError(f"bridge_links must be one of {BRIDGE_LINKS}, got {bridge_links!r}")
        if bridge_entity_chunks < 2:
            raise ValueError("bridge_entity_chunks must be >= 2 (a link needs two chunks)")
        if on_no_title_links not in NO_TITLE_LINKS:
            raise ValueError(f"on_no_title_links must be one of {NO_TITLE_LINKS}")
        if max_llm_batches is not None and max_llm_batches < 0:
            raise ValueError("max_llm_batches must be >= 0 or None")
        self._settings = {
            "predictor": predictor,
            "k": k,
            "query_neighbors": query_neighbors,
            "queries_per_batch": queries_per_batch,
            "query_source": query_source,
            "max_llm_batches": max_llm_batches,
            "pseudo_max_words": pseudo_max_words,
            "bridges": bool(bridges),
            "knn_edges": bool(knn_edges),
            "bridge_mask": bool(bridge_mask),
            "bridges_per_chunk": int(bridges_per_chunk),
            "bridge_links": bridge_links,
            "bridge_entity_chunks": int(bridge_entity_chunks),
            "on_no_title_links": on_no_title_links,
            "update_policy": update_policy,
            "finetune_epochs": finetune_epochs,
            "ensemble": int(ensemble),
            "llm_cache_path": llm_cache_path,
            "max_concurrency": max_concurrency,
        }
        self.llm_call_settings = LLMSettings(
            max_concurrency=max_concurrency,
            max_attempts=max_attempts,
            timeout=timeout,
            cache_path=llm_cache_path,
            on_llm_failure=on_llm_failure,
        )
        self._usage = UsageMeter()
        self.train_config = TrainConfig(
            predictor=predictor,
            hidden=hidden,
            layers=layers,
            lr=lr,
            weight_decay=weight_decay,
            epochs=epochs,
            negatives=negatives,
            hard_negative_fraction=hard_negative_fraction,
            val_fraction=val_fraction,
            patience=patience,
            seed=seed,
            threads=threads,
            pair_batch=pair_batch,
            links_per_epoch=links_per_epoch,
        )
        self._chunks = InMemoryVectorTable()
        self._windows = InMemoryVectorTable()  # long chunks' windows (core/windows.py)
        self._edges = no_edges()
        self._queries = QueryTable.empty()
        self._models: list[LinkPredictor] = []
        self._snapshot: _Snapshot | None = None
        #: One training report per ensemble member.
        self.train_reports: list[TrainReport] = []
        self.build_stats: dict[str, Any] = {}
        self._rng = np.random.default_rng(seed)
        self._graph = TypedGraph()
        self._mentions: list[Mention] = []
        self._entity_keys = ChunkEntityKeys()

    def config(self) -> dict[str, Any]:
        """Settings stored in the manifest (and passed back on load)."""
        train = self.train_config.to_dict()
        train.pop("hard_pool")
        train.pop("eval_every")
        calls = self.llm_call_settings
        llm = {"max_attempts": calls.max_attempts, "timeout": calls.timeout}
        return {**self._settings, **llm, "on_llm_failure": calls.on_llm_failure, **train}

    @property
    def usage(self) -> UsageMeter:
        """LLM calls and tokens of the synthetic-query step in this process (not persisted)."""
        return self._usage

    @property
    def train_report(self) -> TrainReport | None:
        """The first (with ``ensemble=1`` the only) predictor's training report."""
        return self.train_reports[0] if self.train_reports else None

    @property
    def predictor(self) -> str:
        """The link predictor in use."""
        return self.train_config.predictor

    @property
    def query_neighbors(self) -> int:
        """``M``: chunks a query node is attached to."""
        return int(self._settings["query_neighbors"])

    @property
    def num_queries(self) -> int:
        """Synthetic/pseudo query nodes in the training graph."""
        return len(self._queries)

    def queries(self) -> list[dict[str, Any]]:
        """The query nodes: id, text, linked chunk ids and origin (``llm``/``pseudo``/``bridge``)."""
        return self._queries.records(self._chunks.ids)

    # ------------------------------------------------------------------ building

    def _add_chunks(self, nodes: Sequence[BaseNode]) -> None:
        if not nodes:
            return
        texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        vectors, windows = embed_with_windows(
            self.embed_model, texts, show_progress=self._show_progress, desc="Embedding chunks"
        )
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
        policy = self._settings["update_policy"]
        if first_build or policy == "retrain":
            self._train(fine_tune=False)
        elif policy == "finetune":
            self._train(fine_tune=True, epochs=int(self._settings["finetune_epochs"]))
        else:
            logger.info("update_policy='none': %d chunk(s) added, model kept", len(nodes))
        self._refresh()

    def _remove_chunks(self, node_ids: Sequence[str]) -> None:
        gone = set(node_ids)
        old_ids = self._chunks.ids
        self._chunks.delete(list(node_ids))
        self._windows.delete([w for w in self._windows.ids if chunk_of(w) in gone])
        if "chunk_windows" in self.build_stats:
            self.build_stats["chunk_windows"] = len(self._windows)
        # The table keeps the other rows in order: a kept row moves down by the
        # number of deleted rows before it.
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
        """Rows of ``snapshot``'s ``k`` chunks nearest a unit ``vector``, best first.

        Exact in memory, or the ``vector_store``'s search when the index has one
        (candidates re-scored exactly; see :meth:`~..core.index.GraphIndexBase.searcher`).
        """
        search = self.searcher("chunks", snapshot, snapshot.chunk_ids, snapshot.z_chunks)
        return search(vector, k)[0]

    def _relink(self, new_nodes: Sequence[BaseNode] = ()) -> None:
        """The chunk graph: mutual kNN (Eq. 4-5), with ``bridges`` title-mention edges
        too (:func:`.chunk_graph.chunk_edges`)."""
        self._edges, self._mentions, stats = chunk_edges(
            self._chunks.matrix,
            self._settings,
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
        return link_graph(self._chunks.matrix, self._edges, self._queries, self.query_neighbors)

    def _train(self, fine_tune: bool, epochs: int | None = None) -> None:
        """Train every ensemble member (member ``i`` from seed ``seed + i``), or go on
        training the current ones (``fine_tune``)."""
        graph, base = self._link_graph(), self.train_config.to_dict()
        trained = [
            train_link_predictor(
                graph,
                TrainConfig(
                    **{**base, "seed": base["seed"] + i, "epochs": epochs or base["epochs"]}
                ),
                # A member the index lacks (none saved for it) starts afresh.
                model=self._models[i] if fine_tune and i < len(self._models) else None,
                show_progress=self._show_progress,
            )
            for i in range(int(self._settings["ensemble"]))
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
        # The TypedGraph is only for viz and persistence: built when first asked
        # for (a networkx graph of every chunk, query and link costs more memory
        # than the vectors; docs/scaling.md).
        self._graph = None

    @property
    def graph(self) -> TypedGraph | None:
        """Chunks (``similar`` edges) and queries (``asks`` edges) as a :class:`TypedGraph`."""
        if self._graph is None and len(self._chunks):
            self._graph = typed_graph(self._chunks.ids, self._edges, self._queries)
        return self._graph

    # ------------------------------------------------------------------ persistence

    def _persist_state(self, folder: Path) -> None:
        state = LinkIndexState(
            self._chunks,
            self._edges,
            self._queries,
            self._models,
            self.train_reports,
            self.build_stats,
            self._windows,
        )
        write_state(folder, state)

    def _load_state(self, folder: Path, manifest: dict[str, Any]) -> None:
        state = read_state(folder)
        self._chunks, self._edges, self._queries = state.chunks, state.edges, state.queries
        self.build_stats = state.build_stats
        self._windows = state.windows if state.windows is not None else InMemoryVectorTable()
        if state.windows is None and len(self._chunks):
            windows_missing("LP-RAG", folder, len(self._chunks), self.build_stats)
        if state.models:
            self._models, self.train_reports = state.models, state.train_reports
            wanted = int(self._settings["ensemble"])
            if len(self._models) != wanted:  # loaded with another ``ensemble=``
                logger.warning(
                    "LP-RAG index %s holds %d trained predictor(s) but ensemble=%d: "
                    "retrieval scores the saved ones until the next training (an insert), "
                    "which trains %d, any new member from scratch",
                    folder, len(self._models), wanted, wanted,
                )  # fmt: skip
        self._refresh()

    # ------------------------------------------------------------------ engines

    def as_retriever(self, **kwargs: Any):
        """A :class:`~.retriever.LinkPredictionRetriever` over this index."""
        from .retriever import LinkPredictionRetriever

        kwargs.setdefault("callback_manager", self._callback_manager)
        return LinkPredictionRetriever(self, **kwargs)

    def as_query_engine(self, llm=None, **kwargs: Any):
        """A ``RetrieverQueryEngine`` with LP-RAG's answer prompt (chunks best first)."""
        kwargs.setdefault("text_qa_template", LP_ANSWER_PROMPT)
        return super().as_query_engine(llm=llm, **kwargs)
