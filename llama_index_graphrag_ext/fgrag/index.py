"""``FGRAGIndex``: FG-RAG's entity graph [P §3.1, Eqs. 1-3] as a suite index.

Indexing follows the paper's graph construction: chunks (1200 tokens, 100
overlap [P §6.1]) go through ``kg_extractors`` (LlamaIndex's contract: the
paper's LLM extraction, the LLM-free co-occurrence stand-in, or LlamaIndex's
own path extractors), same-name entities are merged into one node whose
descriptions are kept as a capped list (Eq. 2), and each merged entity is
embedded from its name and descriptions for vector matching.

Like the suite's other indexes it is a
[`GraphIndexBase`][llama_index_graphrag_ext.core.index.GraphIndexBase]: chunks
live in the docstore, the graph is one
[`EntityGraph`][llama_index_graphrag_ext.fgrag.graph.EntityGraph] of arrays,
and ``persist`` / ``load`` use the suite's manifest format. Given a
``property_graph_store`` (Neo4j, LadybugDB, ...), the graph is also written
there and expansion reads its relations from it (see :mod:`.stores`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.graph_stores.simple_labelled import SimplePropertyGraphStore
from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY, PropertyGraphStore
from llama_index.core.llms import LLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, Document, MetadataMode, TransformComponent

from ..core.embeddings import embed_texts
from ..core.index import GraphIndexBase
from ..core.llm import run_sync
from ..core.vectors import InMemoryVectorTable, RowSearcher
from ..core.windows import ChunkWindows, chunk_of, embed_with_windows, find_pooler, window_rows
from .expansion import GraphNeighbours, Neighbours
from .extract import CooccurrenceExtractor, FGRAGExtractor, default_extractor
from .graph import EntityGraph, GraphBuilder
from .stores import HopReader, StoreNeighbours, StoreSearch, delete_nodes, write_graph

logger = logging.getLogger(__name__)

#: Chunks per extraction batch (LLM extractors keep their concurrency within one).
EXTRACT_BATCH = 256
#: Name of the chunk-vector table (files ``chunks.npz`` / ``chunks.ids.json``).
CHUNK_TABLE = "chunks"
#: The windows of chunks longer than the embedder's window (core/windows.py).
WINDOW_TABLE = "chunk_windows"


def default_chunker() -> SentenceSplitter:
    """The paper's chunking: 1200 tokens with 100 overlap [P §6.1]."""
    return SentenceSplitter(chunk_size=1200, chunk_overlap=100)


