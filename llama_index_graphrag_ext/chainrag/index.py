"""``SentenceGraphIndex``: ChainRAG's LLM-free sentence graph as a LlamaIndex index (paper §3.1)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode, MetadataMode

from ..core.embeddings import embed_texts
from ..core.graph import TypedGraph
from ..core.index import GraphIndexBase
from ..core.persist import read_arrays, read_json, write_arrays, write_json
from ..core.text import DEFAULT_ENTITY_LABELS, analyze_batch, load_spacy, normalize_entity
from ..core.text.parallel import TASK_TEXTS, ParsePool, available_processes
from .config import EDGE_KINDS, ChainRAGConfig
from .engine import ChainRAGQueryEngine
from .key_entities import KeyCut
from .retriever import SentenceGraphRetriever
from .sentence_graph import SentenceGraph, sentence_ids
from .sentences import SentenceTable, SentenceTableBuilder

logger = logging.getLogger(__name__)

_RECORDS_FILE = "sentences.json"
_VECTORS_FILE = "sentence_vectors.npz"
#: Chunks parsed and packed at a time.
_PARSE_BATCH = 64


class SentenceGraphIndex(GraphIndexBase):
    """One node per sentence, linked by EC, SS and SA edges; built without any LLM.

    Sentences and their entities come from one spaCy pass per chunk. Inserting or
    deleting chunks rebuilds the edges (SS and EC depend on the whole corpus), never
    re-embeds or re-parses old chunks.

    Args:
        nodes: Chunk nodes (``from_documents`` makes them).
        config: A :class:`~.config.ChainRAGConfig` or preset name; its ``graph``
            section builds the index, the others serve its retrievers and engines.
        **kwargs: The :class:`~..core.index.GraphIndexBase` arguments (``embed_model``,
            ``llm``, ...) and config fields by name.
    """

    index_kind = "chainrag-sentence-graph"
    format_version = 2
    config_class = ChainRAGConfig

    def _configure(self) -> None:
        graph = self.config.graph
        self.key_cut = KeyCut(
            alpha=graph.alpha,
            importance=graph.key_importance,
            cut=graph.key_cut,
            max_df=graph.max_df or None,
            keep_rarest=graph.keep_rarest,
        )
        self.nlp_processes = graph.nlp_processes or available_processes()
        labels = DEFAULT_ENTITY_LABELS if graph.entity_labels is None else graph.entity_labels
        self.entity_labels = sorted(labels)
        self._sentences = SentenceTable.empty()
        self._vectors: np.ndarray | None = None
        self._sg = SentenceGraph.build(self._sentences, np.zeros((0, 0), np.float32))
        self._graph = None  # the TypedGraph view, built on demand (see ``graph``)

    def stats(self) -> dict[str, Any]:
        sg = self._sg
        # No exact EC pair count: K @ K.T grows with the square of a hub's sentences.
        return {
            "chunks": len(self),
            "sentences": len(sg),
            "edges": {"SS": sg.num_edges("SS"), "SA": sg.num_edges("SA")},
            "ec": sg.ec_summary(),
        }

    # ------------------------------------------------------------------ reading

    @property
    def sentence_graph(self) -> SentenceGraph:
        """The current read-only sentence graph (a consistent snapshot)."""
        return self._sg

    @property
    def graph(self) -> TypedGraph | None:
        """A :class:`TypedGraph` view for ``graphrag-ext viz`` (built lazily): ``SS`` and ``SA``
        edges between sentences, ``EC`` from a sentence to each of its key entities."""
        if self._graph is None and len(self._sg):
            self._graph = to_typed_graph(self._sg)
        return self._graph

    def _searchable(self) -> dict[str, tuple[Sequence[str], np.ndarray]]:
        sg = self._sg  # the seed search (first round) looks up sentences
        return {"sentences": (sentence_ids(sg), sg.vectors)}

    # ------------------------------------------------------------------ building

    def _sentence_inputs(self, node: BaseNode) -> tuple[str, str]:
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        key = self.config.graph.title_key
        title = str(node.metadata.get(key, "") or "") if key else ""
        if title and text.startswith(title + "\n"):
            text = text[len(title) + 1 :]
        return title, text

    def _add_chunks(self, nodes: Sequence[BaseNode]) -> None:
        if not nodes:
            return
        model = self.config.graph.spacy_model
        nlp = load_spacy(model)
        labels = set(self.entity_labels)
        builder = SentenceTableBuilder(self._sentences)
        titles: list[str] = []  # per new chunk with sentences
        empty = 0
        # One pool for the whole build: its workers start (and load spaCy) once.
        many = self.nlp_processes > 1 and len(nodes) > TASK_TEXTS
        pool = ParsePool(model, self.nlp_processes) if many else None
        try:
            # A batch at a time, so the analyses never hold a whole corpus
            # (docs/scaling.md, "Memory").
            for start in range(0, len(nodes), _PARSE_BATCH):
                batch = nodes[start : start + _PARSE_BATCH]
                empty += self._add_batch(batch, nlp, labels, builder, titles, pool)
                builder.pack()
        finally:
            if pool is not None:
                pool.close()
        if empty:
            logger.warning("%d chunk(s) gave no sentence and are not in the graph", empty)
        table = builder.finish()
        # The texts to embed are made only now, from the packed sentences (memory).
        texts = _embedding_texts(table, len(self._sentences), titles)
        vectors = embed_texts(
            self.embed_model,
            texts,
            show_progress=getattr(self, "_show_progress", False),
            desc="Embedding sentences",
        )
        del texts
        if self._vectors is None or not len(self._sentences):
            self._vectors = vectors
        elif len(vectors):
            self._vectors = np.vstack([self._vectors, vectors])
        self._sentences = table
        self._rebuild()

    def _add_batch(
        self,
        nodes: Sequence[BaseNode],
        nlp: Any,
        labels: set[str],
        builder: SentenceTableBuilder,
        titles: list[str],
        pool: ParsePool | None = None,
    ) -> int:
        """Split and tag one batch into ``builder`` (titles of chunks with sentences onto
        ``titles``); returns how many chunks had no sentence."""
        inputs = [self._sentence_inputs(n) for n in nodes]
        analyses = analyze_batch([t for _, t in inputs], nlp, labels=labels, pool=pool)
        empty = 0
        for node, (title, _), analysis in zip(nodes, inputs, analyses, strict=True):
            if not analysis.sentences:
                empty += 1
                continue
            titles.append(title)
            for pos, (sent, ents) in enumerate(
                zip(analysis.sentences, analysis.sentence_entities, strict=True)
            ):
                keys = (k for k in (normalize_entity(e.text) for e in ents) if k)
                builder.add(sent, node.node_id, pos, keys)
        return empty

    def _remove_chunks(self, node_ids: Sequence[str]) -> None:
        keep = np.flatnonzero(~self._sentences.rows_of_chunks(node_ids))
        self._sentences = self._sentences.take(keep)
        if self._vectors is not None:
            self._vectors = self._vectors[keep]
        self._rebuild()

    def _rebuild(self) -> None:
        vectors = self._vectors if self._vectors is not None else np.zeros((0, 0), np.float32)
        # Readers keep the old snapshot until this assignment.
        self._sg = SentenceGraph.build(
            self._sentences,
            vectors,
            m=self.config.graph.m,
            window=self.config.graph.window,
            key_cut=self.key_cut,
        )
        self._graph = None
        logger.info(
            "sentence graph: %d sentences, %d SS, %d SA edges, %d key entities",
            len(self._sg),
            self._sg.num_edges("SS"),
            self._sg.num_edges("SA"),
            self._sg.key_matrix.shape[1],
        )

    # --------------------------------------------------------------- persistence

    def _persist_state(self, folder: Path) -> None:
        write_json(
            folder / _RECORDS_FILE,
            [[r.text, r.chunk_id, r.position, list(r.entities)] for r in self._sg.records],
        )
        vectors = self._vectors if self._vectors is not None else np.zeros((0, 0), np.float32)
        write_arrays(folder / _VECTORS_FILE, vectors=vectors)

    def _load_state(self, folder: Path, manifest: dict[str, Any]) -> None:
        self._sentences = SentenceTable.from_rows(read_json(folder / _RECORDS_FILE))
        self._vectors = read_arrays(folder / _VECTORS_FILE)["vectors"].astype(np.float32)
        graph = self._graph
        self._rebuild()
        self._graph = graph

    # ------------------------------------------------------------------ engines

    def as_retriever(self, **kwargs: Any) -> SentenceGraphRetriever:
        """The LLM-free :class:`~.retriever.SentenceGraphRetriever` with the index's config
        (``kwargs``: ``similarity_top_k``, ``reranker``, retrieval fields by name)."""
        return SentenceGraphRetriever(self, **kwargs)

    def as_query_engine(self, llm=None, **kwargs: Any) -> ChainRAGQueryEngine:
        """A :class:`~.engine.ChainRAGQueryEngine` (decompose, retrieve on the graph, rewrite;
        ``kwargs``: ``similarity_top_k``, ``streaming``, ``reranker``, fields by name)."""
        return ChainRAGQueryEngine(self, llm=llm, **kwargs)  # None: the index's LLM


def _embedding_texts(table: SentenceTable, first_row: int, titles: Sequence[str]) -> list[str]:
    """What is embedded for the rows from ``first_row`` on: ``"title: sentence"`` (or the
    sentence), given one title per chunk of those rows."""
    first_chunk = int(table.chunk_rows[first_row]) if first_row < len(table) else 0
    out = []
    for code, sent in zip(
        table.chunk_rows[first_row:].tolist(), table.texts.strings(first_row), strict=True
    ):
        title = titles[code - first_chunk]
        out.append(f"{title}: {sent}" if title else sent)
    return out


def to_typed_graph(sg: SentenceGraph) -> TypedGraph:
    """The sentence graph as a :class:`TypedGraph` (sentences, key entities, EC/SS/SA edges)."""
    graph = TypedGraph(meta={"method": "chainrag", **sg.params, "edge_kinds": list(EDGE_KINDS)})
    ids = sentence_ids(sg)
    graph.add_nodes(
        ids,
        "sentence",
        [{"text": r.text, "chunk_id": r.chunk_id, "position": r.position} for r in sg.records],
    )
    entities = list(sg.entity_vocab)
    graph.add_nodes([f"entity::{e}" for e in entities], "entity", [{"name": e} for e in entities])
    for kind, mat in (("SS", sg.ss), ("SA", sg.sa)):
        coo = mat.tocoo()
        upper = coo.row < coo.col
        graph.add_edges(
            (
                (ids[i], ids[j], float(w))
                for i, j, w in zip(
                    coo.row[upper].tolist(),
                    coo.col[upper].tolist(),
                    coo.data[upper].tolist(),
                    strict=True,
                )
            ),
            kind,
        )
    kcoo = sg.key_matrix.tocoo()
    graph.add_edges(
        (
            (ids[i], f"entity::{entities[j]}")
            for i, j in zip(kcoo.row.tolist(), kcoo.col.tolist(), strict=True)
        ),
        "EC",
    )
    return graph
