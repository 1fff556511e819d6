"""``FGRAGIndex``: FG-RAG's entity graph [P §3.1, Eqs. 1-3] as a suite index.

Chunks go through ``kg_extractors`` and are merged into one immutable
:class:`~.graph.EntityGraph`; given a ``property_graph_store``, the graph is also
written there and expansion reads its relations from it (:mod:`.stores`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY, PropertyGraphStore
from llama_index.core.llms import LLM
from llama_index.core.schema import BaseNode, Document, MetadataMode, TransformComponent

from ..core.embeddings import embed_texts
from ..core.index import GraphIndexBase
from ..core.llm import run_sync
from ..core.splitting import sentence_splitter
from ..core.vectors import InMemoryVectorTable, RowSearcher
from ..core.windows import ChunkWindows, chunk_of, embed_with_windows, window_rows
from .config import FGRAGConfig
from .cooccurrence import CooccurrenceExtractor
from .engine import FGRAGQueryEngine
from .expansion import GraphNeighbours, Neighbours
from .extract import STEP, FGRAGExtractor, make_extractor
from .graph import EntityGraph, GraphBuilder
from .retriever import FGRAGRetriever
from .stores import HopReader, StoreNeighbours, StoreSearch, delete_nodes, write_graph

logger = logging.getLogger(__name__)

#: Chunks per extraction batch (LLM extractors keep their concurrency within one).
EXTRACT_BATCH = 256
CHUNK_TABLE = "chunks"
#: The windows of chunks longer than the embedder's window (core/windows.py).
WINDOW_TABLE = "chunk_windows"


def default_chunker() -> TransformComponent:
    """The paper's chunking: 1200 tokens with 100 overlap [P §6.1]."""
    return sentence_splitter(chunk_size=1200, chunk_overlap=100)