class FGRAGIndex(GraphIndexBase):
    """FG-RAG's entity graph over chunks, built like any LlamaIndex index.

    ::

        index = FGRAGIndex.from_documents(docs)                       # the resolved LLM tier
        index = FGRAGIndex.from_documents(docs, kg_extractors=[CooccurrenceExtractor()])
        index = FGRAGIndex.from_documents(docs, property_graph_store=LadybugPropertyGraphStore(db))

    Args:
        nodes: Chunk nodes (``from_documents`` chunks documents first, 1200/100 tokens).
        kg_extractors: Extractors instead of the default one (the paper's LLM
            extraction with the index's LLM; co-occurrence when there is none,
            and a log line and :attr:`llm_steps` say so).
        property_graph_store: A LlamaIndex property graph store to hold the
            graph's structure; expansion then reads relations from it.
        hop_reader: How expansion reads one hop from that store (default: its
            ``get_rel_map``); see :mod:`.stores`.
        store_vector_search: Match entities (Eqs. 6-7) with the store's own
            ``vector_query`` (re-scored exactly); off by default, since some stores
            say they can and cannot (LadybugDB offline).
        max_descriptions_per_entity: Cap on an entity's merged descriptions (authors: 50).
        llm_options: Settings of the default LLM extractor (``max_concurrency``,
            ``max_attempts``, ``timeout``, ``cache_path``, ``on_llm_failure``).
        extractors: Class names of the extractors that built a persisted index
            (set by ``load``; ``["CooccurrenceExtractor"]`` rebuilds that one).
        **kwargs: The :class:`~..core.index.GraphIndexBase` arguments
            (``embed_model``, ``llm``, ``vector_store``, ``callback_manager``, ...).
    """

    index_kind = "fgrag"
    format_version = 2

    def _configure(
        self,
        kg_extractors: list[TransformComponent] | None = None,
        property_graph_store: PropertyGraphStore | None = None,
        max_descriptions_per_entity: int = 50,
        llm_options: dict[str, Any] | None = None,
        extractors: list[str] | None = None,
        hop_reader: HopReader | None = None,
        store_vector_search: bool = False,
    ) -> None:
        if max_descriptions_per_entity <= 0:
            raise ValueError("max_descriptions_per_entity must be > 0")
        self._cap = int(max_descriptions_per_entity)
        self._external_store = property_graph_store
        self._hop_reader = hop_reader
        self._store_vector_search = store_vector_search
        self._simple_store: tuple[EntityGraph, SimplePropertyGraphStore] | None = None
        self._llm_options = dict(llm_options or {})
        if (
            kg_extractors is None
            and extractors == [CooccurrenceExtractor.__name__]
            and (self._llm_arg is None)
        ):
            kg_extractors = [CooccurrenceExtractor()]  # built LLM-free: inserts get the same graph
        self._given_extractors = list(kg_extractors) if kg_extractors else None
        self._extractors: list[TransformComponent] | None = None
        self._entity_graph = EntityGraph.empty()
        # The LLM-free chunk ranking's own evidence (not in the paper, which
        # never ranks chunks): each chunk's vector, as a dense index keeps it.
        self._chunks = InMemoryVectorTable()
        self._windows = InMemoryVectorTable()  # long chunks' windows, by window id
        self._window_view: tuple[Any, ChunkWindows | None] | None = None
        self.build_stats: dict[str, Any] = {"chunks_without_entities": 0}

    def config(self) -> dict[str, Any]:
        return {"max_descriptions_per_entity": self._cap, "extractors": self.extractors_used}

    @property
    def kg_extractors(self) -> list[TransformComponent]:
        """The extractors (the default one is made, with the index's LLM, on first use)."""
        if self._extractors is None:
            if self._given_extractors is not None:
                extractors = self._given_extractors
                for extractor in extractors:
                    if isinstance(extractor, FGRAGExtractor):
                        extractor.attach_steps(self.llm_steps)
                no_llm = not any(isinstance(e, FGRAGExtractor) for e in extractors)
                if no_llm and self.llm_steps.record("extraction") is None:
                    self.llm_steps.chose_llm_free(
                        "extraction", "spaCy co-occurrence graph", "kg_extractors without an LLM"
                    )
            else:
                # The suite's rule, once: Settings.llm or the environment give the
                # paper's LLM extraction; the embedded SmolLM2 cannot (warned).
                extractors = [
                    default_extractor(self.llm_choice, steps=self.llm_steps, **self._llm_options)
                ]
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

    # ----------------------------------------------------------------- build

    def _add_chunks(self, nodes: Sequence[BaseNode]) -> None:
        builder = GraphBuilder(self._entity_graph if len(self._entity_graph) else None, self._cap)
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
        builder = GraphBuilder(self._entity_graph, self._cap)
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

    def _embed_chunks(self, nodes: Sequence[BaseNode], vectors: bool = True) -> None:
        """Embed chunks for the retriever's ranking (the text a dense index embeds), and
        keep a long chunk's windows (``vectors=False``: only the windows)."""
        if not nodes:
            return
        texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
        ids = [n.node_id for n in nodes]
        show = getattr(self, "_show_progress", False)
        if not vectors:  # only the long ones need embedding
            pooler = find_pooler(self.embed_model)
            long = [i for i, r in enumerate(pooler.window_ranges(texts)) if r] if pooler else []
            ids, texts = [ids[i] for i in long], [texts[i] for i in long]
        found, windows = embed_with_windows(
            self.embed_model, texts, show_progress=show, desc="Chunk vectors"
        )
        if vectors:
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

    # ----------------------------------------------------------------- reading

    @property
    def chunk_vectors(self) -> InMemoryVectorTable:
        """Each chunk's unit vector (the retriever's chunk similarity and its fill)."""
        return self._chunks

    def graph_snapshot(self) -> EntityGraph:
        """The current entity graph (immutable: a change swaps in a new one)."""
        return self._entity_graph

    @property
    def property_graph_store(self) -> PropertyGraphStore:
        """The graph as a LlamaIndex property graph store, for LlamaIndex's graph tooling.

        The store given to the index, or an in-memory ``SimplePropertyGraphStore``
        made from the graph on first use after each change.
        """
        if self._external_store is not None:
            return self._external_store
        graph = self._entity_graph
        if self._simple_store is None or self._simple_store[0] is not graph:
            store = SimplePropertyGraphStore()
            write_graph(store, graph, chunks=self.get_chunks(self.chunk_ids()))
            self._simple_store = (graph, store)
        return self._simple_store[1]

    @property
    def external_store(self) -> PropertyGraphStore | None:
        """The property graph store given to the index (``None``: in memory only)."""
        return self._external_store

    def search_path(self, graph: EntityGraph) -> tuple[RowSearcher, Neighbours]:
        """How retrieval over ``graph`` matches entities and reads relations.

        Matching (Eqs. 6-7) runs in the ``vector_store`` when the index has one,
        else in the property graph store when it answers vector queries, else
        over the in-memory matrix; relations come from the property graph store
        when there is one, hop by hop, else from the graph's arrays.
        """
        store = self._external_store
        if self.vector_store is None and store is not None and self._store_vector_search:
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

    def as_retriever(self, **kwargs: Any) -> BaseRetriever:
        """An [`FGRAGRetriever`][llama_index_graphrag_ext.fgrag.retriever.FGRAGRetriever] over this index."""
        from .retriever import FGRAGRetriever

        return FGRAGRetriever(self, **kwargs)

    def as_query_engine(self, llm: LLM | None = None, **kwargs: Any):
        """An [`FGRAGQueryEngine`][llama_index_graphrag_ext.fgrag.engine.FGRAGQueryEngine] over this index."""
        from .engine import FGRAGQueryEngine

        return FGRAGQueryEngine(self, llm=llm, **kwargs)

    def stats(self) -> dict[str, Any]:
        """Counts for reports: entities, relations, chunks and which extractor built them."""
        graph = self._entity_graph
        return {
            "entities": len(graph),
            "relations": graph.num_relations,
            "chunks": len(self),
            "chunk_windows": len(self._windows),
            "extractors": self.extractors_used,
            "llm_steps": self.llm_steps.to_dict(),
        }

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

    # ----------------------------------------------------------------- files

    def _persist_state(self, folder: Path) -> None:
        self._entity_graph.save(folder)
        self._chunks.persist(folder, CHUNK_TABLE)
        self._windows.persist(folder, WINDOW_TABLE)

    def _load_state(self, folder: Path, manifest: dict[str, Any]) -> None:
        self._entity_graph = EntityGraph.load(folder)
        if (folder / f"{WINDOW_TABLE}.npz").is_file():
            self._windows = InMemoryVectorTable.load(folder, WINDOW_TABLE)
        if (folder / f"{CHUNK_TABLE}.npz").is_file():
            self._chunks = InMemoryVectorTable.load(folder, CHUNK_TABLE)
            if not (folder / f"{WINDOW_TABLE}.npz").is_file():
                # Written before long chunks kept their windows: embed those now.
                ids = self.chunk_ids()
                self._embed_chunks(self.get_chunks(ids), vectors=False)
                self.build_stats["chunk_windows_embedded_on_load"] = len(self._windows)
                logger.warning(
                    "FG-RAG load: %s has no windows of long chunks (an older index); "
                    "embedded %d window(s) now; persist again to keep them",
                    folder,
                    len(self._windows),
                )
        else:  # written before chunks had vectors: embed them once now
            ids = self.chunk_ids()
            logger.warning(
                "FG-RAG load: %s has no chunk vectors (an older index); embedding its %d "
                "chunk(s) now; persist again to keep them",
                folder,
                len(ids),
            )
            self._embed_chunks(self.get_chunks(ids))
            self.build_stats["chunks_embedded_on_load"] = len(ids)
        store = self._external_store
        if store is not None and len(self._entity_graph):
            probe = store.get(ids=[self._entity_graph.name(0)])
            if not probe:  # an empty store: write the graph into it
                logger.info("FG-RAG load: writing the graph into %s", type(store).__name__)
                write_graph(store, self._entity_graph, chunks=self.get_chunks(self.chunk_ids()))
