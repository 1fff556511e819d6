"""``ChunkQueryLinkIndex``: chunks, synthetic queries and a trained link predictor (LP-RAG §3.2-3.4).

Building the index runs the paper's pipeline on chunk nodes:

1. embed the chunks (§3.3 node features; the configured embedder);
2. join them by mutual kNN with cosine weights (Eq. 4-5, ``k = 5``);
3. sample one batch per chunk and write ``n_B = 2`` queries per batch, with the
   LLM (§3.2) or, LLM-free, as pseudo-queries (see :mod:`.queries`); each query
   is linked to every chunk of its batch;
4. train the link predictor on those links (§3.4, :mod:`.models`).

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
import torch
from llama_index.core.schema import BaseNode, MetadataMode

from ..core.embeddings import embed_texts, knn_graph, mutual_knn_edges
from ..core.graph import TypedGraph
from ..core.index import GraphIndexBase
from ..core.llm import LLMSettings, UsageMeter
from ..core.persist import read_arrays, read_json, write_arrays, write_json
from ..core.vectors import InMemoryVectorTable
from .bridges import bridge_edges, bridge_queries, title_mentions, union_edges
from .chunker import new_rule_sentencizer
from .models import (
    PREDICTORS,
    ChunkStructure,
    LinkGraph,
    LinkPredictor,
    LinkScorer,
    TrainConfig,
    TrainReport,
    train_link_predictor,
)
from .prompts import LP_ANSWER_PROMPT
from .queries import (
    ChunkSentences,
    SyntheticQueryGenerator,
    chunk_sentences,
    neighbor_lists,
    pseudo_queries,
    sample_batches,
)
from .query_table import ORIGINS, QueryTable, QueryTableBuilder

logger = logging.getLogger(__name__)

MODEL_FILE = "link_predictor.pt"
STATE_FILE = "lprag_state.json"
QUERY_SOURCES = ("auto", "llm", "pseudo")
#: The LLM step's name in the step ledger.
QUERY_STEP = "synthetic-queries"
UPDATE_POLICIES = ("finetune", "retrain", "none")
#: Batches whose queries are made at a time (see ``_write_queries``).
_QUERY_BLOCK = 512


@dataclass(frozen=True)
class _Snapshot:
    """What a retrieval reads: swapped as a whole after every change (thread safety)."""

    scorer: LinkScorer
    chunk_ids: tuple[str, ...]
    z_chunks: np.ndarray


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
    * ``hidden``, ``layers``, ``lr``, ``weight_decay``, ``epochs``, ``negatives``,
      ``hard_negative_fraction``, ``val_fraction``, ``patience``, ``seed``,
      ``threads``, ``pair_batch``, ``links_per_epoch``: training (see
      :class:`.TrainConfig`);
    * ``update_policy``: ``finetune``, ``retrain`` or ``none`` (module docs);
    * ``finetune_epochs``: epochs of a fine-tune after an insert (20);
    * ``llm_cache_path``: optional sqlite cache of LLM answers;
    * ``max_concurrency``, ``max_attempts``, ``timeout``, ``on_llm_failure``: the
      LLM call settings (see :class:`~..core.llm.LLMSettings`); a batch whose
      questions cannot be had gets pseudo-queries, counted in ``llm_steps``.
    """

    index_kind = "lprag-chunk-query-link"
    format_version = 1

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
            ("max_concurrency", max_concurrency),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")
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
            "update_policy": update_policy,
            "finetune_epochs": finetune_epochs,
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
        self._edges = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
        self._queries = QueryTable.empty()
        self._model: LinkPredictor | None = None
        self._snapshot: _Snapshot | None = None
        self.train_report: TrainReport | None = None
        self.build_stats: dict[str, Any] = {}
        self._rng = np.random.default_rng(seed)
        self._graph = TypedGraph()
        self._mentions: list[tuple[int, int]] = []

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
        vectors = embed_texts(
            self.embed_model, texts, show_progress=self._show_progress, desc="Embedding chunks"
        )
        first_build = self._model is None
        self._chunks.add([n.node_id for n in nodes], vectors)
        self._relink(nodes)
        # §3.2 / A.2: batches and queries for the new chunks only.
        targets = [self._chunks.row_of(n.node_id) for n in nodes]
        self._write_queries(targets, {n.node_id: n.get_content() for n in nodes})
        policy = self._settings["update_policy"]
        if first_build or policy == "retrain":
            self._train(model=None)
        elif policy == "finetune":
            self._train(model=self._model, epochs=int(self._settings["finetune_epochs"]))
        else:
            logger.info("update_policy='none': %d chunk(s) added, model kept", len(nodes))
        self._refresh()

    def _remove_chunks(self, node_ids: Sequence[str]) -> None:
        gone = set(node_ids)
        old_ids = self._chunks.ids
        self._chunks.delete(list(node_ids))
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
        """Mutual-kNN chunk graph with cosine weights (Eq. 4-5), blocked exact search.

        With ``bridges`` on, title-mention edges join it (see :mod:`.bridges`).
        """
        matrix = self._chunks.matrix
        idx, sims = knn_graph(matrix, int(self._settings["k"]))
        self._edges = mutual_knn_edges(idx, sims)
        self._mentions = []
        if self._settings["bridges"] and len(matrix):
            titles, texts = self._titles_and_texts(new_nodes)
            self._mentions = title_mentions(titles, texts)
            extra = bridge_edges(self._mentions, matrix)
            self._edges = union_edges(self._edges, extra, len(matrix))
            self.build_stats["bridge_pairs"] = len(self._mentions)
            self.build_stats["bridge_edges"] = int(len(extra[0]))

    def _titles_and_texts(self, new_nodes: Sequence[BaseNode]) -> tuple[list, list[str]]:
        ids = self._chunks.ids
        known = {n.node_id: n for n in new_nodes}
        missing = [i for i in ids if i not in known]
        known.update(zip(missing, self.get_chunks(missing), strict=True))
        nodes = [known[i] for i in ids]
        return [n.metadata.get("title") for n in nodes], [n.get_content() for n in nodes]

    def _write_queries(self, targets: list[int], texts_by_id: dict[str, str]) -> None:
        """Batches for ``targets`` and their queries (§3.2, App. A.2), appended to the table.

        The random draws come in a fixed order (batches, LLM choice, bridges,
        pseudo-queries batch by batch), so a seeded build is reproducible.
        """
        ids = self._chunks.ids
        rows, cols, _ = self._edges
        batches = sample_batches(neighbor_lists(len(ids), rows, cols), targets, self._rng)
        texts = self._texts_of_rows({int(c) for b in batches for c in b}, ids, texts_by_id)
        stats = {"batches": len(batches), "llm_batches": 0, "llm_queries": 0, "pseudo_queries": 0}
        llm_queries = self._llm_queries(batches, texts, stats)
        # A splitter of its own, dropped with its vocabulary at the end (see
        # new_rule_sentencizer: the shared one kept 3 MB at 4,000 chunks).
        nlp = new_rule_sentencizer()
        bridge = self._bridge_queries(targets, texts, nlp)
        fallback = [b for b in range(len(batches)) if b not in llm_queries]
        need = {int(c): texts[int(c)] for b in fallback for c in batches[b]}
        sentences = ChunkSentences(need, nlp)
        builder = QueryTableBuilder()
        # Bounded working set: pseudo-queries are made a block of batches at a
        # time and go straight into the table's flat buffers, so no per-query
        # object and only one block's sentence strings exist at any moment.
        for start in range(0, len(batches), _QUERY_BLOCK):
            block = range(start, min(len(batches), start + _QUERY_BLOCK))
            self._add_block_queries(builder, block, batches, llm_queries, sentences, ids)
        for text, pair in bridge:
            builder.add(text, pair, "bridge", first_chunk_id=ids[pair[0]])
        del need, sentences, nlp, texts
        vectors = embed_texts(
            self.embed_model,
            builder.texts(),
            show_progress=self._show_progress,
            desc="Embedding queries",
        )
        table = builder.build(vectors)
        per_origin = np.bincount(table.origins, minlength=len(ORIGINS)).tolist()
        stats["bridge_queries"] = len(bridge)
        stats["llm_queries"] = per_origin[ORIGINS.index("llm")]
        stats["pseudo_queries"] = per_origin[ORIGINS.index("pseudo")]
        self._queries = self._queries.concat(table)
        for key, value in stats.items():
            self.build_stats[key] = self.build_stats.get(key, 0) + value

    def _texts_of_rows(
        self, rows: set[int], ids: Sequence[str], texts_by_id: dict[str, str]
    ) -> dict[int, str]:
        """Text of each chunk row: the new chunks' from ``texts_by_id``, older ones from the docstore."""
        texts = {r: texts_by_id.get(ids[r]) for r in rows}
        missing = [r for r, t in texts.items() if t is None]
        if missing:
            for r, node in zip(missing, self.get_chunks([ids[r] for r in missing]), strict=True):
                texts[r] = node.get_content()
        return texts

    def _llm_queries(
        self, batches: list[np.ndarray], texts: dict[int, str], stats: dict[str, int]
    ) -> dict[int, list[str]]:
        """LLM-written questions by batch (§3.2, Eq. 3); only batches that got some."""
        llm = self._query_llm()
        if llm is None:
            self.llm_steps.count(QUERY_STEP, len(batches))
            return {}
        bound = self._settings["max_llm_batches"]
        chosen = list(range(len(batches)))
        if bound is not None and bound < len(batches):
            chosen = sorted(self._rng.choice(len(batches), size=bound, replace=False).tolist())
            logger.info(
                "synthetic queries bounded: %d of %d batches use the LLM, the rest pseudo-queries",
                bound,
                len(batches),
            )
        generator = SyntheticQueryGenerator(
            llm,
            per_batch=int(self._settings["queries_per_batch"]),
            settings=self.llm_call_settings,
            meter=self.usage,
        )
        answers = generator.generate(
            [[texts[int(c)] for c in batches[b]] for b in chosen],
            show_progress=self._show_progress,
        )
        self.llm_steps.count(QUERY_STEP, len(chosen))
        # One WARNING with the counts (an error with on_llm_failure="raise").
        self.llm_steps.fell_back(
            QUERY_STEP,
            generator.failures,
            what="batch",
            on_failure=self.llm_call_settings.on_llm_failure,
        )
        asked = dict(generator.stats)
        stats["llm_batches_asked"] = asked.pop("batches", len(chosen))
        stats.update({f"llm_{k}": v for k, v in asked.items() if k != "queries"})
        # Batches that got usable LLM questions (the others got pseudo-queries).
        stats["llm_batches"] = sum(1 for q in answers if q)
        return {b: qs for b, qs in zip(chosen, answers, strict=True) if qs}

    def _bridge_queries(
        self, targets: list[int], texts: dict[int, str], nlp
    ) -> list[tuple[str, list[int]]]:
        """Bridge pseudo-queries of the targets that mention another chunk (:mod:`.bridges`)."""
        if not (self._settings["bridges"] and getattr(self, "_mentions", None)):
            return []
        sources = sorted({a for a, _ in self._mentions} & set(targets))
        titles, _ = self._titles_and_texts(())
        sents = dict(zip(sources, chunk_sentences([texts[i] for i in sources], nlp), strict=True))
        return bridge_queries(
            self._mentions,
            titles,
            _Lookup(sents),
            sources,
            self._rng,
            max_words=int(self._settings["pseudo_max_words"]),
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
                self._rng,
                per_batch=int(self._settings["queries_per_batch"]),
                max_words=int(self._settings["pseudo_max_words"]),
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
        source = self._settings["query_source"]
        if source == "pseudo":
            self.llm_steps.chose_llm_free(
                QUERY_STEP, "pseudo-queries (sentence windows)", "query_source='pseudo'"
            )
            return None
        choice = self.llm_choice  # the suite's rule, resolved once for the index
        if choice.llm is None and source == "llm":
            raise ValueError("query_source='llm' but no LLM resolves (provider 'none')")
        return self.llm_steps.plan(
            QUERY_STEP,
            choice,
            needs="text",
            stand_in="pseudo-queries (sentence windows)",
            on_failure=self.llm_call_settings.on_llm_failure,
        )

    def _link_graph(self) -> LinkGraph:
        z_c = self._chunks.matrix
        m = min(self.query_neighbors, len(z_c))
        queries = self._queries
        q_nb, _ = knn_graph(queries.vectors, m, others=z_c)
        pos_q, pos_c = queries.links()
        rows, cols, weights = self._edges
        return LinkGraph(
            z_c,
            rows,
            cols,
            weights,
            queries.vectors,
            q_nb,
            np.ones(q_nb.shape, np.float32),  # Eq. 5: query-chunk edges weigh 1
            pos_q,
            pos_c,
        )

    def _train(self, model: LinkPredictor | None, epochs: int | None = None) -> None:
        config = self.train_config
        if epochs is not None:
            config = TrainConfig(**{**config.to_dict(), "epochs": epochs})
        model, report = train_link_predictor(
            self._link_graph(), config, model=model, show_progress=self._show_progress
        )
        self._model, self.train_report = model, report

    def _refresh(self) -> None:
        """Rebuild the retrieval snapshot and the visual graph after a change."""
        ids = self._chunks.ids
        rows, cols, weights = self._edges
        if self._model is None or not ids:
            self._snapshot = None
        else:
            structure = ChunkStructure(len(ids), rows, cols, weights)
            # No copy: the table swaps in new arrays on writes, never edits them in place.
            matrix = self._chunks.matrix
            self._snapshot = _Snapshot(
                LinkScorer(self._model, matrix, structure), tuple(ids), matrix
            )
        # The TypedGraph is only for viz and persistence: built when first asked
        # for (a networkx graph of every chunk, query and link costs more memory
        # than the vectors; docs/scaling.md).
        self._graph = None

    @property
    def graph(self) -> TypedGraph | None:
        """Chunks (``similar`` edges) and queries (``asks`` edges) as a :class:`TypedGraph`."""
        if self._graph is None and len(self._chunks):
            self._graph = self._typed_graph()
        return self._graph

    def _typed_graph(self) -> TypedGraph:
        ids = self._chunks.ids
        rows, cols, weights = self._edges
        graph = TypedGraph()
        graph.add_nodes(ids, "chunk")
        graph.add_edges(
            ((ids[a], ids[b], float(w)) for a, b, w in zip(rows, cols, weights, strict=True)),
            "similar",
        )
        records = self._queries.records(ids)
        graph.add_nodes(
            [q["id"] for q in records],
            "query",
            [{"text": q["text"], "origin": q["origin"]} for q in records],
        )
        graph.add_edges(((q["id"], c, 1.0) for q in records for c in q["chunks"]), "asks")
        return graph

    # ------------------------------------------------------------------ persistence

    def _persist_state(self, folder: Path) -> None:
        self._chunks.persist(folder, "chunks")
        rows, cols, weights = self._edges
        write_arrays(folder / "chunk_graph.npz", rows=rows, cols=cols, weights=weights)
        write_arrays(folder / "queries.npz", matrix=self._queries.vectors)
        write_json(folder / "queries.json", self._queries.records(self._chunks.ids))
        state: dict[str, Any] = {"build_stats": self.build_stats, "model": None}
        if self._model is not None:
            torch.save(self._model.state_dict(), folder / MODEL_FILE)
            state["model"] = {
                "kind": self._model.kind,
                "in_dim": int(self._model.lin[0].in_features),
                "hidden": self._model.hidden,
                "layers": self._model.num_layers,
            }
            state["train_report"] = self.train_report.to_dict() if self.train_report else None
        write_json(folder / STATE_FILE, state)

    def _load_state(self, folder: Path, manifest: dict[str, Any]) -> None:
        self._chunks = InMemoryVectorTable.load(folder, "chunks")
        arrays = read_arrays(folder / "chunk_graph.npz")
        self._edges = (arrays["rows"], arrays["cols"], arrays["weights"].astype(np.float32))
        row_of = {cid: i for i, cid in enumerate(self._chunks.ids)}
        self._queries = QueryTable.from_records(
            read_json(folder / "queries.json"),
            row_of,
            read_arrays(folder / "queries.npz")["matrix"].astype(np.float32),
        )
        state = read_json(folder / STATE_FILE)
        self.build_stats = dict(state.get("build_stats", {}))
        meta = state.get("model")
        if meta is not None:
            model = LinkPredictor(meta["kind"], meta["in_dim"], meta["hidden"], meta["layers"])
            model.load_state_dict(torch.load(folder / MODEL_FILE, weights_only=True))
            self._model = model
            if state.get("train_report"):
                self.train_report = TrainReport.from_dict(state["train_report"])
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


class _Lookup:
    """Sentences by chunk index (a dict viewed as a sequence)."""

    def __init__(self, by_index: dict[int, list[str]]) -> None:
        self._by_index = by_index

    def __getitem__(self, i: int) -> list[str]:
        return self._by_index.get(int(i), [])
