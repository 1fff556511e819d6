"""``SentenceGraphIndex``: ChainRAG's LLM-free sentence graph as a LlamaIndex index (paper §3.1)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode, MetadataMode

from ..core.embeddings import embed_texts
from ..core.graph import TypedGraph
from ..core.index import GraphIndexBase
from ..core.persist import read_arrays, read_json, write_arrays, write_json
from ..core.text import DEFAULT_ENTITY_LABELS, analyze_batch, load_spacy, normalize_entity
from ..core.text.parallel import TASK_TEXTS, ParsePool
from .sentence_graph import EDGE_KINDS, KeyCut, SentenceGraph
from .sentences import SentenceTable, SentenceTableBuilder

logger = logging.getLogger(__name__)

_RECORDS_FILE = "sentences.json"
_VECTORS_FILE = "sentence_vectors.npz"
#: Chunks parsed and packed at a time (see ``_add_chunks``).
_PARSE_BATCH = 64


class SentenceGraphIndex(GraphIndexBase):
    """One node per sentence, linked by EC, SS and SA edges; built without any LLM.

    Each chunk is split into sentences and its named entities extracted in one
    spaCy pass (:func:`~..core.text.analyze_batch`); sentences are embedded once
    (batched) and the three edge kinds built with sparse / blocked matrix
    products (:class:`~.sentence_graph.SentenceGraph`). Inserting or deleting
    chunks rebuilds the derived edges (SS and EC depend on the whole corpus: the
    kNN lists and the BM25 statistics), never re-embeds or re-parses old chunks.

    Args:
        nodes: Chunk nodes (``from_documents`` makes them).
        alpha: Share of entities kept as key entities for EC edges (paper §4.1: 60 %).
        m: SS neighbours per sentence (paper §4.1: 10).
        window: SA span: sentences at most this far apart in a chunk are linked (§3.1: 3).
        entity_labels: spaCy labels kept as entities (default: all but purely numeric ones).
        title_key: Metadata key whose value prefixes each sentence for embedding
            (``"Title: sentence"``), so sentences keep their passage's subject; a
            leading title line in the text is not indexed as a sentence. ``None``
            embeds the bare sentences.
        spacy_model: spaCy pipeline name (default: ``en_core_web_sm`` or its repackaging).
        key_importance / key_cut / max_df / keep_rarest: The rest of the
            key-entity cut (:class:`~.sentence_graph.KeyCut`): IDF importance,
            one global cut, hubs on more than 20 sentences never key, each
            sentence's rarest linking entity kept (chosen on 2wiki-101;
            ``key_importance="bm25", key_cut="sentence", max_df=None,
            keep_rarest=False`` is the authors' code's importance).
        nlp_processes: Processes for spaCy's sentences and NER (1: in this process;
            2+: a :class:`~..core.text.parallel.ParsePool` kept for one build, the
            same sentences and entities in less time on several cores). A
            resource, not part of what is built: not persisted.
        **kwargs: ``embed_model``, ``llm``, ``callback_manager``, ``storage_context``,
            ``show_progress`` (see :class:`~..core.index.GraphIndexBase`).
    """

    index_kind = "chainrag-sentence-graph"
    format_version = 1

    def _configure(
        self,
        alpha: float = 0.6,
        m: int = 10,
        window: int = 3,
        entity_labels: Collection[str] | None = None,
        title_key: str | None = "title",
        spacy_model: str | None = None,
        key_importance: str = "idf",
        key_cut: str = "global",
        max_df: int | None = 20,
        keep_rarest: bool = True,
        nlp_processes: int = 1,
    ) -> None:
        # Validates every field of the cut (alpha in (0, 1], known kinds, max_df >= 0).
        self.key_cut = KeyCut(
            alpha=float(alpha),
            importance=key_importance,
            cut=key_cut,
            max_df=int(max_df) if max_df else None,
            keep_rarest=bool(keep_rarest),
        )
        if int(m) < 0 or int(window) < 0:
            raise ValueError("m and window must be >= 0")
        if int(nlp_processes) < 1:
            raise ValueError(f"nlp_processes must be >= 1, got {nlp_processes}")
        self.nlp_processes = int(nlp_processes)
        self.alpha, self.m, self.window = float(alpha), int(m), int(window)
        labels = DEFAULT_ENTITY_LABELS if entity_labels is None else entity_labels
        self.entity_labels = sorted(labels)
        self.title_key = title_key
        self.spacy_model = spacy_model
        self._sentences = SentenceTable.empty()
        self._vectors: np.ndarray | None = None
        self._sg = SentenceGraph.build(self._sentences, np.zeros((0, 0), np.float32))
        self._graph = None  # the TypedGraph view, built on demand (see ``graph``)

    def config(self) -> dict[str, Any]:
        """Settings stored in the manifest and passed back on load."""
        return {
            "alpha": self.alpha,
            "m": self.m,
            "window": self.window,
            "entity_labels": self.entity_labels,
            "title_key": self.title_key,
            "spacy_model": self.spacy_model,
            "key_importance": self.key_cut.importance,
            "key_cut": self.key_cut.cut,
            "max_df": self.key_cut.max_df,
            "keep_rarest": self.key_cut.keep_rarest,
        }

    # ------------------------------------------------------------------ reading

    @property
    def sentence_graph(self) -> SentenceGraph:
        """The current read-only sentence graph (a consistent snapshot)."""
        return self._sg

    @property
    def graph(self) -> TypedGraph | None:
        """A :class:`TypedGraph` view for ``graphrag-ext viz`` and inspection (built lazily).

        Node kinds ``sentence`` and ``entity``; edge kinds ``SS`` and ``SA``
        between sentences, and ``EC`` from a sentence to each of its key
        entities (two sentences are EC-linked when they share an entity node).
        """
        if self._graph is None and len(self._sg):
            self._graph = to_typed_graph(self._sg)
        return self._graph

    def sentence_id(self, row: int) -> str:
        """A stable id of a sentence row: ``<chunk id>::s<position>``."""
        table = self._sg.sentences
        return f"{table.chunk_id(row)}::s{table.position(row)}"

    def _searchable(self) -> dict[str, tuple[Sequence[str], np.ndarray]]:
        sg = self._sg  # the seed search (first round) looks up sentences
        return {"sentences": (sentence_ids(sg), sg.vectors)}

    # ------------------------------------------------------------------ building

    def _sentence_inputs(self, node: BaseNode) -> tuple[str, str]:
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        title = str(node.metadata.get(self.title_key, "") or "") if self.title_key else ""
        if title and text.startswith(title + "\n"):
            text = text[len(title) + 1 :]
        return title, text

    def _add_chunks(self, nodes: Sequence[BaseNode]) -> None:
        if not nodes:
            return
        nlp = load_spacy(self.spacy_model)
        labels = set(self.entity_labels)
        builder = SentenceTableBuilder(self._sentences)
        titles: list[str] = []  # per new chunk with sentences
        empty = 0
        # One pool for the whole build: its workers start (and load spaCy) once.
        many = self.nlp_processes > 1 and len(nodes) > TASK_TEXTS
        pool = ParsePool(self.spacy_model, self.nlp_processes) if many else None
        try:
            # Parsed and packed a batch at a time: with every chunk's analysis alive at
            # once, the sentences kept from them were scattered over the analyses'
            # memory and kept it resident after the build (4,000 chunks: 66.5 MB
            # retained, 50.0 MB in batches; docs/scaling.md, "Memory").
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
        # The texts to embed are made only now, from the packed sentences: made in
        # the loop, they were alive across every batch and spread the batches over
        # more arenas, which the few objects spaCy keeps from each batch then pinned.
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
        """Split and tag one batch of chunks into ``builder``; returns the chunks with no sentence.

        Appends the title of each chunk that has sentences to ``titles``.
        """
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
        # Readers keep using the old snapshot until this assignment (thread-safe swap).
        self._sg = SentenceGraph.build(
            self._sentences, vectors, m=self.m, window=self.window, key_cut=self.key_cut
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

    def as_retriever(self, **kwargs: Any):
        """The LLM-free :class:`~.retriever.SentenceGraphRetriever` over this index."""
        from .retriever import SentenceGraphRetriever

        kwargs.setdefault("callback_manager", self._callback_manager)
        return SentenceGraphRetriever(self, **kwargs)

    def as_query_engine(self, llm=None, **kwargs: Any):
        """A :class:`~.engine.ChainRAGQueryEngine` (decompose, retrieve on the graph, rewrite)."""
        from .engine import ChainRAGQueryEngine

        kwargs.setdefault("callback_manager", self._callback_manager)
        return ChainRAGQueryEngine(self, llm=llm, **kwargs)  # None: the index's LLM


def _embedding_texts(table: SentenceTable, first_row: int, titles: Sequence[str]) -> list[str]:
    """What is embedded for the rows from ``first_row`` on: ``"title: sentence"`` (or the sentence).

    ``titles`` holds one title per chunk of those rows, in row order.
    """
    first_chunk = int(table.chunk_rows[first_row]) if first_row < len(table) else 0
    out = []
    for code, sent in zip(
        table.chunk_rows[first_row:].tolist(), table.texts.strings(first_row), strict=True
    ):
        title = titles[code - first_chunk]
        out.append(f"{title}: {sent}" if title else sent)
    return out


def sentence_ids(sg: SentenceGraph) -> list[str]:
    """The sentence ids of a graph snapshot in row order (``<chunk id>::s<position>``)."""
    table = sg.sentences
    chunks, positions = table.chunk_ids, table.positions.tolist()
    return [f"{chunks[c]}::s{p}" for c, p in zip(table.chunk_rows.tolist(), positions, strict=True)]


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