class FGRAGIndex(GraphIndexBase):
    """FG-RAG's entity graph over chunks, built like any LlamaIndex index.

    ::

        index = FGRAGIndex.from_documents(docs)                  # LLM-free: co-occurrence graph
        index = FGRAGIndex.from_documents(docs, config="paper")  # the LLM extracts (suite's rule)
        index = FGRAGIndex.from_documents(docs, property_graph_store=LadybugPropertyGraphStore(db))

    Args:
        nodes: Chunk nodes (``from_documents`` chunks documents first, 1200/100 tokens).
        config: A :class:`~.config.FGRAGConfig` or preset name: ``default`` (the
            LLM-free co-occurrence graph) or ``paper`` (the LLM's graph and
            map-reduce answers).
        kg_extractors: Extractor objects instead of the one the config describes.
        property_graph_store: A LlamaIndex property graph store to hold the
            graph's structure; expansion then reads relations from it.
        hop_reader: How expansion reads one hop from that store (default: its
            ``get_rel_map``); see :mod:`.stores`.
        **kwargs: See :class:`~..core.index.GraphIndexBase`, and config fields by name.
    """

    index_kind = "fgrag"
    format_version = 3
    config_class = FGRAGConfig

    def _configure(
        self,
        kg_extractors: list[TransformComponent] | None = None,
        property_graph_store: PropertyGraphStore | None = None,
        hop_reader: HopReader | None = None,
    ) -> None:
        if kg_extractors:
            described = _described(kg_extractors)
            changed = {k: v for k, v in described.items() if self.config.flat()[k] != v}
            if changed:  # the config says how the graph was built (and inserts extend it)
                self.config = self.config.updated(changed)
        self._external_store = property_graph_store
        self._hop_reader = hop_reader
        self._simple_store: tuple[EntityGraph, SimplePropertyGraphStore] | None = None
        self._given_extractors = list(kg_extractors) if kg_extractors else None
        self._extractors: list[TransformComponent] | None = None
        self._entity_graph = EntityGraph.empty()
        # Chunk vectors for the LLM-free ranking (the paper never ranks chunks).
        self._chunks = InMemoryVectorTable()
        self._windows = InMemoryVectorTable()  # long chunks' windows, by window id
        self._window_view: tuple[Any, ChunkWindows | None] | None = None
        self.build_stats: dict[str, Any] = {"chunks_without_entities": 0}

    @property
    def kg_extractors(self) -> list[TransformComponent]:
        """The extractors (the config's is made, with the index's LLM, on first use)."""
        if self._extractors is None:
            if self._given_extractors is not None:
                extractors = self._given_extractors
                for extractor in extractors:
                    if isinstance(extractor, FGRAGExtractor):
                        extractor.attach_steps(self.llm_steps)
                no_llm = not any(isinstance(e, FGRAGExtractor) for e in extractors)
                if no_llm and self.llm_steps.record(STEP) is None:
                    self.llm_steps.chose_llm_free(
                        STEP, "spaCy co-occurrence graph", "kg_extractors without an LLM"
                    )
            else:
                llm = self.llm_choice if self.config.uses_llm else None
                extractors = [make_extractor(self.config, llm, self.llm_steps)]
            self._extractors = extractors
        return self._extractors

    @property
    def extractors_used(self) -> list[str]:
        """Class names of the extractors that build this index's graph."""
        return [type(e).__name__ for e in self.kg_extractors]

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        transformations: list[TransformComponent] | None = None,
        **kwargs: Any,
    ) -> FGRAGIndex:
        """Chunk documents (1200/100 tokens unless ``transformations`` says otherwise) and index them."""
        return super().from_documents(
            documents, transformations=transformations or [default_chunker()], **kwargs
        )

    def _add_chunks(self, nodes: Sequence[BaseNode]) -> None:
        builder = GraphBuilder(
            self._entity_graph if len(self._entity_graph) else None,
            self.config.graph.max_descriptions_per_entity,
        )
        extractors = self.kg_extractors
        for start in range(0, len(nodes), EXTRACT_BATCH):
            batch = list(nodes[start : start + EXTRACT_BATCH])
            for extractor in extractors:
                if isinstance(extractor, CooccurrenceExtractor):
                    batch = extractor(batch)  # spaCy: CPU only, nothing to overlap
                else:
                    batch = run_sync(lambda e=extractor, b=batch: e.acall(b))
            for node in batch:
                kg_nodes = node.metadata.pop(KG_NODES_KEY, None) or []
                kg_rels = node.metadata.pop(KG_RELATIONS_KEY, None) or []
                builder.add(node.node_id, kg_nodes, kg_rels)
        if builder.no_entity:
            # Retrieval reaches chunks only through entities: say which ones it cannot reach.
            self.build_stats["chunks_without_entities"] += len(builder.no_entity)
            logger.warning(
                "FG-RAG index: %d of %d chunk(s) gave no entity and no query can reach them "
                "(text the extractor cannot read, e.g. a language its NER model lacks): %s",
                len(builder.no_entity),
                builder.chunks,
                builder.no_entity[:5],
            )
        self._swap(builder, chunks=nodes)
        self._embed_chunks(nodes)
        logger.info(
            "FG-RAG index: %d chunk(s) -> %d entities, %d relations (%s)",
            builder.chunks,
            len(self._entity_graph),
            self._entity_graph.num_relations,
            ", ".join(self.extractors_used),
        )

    def _remove_chunks(self, node_ids: Sequence[str]) -> None:
        builder = GraphBuilder(self._entity_graph, self.config.graph.max_descriptions_per_entity)
        emptied = builder.drop_chunks(set(node_ids))
        self._swap(builder)
        self._chunks.delete(node_ids)
        gone = set(node_ids)
        self._windows.delete([w for w in self._windows.ids if chunk_of(w) in gone])
        self.build_stats["chunk_windows"] = len(self._windows)
        if self._external_store is not None:
            # No store has a generic one-relation delete: relations the suite
            # dropped stay in the store and are ignored (see stores.py).
            delete_nodes(self._external_store, [*node_ids, *emptied])

    def _swap(self, builder: GraphBuilder, chunks: Sequence[BaseNode] = ()) -> None:
        """Finish ``builder``, embed what changed, write the store, and swap the graph in."""

        def embed(texts: list[str]) -> np.ndarray:
            show = getattr(self, "_show_progress", False)
            return embed_texts(self.embed_model, texts, show_progress=show, desc="Entity vectors")

        graph, fresh = builder.finish(embed)
        if self._external_store is not None:
            write_graph(
                self._external_store, graph, fresh, builder.changed_relations(graph), chunks
            )
        self._entity_graph = graph

    def _embed_chunks(self, nodes: Sequence[BaseNode]) -> None:
        """Embed chunks for the retriever's ranking (the text a dense index embeds), and
        keep a long chunk's windows."""
        if not nodes:
            return
        texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        ids = [n.node_id for n in nodes]
        show = getattr(self, "_show_progress", False)
        found, windows = embed_with_windows(
            self.embed_model, texts, show_progress=show, desc="Chunk vectors"
        )
        self._chunks.add(ids, found)
        window_ids, window_matrix = window_rows(ids, windows)
        if window_ids:
            self._windows.add(window_ids, window_matrix)
        self.build_stats["chunk_windows"] = len(self._windows)

    def chunk_windows(self) -> ChunkWindows | None:
        """The long chunks' windows, owned by their row in :attr:`chunk_vectors` (None: none)."""
        chunks, windows = self._chunks, self._windows
        # Tables swap in new arrays on every write: the arrays say whether it changed.
        key = (chunks.matrix, windows.matrix)
        view = self._window_view
        if view is None or view[0][0] is not key[0] or view[0][1] is not key[1]:
            rows = {cid: i for i, cid in enumerate(chunks.ids)}
            found = ChunkWindows.from_table(windows.ids, windows.matrix, rows)
            view = self._window_view = (key, found)
        return view[1]

    @property
    def chunk_vectors(self) -> InMemoryVectorTable:
        """Each chunk's unit vector (the retriever's chunk similarity and its fill)."""
        return self._chunks

    def graph_snapshot(self) -> EntityGraph:
        """The current entity graph (immutable: a change swaps in a new one)."""
        return self._entity_graph

    @property
    def property_graph_store(self) -> PropertyGraphStore:
        """The store given to the index, or an in-memory ``SimplePropertyGraphStore``
        made from the graph on first use after each change."""
        if self._external_store is not None:
            return self._external_store
        graph = self._entity_graph
        if self._simple_store is None or self._simple_store[0] is not graph:
            store = SimplePropertyGraphStore()
            write_graph(store, graph, chunks=self.get_chunks(self.chunk_ids()))
            self._simple_store = (graph, store)
        return self._simple_store[1]

    def search_path(
        self, graph: EntityGraph, store_vector_search: bool = False
    ) -> tuple[RowSearcher, Neighbours]:
        """How retrieval over ``graph`` matches entities and reads relations.

        Matching (Eqs. 6-7) runs in the ``vector_store`` if any, else in the
        property graph store with ``store_vector_search``, else in memory;
        relations come from the property graph store if any, else the graph's arrays.
        """
        store = self._external_store
        if self.vector_store is None and store is not None and store_vector_search:
            search: RowSearcher = StoreSearch(store, graph)
        else:
            # the ids as a function: only a store-backed search reads them
            search = self.searcher("entities", graph, lambda: graph.names, graph.vectors)
        if store is not None:
            neighbours: Neighbours = StoreNeighbours(store, graph, self._hop_reader)
        else:
            neighbours = GraphNeighbours(graph)
        return search, neighbours

    def _searchable(self) -> dict[str, tuple[Sequence[str], Any]]:
        graph = self._entity_graph
        chunks = self._chunks
        return {"entities": (graph.names, graph.vectors), CHUNK_TABLE: (chunks.ids, chunks.matrix)}

    def as_retriever(self, **kwargs: Any) -> FGRAGRetriever:
        """An :class:`~.retriever.FGRAGRetriever` with the index's config (``kwargs`` override it)."""
        return FGRAGRetriever(self, **kwargs)

    def as_query_engine(self, llm: LLM | None = None, **kwargs: Any) -> BaseQueryEngine:
        """The paper's map-reduce :class:`~.engine.FGRAGQueryEngine` over the LLM's graph;
        over the LLM-free graph, LlamaIndex's retrieve-then-synthesize engine."""
        if self.config.uses_llm:
            return FGRAGQueryEngine(self, llm=llm, **kwargs)
        return super().as_query_engine(llm=llm, **kwargs)

    def stats(self) -> dict[str, Any]:
        graph = self._entity_graph
        out = {
            "entities": len(graph),
            "relations": graph.num_relations,
            "chunks": len(self),
            "chunk_windows": len(self._windows),
            "extractors": self.extractors_used,
        }
        extraction = [e.stats for e in self.kg_extractors if isinstance(e, FGRAGExtractor)]
        if extraction:
            out["extraction"] = extraction[0] if len(extraction) == 1 else extraction
        return out

    def describe_entity(self, name: str) -> dict[str, Any]:
        """One entity's record (for debugging and docs)."""
        graph = self._entity_graph
        i = graph.row_of(name)
        if i is None:
            raise KeyError(name)
        pairs = graph.descriptions(i)
        return {
            "name": name,
            "display_name": graph.display(i),
            "descriptions": [t for t, _ in pairs],
            "source_chunks": [c for _, c in pairs],
            "degree": graph.degree(i),
        }

    def _persist_state(self, folder: Path) -> None:
        self._entity_graph.save(folder)
        self._chunks.persist(folder, CHUNK_TABLE)
        self._windows.persist(folder, WINDOW_TABLE)

    def _load_state(self, folder: Path, manifest: dict[str, Any]) -> None:
        self._entity_graph = EntityGraph.load(folder)
        self._chunks = InMemoryVectorTable.load(folder, CHUNK_TABLE)
        self._windows = InMemoryVectorTable.load(folder, WINDOW_TABLE)
        self.build_stats["chunk_windows"] = len(self._windows)
        store = self._external_store
        if store is not None and len(self._entity_graph):
            probe = store.get(ids=[self._entity_graph.name(0)])
            if not probe:  # an empty store: write the graph into it
                logger.info("FG-RAG load: writing the graph into %s", type(store).__name__)
                write_graph(store, self._entity_graph, chunks=self.get_chunks(self.chunk_ids()))


def _described(extractors: Sequence[TransformComponent]) -> dict[str, Any]:
    """The config fields FG-RAG's own extractor objects stand for (none for others)."""
    llm = [e for e in extractors if isinstance(e, FGRAGExtractor)]
    if llm:
        return {"extractor": "llm", "max_gleanings": llm[0].max_gleanings}
    cooc = [e for e in extractors if isinstance(e, CooccurrenceExtractor)]
    if cooc and len(cooc) == len(extractors):
        return {
            "extractor": "cooccurrence",
            "sentence_splitter": cooc[0].sentence_splitter,
            "include_noun_chunks": cooc[0].include_noun_chunks,
        }
    return {}
